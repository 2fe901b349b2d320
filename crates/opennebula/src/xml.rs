//! The XML documents OpenNebula 6.10 answers `*.info` calls with, read into typed
//! structs: `VMTEMPLATE_POOL/VMTEMPLATE`, `IMAGE_POOL/IMAGE` and `VM_POOL/VM`
//! (element names from `share/doc/xsd/{vmtemplate,image,vm,vm_pool}.xsd`).
//!
//! The document is read with quick-xml's event reader into a small element tree first,
//! because a `TEMPLATE` holds arbitrary element names, repeats them (`DISK`, `NIC`) and
//! its order matters for [`crate::template::Template::render`]; serde would lose both.
//!
//! Guarantees:
//! - values may be plain text, entity-escaped or CDATA (OpenNebula writes template values
//!   as `<![CDATA[..]]>`), and read the same;
//! - unknown elements are skipped; an element flightdeck needs that is missing or not a
//!   number is an [`XmlError`] naming the object and the element (`VM 12: no STATE`);
//! - reading is bounded: at most [`DEPTH_MAX`] levels and [`ELEMENTS_MAX`] elements.

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::template::Template;

/// The deepest element nesting read (a VM is 5 deep: `VM_POOL/VM/TEMPLATE/NIC/IP`).
pub const DEPTH_MAX: usize = 32;
/// The most elements one answer may hold.
pub const ELEMENTS_MAX: usize = 2_000_000;

/// Why an OpenNebula document could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct XmlError(pub String);

/// One XML element: its name, its text (leaf elements), its child elements in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child named `name`.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The child's text, if the child is there.
    pub fn text_of(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }

    /// Reads a `TEMPLATE`-like element: a leaf child is `KEY = value`, a child with
    /// children is a vector of its leaves.
    pub fn to_template(&self) -> Template {
        let mut t = Template::default();
        for c in &self.children {
            if c.children.is_empty() {
                t.push_single(c.name.clone(), c.text.clone());
            } else {
                let members = c
                    .children
                    .iter()
                    .map(|m| (m.name.clone(), m.text.clone()))
                    .collect();
                t.push_vector(c.name.clone(), members);
            }
        }
        t
    }
}

/// Reads an XML document into its root element.
pub fn parse_document(xml: &str) -> Result<Element, XmlError> {
    let mut reader = Reader::from_str(xml);
    let mut stack: Vec<Element> = Vec::new();
    let mut count = 0usize;
    let fail = |reader: &Reader<&[u8]>, why: String| {
        XmlError(format!(
            "the XML is not well-formed at byte {}: {why}",
            reader.buffer_position()
        ))
    };
    loop {
        let event = reader
            .read_event()
            .map_err(|e| fail(&reader, e.to_string()))?;
        match event {
            Event::Start(e) => {
                count += 1;
                if count > ELEMENTS_MAX {
                    return Err(XmlError(format!(
                        "the document has more than {ELEMENTS_MAX} elements"
                    )));
                }
                if stack.len() >= DEPTH_MAX {
                    return Err(XmlError(format!(
                        "the document nests deeper than {DEPTH_MAX} elements"
                    )));
                }
                stack.push(Element {
                    name: e.name().as_ref().to_string(),
                    ..Element::default()
                });
            }
            Event::Empty(e) => {
                count += 1;
                let el = Element {
                    name: e.name().as_ref().to_string(),
                    ..Element::default()
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => return Ok(el),
                }
            }
            Event::End(_) => {
                let Some(mut el) = stack.pop() else {
                    return Err(fail(&reader, "an end tag without a start".into()));
                };
                if !el.children.is_empty() {
                    // Indentation between child elements is not a value.
                    el.text.clear();
                }
                match stack.last_mut() {
                    Some(parent) => parent.children.push(el),
                    None => return Ok(el),
                }
            }
            Event::Text(t) => {
                if let Some(el) = stack.last_mut() {
                    el.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(el) = stack.last_mut() {
                    el.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => quick_xml::escape::resolve_predefined_entity(&r)
                        .map(str::to_string)
                        .ok_or_else(|| fail(&reader, format!("unknown entity &{};", &*r)))?,
                    Err(e) => return Err(fail(&reader, e.to_string())),
                };
                if let Some(el) = stack.last_mut() {
                    el.text.push_str(&resolved);
                }
            }
            Event::Eof => {
                return Err(XmlError(match stack.last() {
                    Some(open) => format!("the document ends inside <{}>", open.name),
                    None => "the document is empty".into(),
                }));
            }
            Event::Comment(_) | Event::Decl(_) | Event::PI(_) | Event::DocType(_) => {}
        }
    }
}

/// `<LOCK>`: present only while the object is locked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    /// 1 USE, 2 MANAGE, 3 ADMIN, 4 ALL.
    pub locked: i64,
    /// The locking user's ID (absent in pool listings of VMs).
    pub owner: Option<i64>,
    /// Unix seconds.
    pub time: Option<i64>,
    pub req_id: Option<i64>,
}

/// `<PERMISSIONS>`: 1 where the right is granted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    pub owner_u: u8,
    pub owner_m: u8,
    pub owner_a: u8,
    pub group_u: u8,
    pub group_m: u8,
    pub group_a: u8,
    pub other_u: u8,
    pub other_m: u8,
    pub other_a: u8,
}

/// What every OpenNebula pool object has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Common {
    pub id: u32,
    pub uid: i64,
    pub gid: i64,
    pub uname: String,
    pub gname: String,
    pub name: String,
    pub lock: Option<Lock>,
    pub permissions: Option<Permissions>,
}

/// `<VMTEMPLATE>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateDoc {
    pub common: Common,
    /// Unix seconds.
    pub regtime: i64,
    pub template: Template,
}

/// `<IMAGE>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageDoc {
    pub common: Common,
    pub regtime: i64,
    /// `IMAGE/STATE`, see [`flightdeck_cloud::ImageState::from_number`].
    pub state: i64,
    pub running_vms: u32,
    pub persistent: bool,
    pub datastore_id: i64,
    pub datastore: String,
    /// Where the image was copied from (OpenNebula moves `PATH` out of the template).
    pub path: String,
    pub source: String,
    /// MiB.
    pub size_mb: i64,
    pub template: Template,
}

/// `<VM>`, from `one.vm.info`, `one.vmpool.infoextended`, or a `one.vmpool.info`
/// listing (whose `TEMPLATE` and `USER_TEMPLATE` are reduced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmDoc {
    pub common: Common,
    pub state: i64,
    pub lcm_state: i64,
    /// Start time, Unix seconds.
    pub stime: i64,
    /// End time, Unix seconds; 0 while the VM lives.
    pub etime: i64,
    pub template: Template,
    pub user_template: Template,
}

/// Reads a number element flightdeck needs.
fn required_int(el: &Element, what: &str, name: &str) -> Result<i64, XmlError> {
    let text = el
        .text_of(name)
        .ok_or_else(|| XmlError(format!("{what}: no {name}")))?;
    text.trim()
        .parse()
        .map_err(|_| XmlError(format!("{what}: {name} {text:?} is not a number")))
}

fn optional_int(el: &Element, what: &str, name: &str) -> Result<Option<i64>, XmlError> {
    match el.text_of(name) {
        None => Ok(None),
        Some(t) if t.trim().is_empty() => Ok(None),
        Some(_) => required_int(el, what, name).map(Some),
    }
}

fn required_text(el: &Element, what: &str, name: &str) -> Result<String, XmlError> {
    el.text_of(name)
        .map(str::to_string)
        .ok_or_else(|| XmlError(format!("{what}: no {name}")))
}

fn text_or_empty(el: &Element, name: &str) -> String {
    el.text_of(name).unwrap_or_default().to_string()
}

fn common(el: &Element) -> Result<Common, XmlError> {
    let kind = el.name.as_str();
    let raw_id = required_int(el, kind, "ID")?;
    let id = u32::try_from(raw_id)
        .map_err(|_| XmlError(format!("{kind}: ID {raw_id} is out of range")))?;
    let what = format!("{kind} {id}");
    let lock = match el.child("LOCK") {
        None => None,
        Some(l) => {
            let w = format!("{what} LOCK");
            Some(Lock {
                locked: required_int(l, &w, "LOCKED")?,
                owner: optional_int(l, &w, "OWNER")?,
                time: optional_int(l, &w, "TIME")?,
                req_id: optional_int(l, &w, "REQ_ID")?,
            })
        }
    };
    let permissions = el.child("PERMISSIONS").map(|p| {
        let bit = |n: &str| u8::from(p.text_of(n).map(str::trim) == Some("1"));
        Permissions {
            owner_u: bit("OWNER_U"),
            owner_m: bit("OWNER_M"),
            owner_a: bit("OWNER_A"),
            group_u: bit("GROUP_U"),
            group_m: bit("GROUP_M"),
            group_a: bit("GROUP_A"),
            other_u: bit("OTHER_U"),
            other_m: bit("OTHER_M"),
            other_a: bit("OTHER_A"),
        }
    });
    Ok(Common {
        id,
        uid: optional_int(el, &what, "UID")?.unwrap_or(-1),
        gid: optional_int(el, &what, "GID")?.unwrap_or(-1),
        uname: required_text(el, &what, "UNAME")?,
        gname: text_or_empty(el, "GNAME"),
        name: required_text(el, &what, "NAME")?,
        lock,
        permissions,
    })
}

fn template_of(el: &Element, what: &str, name: &str) -> Result<Template, XmlError> {
    el.child(name)
        .map(Element::to_template)
        .ok_or_else(|| XmlError(format!("{what}: no {name}")))
}

fn expect_root<'a>(el: &'a Element, name: &str) -> Result<&'a Element, XmlError> {
    if el.name == name {
        Ok(el)
    } else {
        Err(XmlError(format!(
            "expected a <{name}> document, got <{}>",
            el.name
        )))
    }
}

impl TemplateDoc {
    pub fn from_element(el: &Element) -> Result<Self, XmlError> {
        let common = common(el)?;
        let what = format!("VMTEMPLATE {}", common.id);
        Ok(TemplateDoc {
            regtime: optional_int(el, &what, "REGTIME")?.unwrap_or(0),
            template: template_of(el, &what, "TEMPLATE")?,
            common,
        })
    }
}

impl ImageDoc {
    pub fn from_element(el: &Element) -> Result<Self, XmlError> {
        let common = common(el)?;
        let what = format!("IMAGE {}", common.id);
        let running = required_int(el, &what, "RUNNING_VMS")?;
        Ok(ImageDoc {
            regtime: optional_int(el, &what, "REGTIME")?.unwrap_or(0),
            state: required_int(el, &what, "STATE")?,
            running_vms: u32::try_from(running)
                .map_err(|_| XmlError(format!("{what}: RUNNING_VMS {running} is out of range")))?,
            persistent: optional_int(el, &what, "PERSISTENT")? == Some(1),
            datastore_id: optional_int(el, &what, "DATASTORE_ID")?.unwrap_or(-1),
            datastore: text_or_empty(el, "DATASTORE"),
            path: text_or_empty(el, "PATH"),
            source: text_or_empty(el, "SOURCE"),
            size_mb: optional_int(el, &what, "SIZE")?.unwrap_or(0),
            template: template_of(el, &what, "TEMPLATE")?,
            common,
        })
    }
}

impl VmDoc {
    pub fn from_element(el: &Element) -> Result<Self, XmlError> {
        let common = common(el)?;
        let what = format!("VM {}", common.id);
        Ok(VmDoc {
            state: required_int(el, &what, "STATE")?,
            lcm_state: required_int(el, &what, "LCM_STATE")?,
            stime: required_int(el, &what, "STIME")?,
            etime: optional_int(el, &what, "ETIME")?.unwrap_or(0),
            template: template_of(el, &what, "TEMPLATE")?,
            // Some VMs (imported ones) have an empty USER_TEMPLATE; treat absent alike.
            user_template: el
                .child("USER_TEMPLATE")
                .map(Element::to_template)
                .unwrap_or_default(),
            common,
        })
    }
}

/// `<VMTEMPLATE>` (`one.template.info`).
pub fn parse_template(xml: &str) -> Result<TemplateDoc, XmlError> {
    let root = parse_document(xml)?;
    TemplateDoc::from_element(expect_root(&root, "VMTEMPLATE")?)
}

/// `<VMTEMPLATE_POOL>` (`one.templatepool.info`).
pub fn parse_template_pool(xml: &str) -> Result<Vec<TemplateDoc>, XmlError> {
    let root = parse_document(xml)?;
    expect_root(&root, "VMTEMPLATE_POOL")?
        .children_named("VMTEMPLATE")
        .map(TemplateDoc::from_element)
        .collect()
}

/// `<IMAGE>` (`one.image.info`).
pub fn parse_image(xml: &str) -> Result<ImageDoc, XmlError> {
    let root = parse_document(xml)?;
    ImageDoc::from_element(expect_root(&root, "IMAGE")?)
}

/// `<IMAGE_POOL>` (`one.imagepool.info`).
pub fn parse_image_pool(xml: &str) -> Result<Vec<ImageDoc>, XmlError> {
    let root = parse_document(xml)?;
    expect_root(&root, "IMAGE_POOL")?
        .children_named("IMAGE")
        .map(ImageDoc::from_element)
        .collect()
}

/// `<VM>` (`one.vm.info`).
pub fn parse_vm(xml: &str) -> Result<VmDoc, XmlError> {
    let root = parse_document(xml)?;
    VmDoc::from_element(expect_root(&root, "VM")?)
}

/// `<VM_POOL>` (`one.vmpool.info`, `one.vmpool.infoextended`).
pub fn parse_vm_pool(xml: &str) -> Result<Vec<VmDoc>, XmlError> {
    let root = parse_document(xml)?;
    expect_root(&root, "VM_POOL")?
        .children_named("VM")
        .map(VmDoc::from_element)
        .collect()
}

#[cfg(test)]
#[path = "xml_tests.rs"]
mod tests;
