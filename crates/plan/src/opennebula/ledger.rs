//! What is wanted (content-addressed names) and what is held, and the ledger of what
//! the other clusters hold.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::{ImageState, LockLevel};
use flightdeck_spec::OpenNebulaProvider;
use flightdeck_spec::content_addressed_name;

use crate::Planner;
use crate::memory::{Held, OneHoldings};

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

/// How long an image flightdeck registered stays in ERROR (OpenNebula could not copy it
/// in) before the clusters holding it give it up, and the last of them deletes it so it
/// is registered again: a copy that failed once may well succeed the next time.
pub const FAILED_IMAGE_RETRY: flightdeck_spec::Duration = flightdeck_spec::Duration::from_mins(5);

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
                // An image given up (it stayed in ERROR) is held for nothing: the last
                // cluster that still holds it may delete it.
                if name != me && held.holds() {
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

/// The attribute flightdeck adds to the body of each image and template it registers,
/// naming the registering cluster's UID. Not part of the content-addressed name. A
/// store restored from a backup older than the registration has lost the ledger's
/// record of it; the attribute still says the cluster registered it, so its last holder
/// deletes it (swarm seed 40006839).
pub const REGISTERED_BY: &str = "FLIGHTDECK_REGISTERED_BY";

/// The [`REGISTERED_BY`] line for the cluster with UID `uid`.
pub(crate) fn registered_by_line(uid: &str) -> String {
    format!("{REGISTERED_BY} = \"{uid}\"\n")
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
pub(crate) enum Kind {
    Template,
    Image,
}

impl Kind {
    /// An event's reason about an object of this kind: `TemplateShared`, `ImageShared`.
    pub(crate) fn reason(self, what: &str) -> String {
        match self {
            Kind::Template => format!("Template{what}"),
            Kind::Image => format!("Image{what}"),
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Kind::Template => "template",
            Kind::Image => "image",
        }
    }
}

/// One object as the cloud lists it.
pub(crate) struct Listed<'a> {
    pub id: &'a str,
    pub lock: Option<LockLevel>,
    pub image_state: Option<ImageState>,
    /// Its body names this cluster as the one that registered it ([`REGISTERED_BY`]).
    pub registered_here: bool,
}

pub(crate) fn listed<'a>(
    p: &Planner<'a>,
    kind: Kind,
    by: impl Fn(&str, &str) -> bool,
) -> Vec<Listed<'a>> {
    let o = p.observed;
    let mine = registered_by_line(&p.memory.uid);
    match kind {
        Kind::Template => o
            .templates
            .iter()
            .filter(|t| by(&t.id, &t.name))
            .map(|t| Listed {
                id: &t.id,
                lock: t.lock,
                image_state: None,
                registered_here: t.content.contains(mine.trim_end()),
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
                registered_here: i.content.contains(mine.trim_end()),
            })
            .collect(),
    }
}

pub(crate) fn holdings<'p>(p: &'p mut Planner<'_>, kind: Kind) -> &'p mut BTreeMap<String, Held> {
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
pub(crate) const UPSTREAM_STAMP: &str = "CAPONE_CLUSTER_UID";
