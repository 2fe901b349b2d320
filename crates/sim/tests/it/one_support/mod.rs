//! Helpers for the simulated OpenNebula's tests: XML-RPC calls as a client makes them,
//! the response arrays taken apart, and the XML documents parsed back.
#![allow(dead_code)]

use dxr::Value;
use flightdeck_sim::{OneImage, OneTemplate, OneVm, SimCloud};

pub const AUTHENTICATION: i32 = 0x0100;
pub const AUTHORIZATION: i32 = 0x0200;
pub const NO_EXISTS: i32 = 0x0400;
pub const ACTION: i32 = 0x0800;
pub const XML_RPC_API: i32 = 0x1000;
pub const INTERNAL: i32 = 0x2000;
pub const ALLOCATE: i32 = 0x4000;

pub fn s(v: &str) -> Value {
    Value::String(v.into())
}
pub fn i(v: i32) -> Value {
    Value::Integer(v)
}
pub fn b(v: bool) -> Value {
    Value::Boolean(v)
}
pub fn session() -> Value {
    s("oneadmin:opennebula")
}

/// `method(session, params...)`.
pub fn call(sim: &SimCloud, method: &str, params: Vec<Value>) -> Value {
    let mut all = vec![session()];
    all.extend(params);
    sim.one_call(method, all)
}

/// The value of a success `[true, value, 0]`; panics on anything else.
pub fn ok(v: Value) -> Value {
    match v {
        Value::Array(a)
            if a.len() == 3 && a[0] == Value::Boolean(true) && a[2] == Value::Integer(0) =>
        {
            a[1].clone()
        }
        other => panic!("expected success, got {other:?}"),
    }
}

pub fn ok_int(v: Value) -> i32 {
    match ok(v) {
        Value::Integer(n) => n,
        other => panic!("expected an i4, got {other:?}"),
    }
}

pub fn ok_str(v: Value) -> String {
    match ok(v) {
        Value::String(s) => s,
        other => panic!("expected a string, got {other:?}"),
    }
}

/// `(message, code, object id)` of a failure `[false, message, code, id, 0]`.
pub fn fail(v: Value) -> (String, i32, i32) {
    match v {
        Value::Array(a) if a.len() == 5 && a[0] == Value::Boolean(false) => {
            match (&a[1], &a[2], &a[3]) {
                (Value::String(m), Value::Integer(c), Value::Integer(id)) => (m.clone(), *c, *id),
                _ => panic!("malformed failure {a:?}"),
            }
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

pub const VM_BODY: &str = "CPU = \"1\"\nMEMORY = \"2048\"\nNIC = [ NETWORK_ID = \"0\" ]\n";

pub fn allocate_template(sim: &SimCloud, name: &str, body: &str) -> i32 {
    ok_int(call(
        sim,
        "one.template.allocate",
        vec![s(&format!("NAME = \"{name}\"\n{body}"))],
    ))
}

pub fn allocate_image(sim: &SimCloud, name: &str) -> i32 {
    ok_int(call(
        sim,
        "one.image.allocate",
        vec![
            s(&format!(
                "NAME = \"{name}\"\nPATH = \"https://images.example/{name}.qcow2\"\n"
            )),
            i(1),
        ],
    ))
}

/// flightdeck's ownership attributes for machine `machine` of cluster `demo`/`uid`.
pub fn tags_tmpl(uid: &str, machine: &str) -> String {
    format!(
        "FLIGHTDECK_CLUSTER = \"demo\"\nFLIGHTDECK_UID = \"{uid}\"\nFLIGHTDECK_ROLE = \"machine\"\nFLIGHTDECK_MACHINE = \"{machine}\"\n"
    )
}

pub fn instantiate(sim: &SimCloud, tid: i32, name: &str, extra: &str) -> Value {
    call(
        sim,
        "one.template.instantiate",
        vec![i(tid), s(name), b(false), s(extra), b(false)],
    )
}

pub fn vm(sim: &SimCloud, id: i32) -> OneVm {
    sim.snapshot()
        .one_vms
        .into_iter()
        .find(|v| i64::from(v.id) == i64::from(id))
        .expect("the VM exists")
}

pub fn image(sim: &SimCloud, id: i32) -> OneImage {
    sim.snapshot()
        .one_images
        .into_iter()
        .find(|v| i64::from(v.id) == i64::from(id))
        .expect("the image exists")
}

pub fn template(sim: &SimCloud, id: i32) -> Option<OneTemplate> {
    sim.snapshot()
        .one_templates
        .into_iter()
        .find(|v| i64::from(v.id) == i64::from(id))
}

/// An element of a parsed document.
#[derive(Debug, Default)]
pub struct Node {
    pub name: String,
    pub text: String,
    pub children: Vec<Node>,
}

impl Node {
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The first element down `path` (`"TEMPLATE/NIC/IP"`).
    pub fn at(&self, path: &str) -> Option<&Node> {
        path.split('/').try_fold(self, |n, p| n.child(p))
    }

    pub fn text_at(&self, path: &str) -> String {
        self.at(path).map(|n| n.text.clone()).unwrap_or_default()
    }

    pub fn names(&self) -> Vec<&str> {
        self.children.iter().map(|c| c.name.as_str()).collect()
    }
}

/// Parses `xml` with a real XML parser (mismatched tags fail), CDATA taken as text.
pub fn parse(xml: &str) -> Node {
    use quick_xml::Reader;
    use quick_xml::events::Event;
    let mut reader = Reader::from_str(xml);
    let mut stack: Vec<Node> = vec![Node::default()];
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => stack.push(Node {
                name: e.name().as_ref().to_string(),
                ..Node::default()
            }),
            Event::Empty(e) => {
                let n = Node {
                    name: e.name().as_ref().to_string(),
                    ..Node::default()
                };
                stack.last_mut().expect("a parent").children.push(n);
            }
            Event::End(_) => {
                let n = stack.pop().expect("an open element");
                stack.last_mut().expect("a parent").children.push(n);
            }
            Event::Text(t) => stack
                .last_mut()
                .expect("an element")
                .text
                .push_str(&t.into_inner()),
            Event::CData(t) => stack
                .last_mut()
                .expect("an element")
                .text
                .push_str(&t.into_inner()),
            Event::Eof => break,
            _ => {}
        }
    }
    let mut root = stack.pop().expect("the document");
    assert!(stack.is_empty(), "unclosed elements");
    assert_eq!(root.children.len(), 1, "one root element");
    root.children.remove(0)
}
