//! F1: OpenNebula templates and images that never fight.
//!
//! Upstream stamped each template with the calling cluster's UID and deleted any
//! same-named template stamped by another cluster: two clusters resolving one name
//! deleted each other's template forever, and once an operator locked it every
//! reconcile stopped at `TEMPLATE is locked`. Here:
//!
//! - An object is registered under a **content-addressed** name (`<name>-<hash>`), so
//!   the same content is one object and different content is another.
//! - What a cluster **holds** is recorded in its memory. Nothing is ever found to be
//!   ours by its name: an object found by name is *shared* (another cluster registered
//!   it) or *foreign* (nobody we know did), and a foreign object is used, never deleted.
//! - An object several clusters hold is deleted only by the last one to let it go, and
//!   only if flightdeck registered it. Objects are never updated: new content is a new
//!   sibling, so a locked template is simply left alone.
//! - A locked template is used as it is: instantiation needs only USE, which a MANAGE
//!   lock allows. When a locked object is no longer wanted it is left in place, with an
//!   event; a lock is an operator's word.
//! - An error from one object never stops the planning of the others.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::opennebula::Operation;
use flightdeck_cloud::{ImageState, LockLevel};
use flightdeck_spec::OpenNebulaProvider;
use flightdeck_spec::content_addressed_name;

use crate::action::Action;
use crate::condition::{Condition, PlanEvent};
use crate::memory::{Held, OneHoldings};
use crate::{GONE_AFTER, POLL_MACHINES, Planner};

/// Condition kinds of this module.
pub mod kind {
    /// A template or image cannot be had: it failed, its name is taken by an object
    /// flightdeck does not know, or it is being deleted by the last cluster that held it.
    pub const TEMPLATES_READY: &str = "TemplatesReady";
}

/// How long a template OpenNebula refused to instantiate from (AUTHORIZATION: a USE
/// lock) is left alone before it is tried again.
pub const BLOCKED_RETRY: flightdeck_spec::Duration = flightdeck_spec::Duration::from_mins(5);

/// How often to look again while images are copied in or another cluster finishes a
/// deletion.
pub const POLL_IMAGES: flightdeck_spec::Duration = flightdeck_spec::Duration::from_secs(5);

/// What the other clusters hold, from their memories: the ledger the last-owner rule
/// reads. Keys are `template/<id>` and `image/<id>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shared {
    /// Object → the other clusters holding it.
    pub holders: BTreeMap<String, BTreeSet<String>>,
    /// Objects that some cluster's record says flightdeck registered.
    pub created: BTreeSet<String>,
    /// Objects whose deletion some cluster asked for.
    pub deleting: BTreeSet<String>,
}

impl Shared {
    /// The ledger as seen by `me`, from what every cluster holds.
    pub fn from_holdings<'a>(
        me: &str,
        all: impl IntoIterator<Item = (&'a str, &'a OneHoldings)>,
    ) -> Shared {
        let mut shared = Shared::default();
        for (name, holdings) in all {
            for (key, held) in holdings.keys() {
                if held.created {
                    shared.created.insert(key.clone());
                }
                if held.deleting {
                    shared.deleting.insert(key.clone());
                }
                if name != me {
                    shared
                        .holders
                        .entry(key)
                        .or_default()
                        .insert(name.to_string());
                }
            }
        }
        shared
    }
}

/// What one content-addressed object should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// The spec's name for it.
    pub spec_name: String,
    /// The name it is registered under.
    pub name: String,
    pub content: String,
    pub datastore: u32,
}

/// The images and templates the spec asks for, with their registered names. A template
/// that names an image gets a `DISK` line naming the image's registered name, so a
/// change of the image's content is a change of the template's too.
pub fn desired(one: &OpenNebulaProvider) -> (Vec<Desired>, Vec<Desired>) {
    let images: Vec<Desired> = one
        .images
        .iter()
        .map(|i| {
            let content = normalise(i.content.as_str());
            let keyed = format!("{content}DATASTORE_ID = \"{}\"\n", i.datastore);
            Desired {
                spec_name: i.name.to_string(),
                name: content_addressed_name(i.name.as_str(), &keyed),
                content,
                datastore: i.datastore,
            }
        })
        .collect();
    let templates = one
        .templates
        .iter()
        .map(|t| {
            let mut content = normalise(t.content.as_str());
            if let Some(image) = &t.image
                && let Some(d) = images.iter().find(|d| d.spec_name == image.as_str())
            {
                content.push_str(&format!("DISK = [ IMAGE = \"{}\" ]\n", d.name));
            }
            Desired {
                spec_name: t.name.to_string(),
                name: content_addressed_name(t.name.as_str(), &content),
                content,
                datastore: 0,
            }
        })
        .collect();
    (images, templates)
}

/// Trims each line and drops blank ones, so that indentation in the YAML does not
/// change an object's name.
fn normalise(body: &str) -> String {
    let mut out = String::new();
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The registered name of the spec's template `spec_name`.
pub fn template_name(one: &OpenNebulaProvider, spec_name: &str) -> Option<String> {
    desired(one)
        .1
        .into_iter()
        .find(|d| d.spec_name == spec_name)
        .map(|d| d.name)
}

/// What the machines need: for each registered template name, the ID to instantiate,
/// once the template exists, its image is usable and no lock forbids instantiation.
#[derive(Clone, Debug, Default)]
pub(crate) struct OneInfra {
    pub instantiable: BTreeMap<String, String>,
    pub complete: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Template,
    Image,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Template => "template",
            Kind::Image => "image",
        }
    }
}

/// One object as the cloud lists it.
struct Listed<'a> {
    id: &'a str,
    lock: Option<LockLevel>,
    image_state: Option<ImageState>,
}

fn listed<'a>(p: &Planner<'a>, kind: Kind, by: impl Fn(&str, &str) -> bool) -> Vec<Listed<'a>> {
    let o = p.observed;
    match kind {
        Kind::Template => o
            .templates
            .iter()
            .filter(|t| by(&t.id, &t.name))
            .map(|t| Listed {
                id: &t.id,
                lock: t.lock,
                image_state: None,
            })
            .collect(),
        Kind::Image => o
            .images
            .iter()
            .filter(|i| by(&i.id, &i.name))
            .map(|i| Listed {
                id: &i.id,
                lock: i.lock,
                image_state: Some(i.state),
            })
            .collect(),
    }
}

fn holdings<'p>(p: &'p mut Planner<'_>, kind: Kind) -> &'p mut BTreeMap<String, Held> {
    match kind {
        Kind::Template => &mut p.memory.one.templates,
        Kind::Image => &mut p.memory.one.images,
    }
}

/// How templates are named and owned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TemplatePolicy {
    /// Content-addressed names, ownership by record, deletion by the last holder.
    #[default]
    ContentAddressed,
    /// **Unsafe**, kept only to prove the invariants catch it: the upstream provider's
    /// way. The template is named as the spec names it and stamped with the cluster's
    /// UID; a template of that name stamped by another cluster is deleted and
    /// re-created with this cluster's stamp (seed 000).
    UpstreamStampByName,
}

/// The upstream provider's stamp attribute.
const UPSTREAM_STAMP: &str = "CAPONE_CLUSTER_UID";

/// Plans the images and templates; returns what machines can be made from.
pub(crate) fn plan_one_infra(p: &mut Planner<'_>, one: &OpenNebulaProvider) -> OneInfra {
    if p.options.templates == TemplatePolicy::UpstreamStampByName {
        return plan_upstream(p, one);
    }
    let (images, templates) = desired(one);
    let mut problems = Vec::new();
    let mut image_ok = BTreeMap::new();
    for d in &images {
        let ready = ensure(p, Kind::Image, d, &mut problems);
        image_ok.insert(d.name.clone(), ready.is_some());
    }
    let mut infra = OneInfra {
        complete: true,
        ..OneInfra::default()
    };
    for (t, spec) in templates.iter().zip(&one.templates) {
        let id = ensure(p, Kind::Template, t, &mut problems);
        let image_ready = spec
            .image
            .as_ref()
            .and_then(|i| images.iter().find(|d| d.spec_name == i.as_str()))
            .is_none_or(|d| image_ok.get(&d.name).copied().unwrap_or(false));
        match id {
            Some(id) if image_ready => {
                infra.instantiable.insert(t.name.clone(), id);
            }
            _ => infra.complete = false,
        }
    }
    if !problems.is_empty() {
        infra.complete = false;
    }
    release_unwanted(p, &images, &templates);
    let held: BTreeSet<String> = p
        .memory
        .one
        .templates
        .values()
        .filter_map(|h| h.id.clone())
        .collect();
    p.memory.one.blocked.retain(|id, _| held.contains(id));
    p.condition(if problems.is_empty() {
        Condition::new(
            kind::TEMPLATES_READY,
            infra.complete,
            if infra.complete { "Ready" } else { "Waiting" },
            if infra.complete {
                "every template and image is registered and usable".to_string()
            } else {
                "templates or images are being registered".to_string()
            },
        )
    } else {
        Condition::new(
            kind::TEMPLATES_READY,
            false,
            "TemplateUnavailable",
            problems.join("; "),
        )
    });
    if !infra.complete {
        // Something in flight is looked at soon; a refusal or a lock only slowly.
        p.wait(if problems.is_empty() {
            POLL_IMAGES
        } else {
            crate::POLL_STUCK
        });
    }
    infra
}

/// Makes sure the object `d` is held; returns its ID once it is usable.
fn ensure(
    p: &mut Planner<'_>,
    kind: Kind,
    d: &Desired,
    problems: &mut Vec<String>,
) -> Option<String> {
    let word = kind.word();
    let what = format!("{word} {}", d.name);
    let held = holdings(p, kind).get(&d.name).cloned();
    match held {
        Some(Held { id: Some(id), .. }) => {
            let found = listed(p, kind, |i, _| i == id);
            if let Some(obj) = found.first() {
                crate::churn::seen(p, &what);
                let registered = p.shared.created.contains(&format!("{word}/{id}"));
                if let Some(h) = holdings(p, kind).get_mut(&d.name) {
                    h.missing_since = None;
                    // Taken for an operator's while another cluster's create of it was
                    // still unanswered (its record had no ID yet): once that record says
                    // flightdeck registered it, it is flightdeck's, and the last holder
                    // deletes it (swarm seed 400051258).
                    h.created |= registered;
                }
                return usable(p, kind, d, obj, problems);
            }
            // One empty page is not proof: only a long absence is.
            let now = p.now;
            let since = holdings(p, kind)
                .get_mut(&d.name)
                .map(|h| *h.missing_since.get_or_insert(now))
                .unwrap_or(now);
            if now.since(since) < GONE_AFTER {
                p.wait(POLL_MACHINES);
                return None;
            }
            if !crate::churn::may_make(p, &what) {
                crate::churn::report(p);
                return None;
            }
            crate::churn::making(p, &what);
            holdings(p, kind).remove(&d.name);
            p.events.push(PlanEvent::warning(
                if kind == Kind::Template {
                    "TemplateLost"
                } else {
                    "ImageLost"
                },
                format!(
                    "{word} {} ({id}) is gone from OpenNebula; registering it again",
                    d.name
                ),
            ));
            request_create(p, kind, d);
            None
        }
        Some(Held { id: None, .. }) => {
            // A create was asked for and not answered: the object may exist (a crash
            // after the call) or not (before it).
            let found: Vec<String> = listed(p, kind, |_, n| n == d.name)
                .iter()
                .map(|o| o.id.to_string())
                .collect();
            match found.first() {
                Some(id) => {
                    if let Some(h) = holdings(p, kind).get_mut(&d.name) {
                        h.id = Some(id.clone());
                    }
                    p.wait(POLL_MACHINES);
                    None
                }
                None => {
                    request_create(p, kind, d);
                    None
                }
            }
        }
        None => {
            let found: Vec<(String, Option<LockLevel>)> = listed(p, kind, |_, n| n == d.name)
                .iter()
                .map(|o| (o.id.to_string(), o.lock))
                .collect();
            let Some((id, _)) = found.first() else {
                crate::churn::making(p, &what);
                holdings(p, kind).insert(
                    d.name.clone(),
                    Held {
                        id: None,
                        created: true,
                        deleting: false,
                        missing_since: None,
                    },
                );
                request_create(p, kind, d);
                return None;
            };
            let key = format!("{word}/{id}");
            if p.shared.deleting.contains(&key) {
                problems.push(format!(
                    "{word} {} ({id}) is being deleted by the last cluster that held it; it is registered again once it is gone",
                    d.name
                ));
                return None;
            }
            let created = p.shared.created.contains(&key);
            let others = p.shared.holders.get(&key).map(|h| h.len()).unwrap_or(0);
            holdings(p, kind).insert(
                d.name.clone(),
                Held {
                    id: Some(id.clone()),
                    created,
                    deleting: false,
                    missing_since: None,
                },
            );
            p.events.push(if created {
                PlanEvent::normal(
                    if kind == Kind::Template {
                        "TemplateShared"
                    } else {
                        "ImageShared"
                    },
                    format!(
                        "{word} {} ({id}) has the same content and is shared with {others} other cluster(s)",
                        d.name
                    ),
                )
            } else {
                PlanEvent::normal(
                    if kind == Kind::Template {
                        "TemplateUsedNotOwned"
                    } else {
                        "ImageUsedNotOwned"
                    },
                    format!(
                        "{word} {} ({id}) was registered outside flightdeck; it is used as it is and never changed or deleted",
                        d.name
                    ),
                )
            });
            let found = listed(p, kind, |i, _| i == id.as_str());
            let obj = found.first()?;
            usable(p, kind, d, obj, problems)
        }
    }
}

fn usable(
    p: &mut Planner<'_>,
    kind: Kind,
    d: &Desired,
    obj: &Listed<'_>,
    problems: &mut Vec<String>,
) -> Option<String> {
    let word = kind.word();
    if kind == Kind::Template {
        if let Some(b) = p.memory.one.blocked.get(obj.id).cloned() {
            let retry_at = b.since.plus(BLOCKED_RETRY);
            if p.now < retry_at {
                problems.push(format!(
                    "OpenNebula refused to instantiate from template {} ({}): {}; tried again in {}",
                    d.name,
                    obj.id,
                    b.message,
                    retry_at.since(p.now)
                ));
                p.wait(retry_at.since(p.now));
                return None;
            }
        }
        if obj.lock.is_some_and(|l| l.denies(Operation::Use)) {
            // Said, and still tried: the cloud's answer is the authority (the lock may be
            // lifted any moment), and its refusal is remembered and retried slowly.
            problems.push(format!(
                "template {} ({}) is locked at USE level: OpenNebula refuses to instantiate from it until an operator unlocks it",
                d.name, obj.id
            ));
        }
    }
    match obj.image_state {
        Some(ImageState::Error) => {
            problems.push(format!(
                "image {} ({}) is in ERROR: OpenNebula could not copy it in; fix its source and delete it, or change its content",
                d.name, obj.id
            ));
            None
        }
        Some(s) if !s.usable() => {
            p.wait(POLL_IMAGES);
            None
        }
        _ => {
            let _ = word;
            Some(obj.id.to_string())
        }
    }
}

fn request_create(p: &mut Planner<'_>, kind: Kind, d: &Desired) {
    if !holdings(p, kind).contains_key(&d.name) {
        holdings(p, kind).insert(
            d.name.clone(),
            Held {
                id: None,
                created: true,
                deleting: false,
                missing_since: None,
            },
        );
    }
    let action = match kind {
        Kind::Template => Action::CreateTemplate {
            name: d.name.clone(),
            content: d.content.clone(),
        },
        Kind::Image => Action::CreateImage {
            name: d.name.clone(),
            content: d.content.clone(),
            datastore: d.datastore,
        },
    };
    p.act(
        action,
        format!(
            "the spec's {} {} is not registered yet",
            kind.word(),
            d.spec_name
        ),
    );
}

/// Lets go of held objects the spec no longer asks for and no machine still uses.
fn release_unwanted(p: &mut Planner<'_>, images: &[Desired], templates: &[Desired]) {
    let in_use: BTreeSet<String> = p
        .memory
        .machines
        .values()
        .map(|m| m.template.image.clone())
        .collect();
    let unwanted_templates: Vec<String> = p
        .memory
        .one
        .templates
        .keys()
        .filter(|n| !templates.iter().any(|d| &d.name == *n) && !in_use.contains(*n))
        .cloned()
        .collect();
    for name in unwanted_templates {
        release(p, Kind::Template, &name);
    }
    // An image goes only once no held template names it.
    let unwanted_images: Vec<String> = p
        .memory
        .one
        .images
        .keys()
        .filter(|n| !images.iter().any(|d| &d.name == *n))
        .filter(|n| {
            !p.memory
                .one
                .templates
                .keys()
                .any(|t| template_uses_image(p, t, n))
        })
        .cloned()
        .collect();
    for name in unwanted_images {
        release(p, Kind::Image, &name);
    }
}

fn template_uses_image(p: &Planner<'_>, template: &str, image: &str) -> bool {
    let id = p
        .memory
        .one
        .templates
        .get(template)
        .and_then(|h| h.id.as_deref());
    p.observed
        .templates
        .iter()
        .filter(|t| Some(t.id.as_str()) == id)
        .any(|t| t.content.contains(&format!("\"{image}\"")))
}

/// Releases every held object: the cluster is being deleted and its machines are gone.
/// Returns what is still to be confirmed gone.
pub(crate) fn release_all(p: &mut Planner<'_>) -> Vec<String> {
    let templates: Vec<String> = p.memory.one.templates.keys().cloned().collect();
    for name in templates {
        release(p, Kind::Template, &name);
    }
    if p.memory.one.templates.is_empty() {
        let images: Vec<String> = p.memory.one.images.keys().cloned().collect();
        for name in images {
            release(p, Kind::Image, &name);
        }
    }
    p.memory
        .one
        .templates
        .keys()
        .map(|n| format!("template {n}"))
        .chain(p.memory.one.images.keys().map(|n| format!("image {n}")))
        .collect()
}

/// Whether the cluster holds nothing of OpenNebula's any more.
pub(crate) fn nothing_held(p: &Planner<'_>) -> bool {
    p.memory.one.templates.is_empty() && p.memory.one.images.is_empty()
}

/// Lets go of one held object: deletes it if flightdeck registered it and no other
/// cluster holds it, and forgets it once it is gone (or was never ours to delete).
fn release(p: &mut Planner<'_>, kind: Kind, name: &str) {
    let word = kind.word();
    let Some(held) = holdings(p, kind).get(name).cloned() else {
        return;
    };
    let Some(id) = held.id.clone() else {
        // A create that was never answered: if it happened, the object shows up by
        // name and is adopted first; if not, there is nothing to let go of.
        let found: Vec<String> = listed(p, kind, |_, n| n == name)
            .iter()
            .map(|o| o.id.to_string())
            .collect();
        match found.first() {
            Some(id) if !p.shared.holders.contains_key(&format!("{word}/{id}")) => {
                if let Some(h) = holdings(p, kind).get_mut(name) {
                    h.id = Some(id.clone());
                }
                p.wait(POLL_MACHINES);
            }
            _ => {
                holdings(p, kind).remove(name);
            }
        }
        return;
    };
    let key = format!("{word}/{id}");
    let found: Vec<(Option<LockLevel>, Option<ImageState>)> = listed(p, kind, |i, _| i == id)
        .iter()
        .map(|o| (o.lock, o.image_state))
        .collect();
    let Some((lock, state)) = found.first().copied() else {
        // Gone: by our delete or someone else's.
        holdings(p, kind).remove(name);
        return;
    };
    if held.deleting && state == Some(ImageState::Delete) {
        // OpenNebula is removing it from its datastore.
        p.wait(POLL_MACHINES);
        return;
    }
    let others = p.shared.holders.get(&key).is_some_and(|h| !h.is_empty())
        && p.options.on(crate::safety::Mechanism::TemplateLastHolder);
    if !held.created || others {
        holdings(p, kind).remove(name);
        p.events.push(PlanEvent::normal(
            "TemplateReleased",
            if others {
                format!("{word} {name} ({id}) is still held by another cluster; left to it")
            } else {
                format!("{word} {name} ({id}) was not registered by flightdeck; left in place")
            },
        ));
        return;
    }
    if let Some(level) = lock.filter(|l| l.denies(Operation::Manage)) {
        holdings(p, kind).remove(name);
        p.events.push(PlanEvent::warning(
            "TemplateLeftLocked",
            format!(
                "{word} {name} ({id}) is no longer needed but an operator locked it ({level:?}); it is left in place"
            ),
        ));
        return;
    }
    if let Some(h) = holdings(p, kind).get_mut(name) {
        h.deleting = true;
    }
    let action = match kind {
        Kind::Template => Action::DeleteTemplate {
            template_id: id.clone(),
            name: name.to_string(),
        },
        Kind::Image => Action::DeleteImage {
            image_id: id.clone(),
            name: name.to_string(),
        },
    };
    p.act(
        action,
        format!("no cluster holds {word} {name} any more and flightdeck registered it"),
    );
    p.wait(POLL_MACHINES);
}

/// The upstream provider's template handling (see [`TemplatePolicy::UpstreamStampByName`]).
fn plan_upstream(p: &mut Planner<'_>, one: &OpenNebulaProvider) -> OneInfra {
    let (images, templates) = desired(one);
    let mut problems = Vec::new();
    let mut infra = OneInfra {
        complete: true,
        ..OneInfra::default()
    };
    let mut image_ok = BTreeMap::new();
    for d in &images {
        image_ok.insert(
            d.name.clone(),
            ensure(p, Kind::Image, d, &mut problems).is_some(),
        );
    }
    let stamp = format!("{UPSTREAM_STAMP} = \"{}\"", p.memory.uid);
    for (t, spec) in templates.iter().zip(&one.templates) {
        let name = t.spec_name.clone();
        let content = format!("{}{stamp}\n", t.content);
        let found: Vec<(String, bool)> = p
            .observed
            .templates
            .iter()
            .filter(|x| x.name == name)
            .map(|x| (x.id.clone(), x.content.contains(&stamp)))
            .collect();
        match found.first() {
            Some((id, true)) => {
                let image_ready = spec
                    .image
                    .as_ref()
                    .and_then(|i| images.iter().find(|d| d.spec_name == i.as_str()))
                    .is_none_or(|d| image_ok.get(&d.name).copied().unwrap_or(false));
                if image_ready {
                    // Machine records name the template by what `machine_template` says.
                    infra.instantiable.insert(t.name.clone(), id.clone());
                } else {
                    infra.complete = false;
                }
                p.memory.one.templates.insert(
                    name,
                    Held {
                        id: Some(id.clone()),
                        created: true,
                        deleting: false,
                        missing_since: None,
                    },
                );
            }
            Some((id, false)) => {
                infra.complete = false;
                p.act(
                    Action::DeleteTemplate {
                        template_id: id.clone(),
                        name: name.clone(),
                    },
                    "the template is stamped by another cluster (upstream policy)",
                );
                p.act(
                    Action::CreateTemplate {
                        name: name.clone(),
                        content,
                    },
                    "re-created with this cluster's stamp (upstream policy)",
                );
                p.memory.one.templates.insert(
                    name,
                    Held {
                        id: None,
                        created: true,
                        deleting: false,
                        missing_since: None,
                    },
                );
            }
            None => {
                infra.complete = false;
                p.memory.one.templates.insert(
                    name.clone(),
                    Held {
                        id: None,
                        created: true,
                        deleting: false,
                        missing_since: None,
                    },
                );
                p.act(
                    Action::CreateTemplate { name, content },
                    "the template does not exist (upstream policy)",
                );
            }
        }
    }
    if !infra.complete {
        p.wait(POLL_IMAGES);
    }
    infra
}
