//! Letting go of held objects, and deleting those flightdeck registered once no other
//! cluster holds them.

use std::collections::BTreeSet;

use flightdeck_cloud::opennebula::Operation;
use flightdeck_cloud::{ImageState, LockLevel};

use super::ledger::{Desired, FAILED_IMAGE_RETRY, Kind, Listed, POLL_IMAGES, holdings, listed};
use crate::action::Action;
use crate::condition::PlanEvent;
use crate::{POLL_MACHINES, Planner};

/// Lets go of held objects the spec no longer asks for and no machine still uses.
pub(super) fn release_unwanted(p: &mut Planner<'_>, images: &[Desired], templates: &[Desired]) {
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

/// An image flightdeck registered whose copy failed (ERROR) is of no use to any cluster:
/// no VM can be made from it, and OpenNebula never copies it again. Once it has been in
/// ERROR for [`FAILED_IMAGE_RETRY`], each cluster holding it gives it up (it no longer
/// counts as a holder); the last cluster that still holds it deletes it, and every
/// cluster that wants it registers it again once it is gone (swarm seed 600051962:
/// `one.imageError` at 0:00 left the image four clusters share in ERROR for good).
/// Returns false for an image flightdeck did not register: an operator's to fix.
pub(super) fn retry_failed_image(
    p: &mut Planner<'_>,
    d: &Desired,
    obj: &Listed<'_>,
    problems: &mut Vec<String>,
) -> bool {
    let id = obj.id;
    let key = format!("image/{id}");
    let Some(held) = p.memory.one.images.get(&d.name).cloned() else {
        return false;
    };
    if !(held.created || p.shared.created.contains(&key)) {
        return false;
    }
    let now = p.now;
    let since = held.failed_since.unwrap_or(now);
    let retry_at = since.plus(FAILED_IMAGE_RETRY);
    let given_up = now >= retry_at;
    if let Some(h) = p.memory.one.images.get_mut(&d.name) {
        h.failed_since = Some(since);
        h.given_up = given_up;
    }
    if !given_up {
        problems.push(format!(
            "image {} ({id}) is in ERROR: OpenNebula could not copy it in; flightdeck registered it, and deletes it to register it again in {}",
            d.name,
            retry_at.since(now)
        ));
        p.wait(retry_at.since(now));
        return true;
    }
    if !held.given_up {
        p.events.push(PlanEvent::warning(
            "ImageGivenUp",
            format!(
                "image {} ({id}) has been in ERROR for {FAILED_IMAGE_RETRY}: given up, to be deleted by the last cluster holding it and registered again",
                d.name
            ),
        ));
    }
    if let Some(level) = obj.lock.filter(|l| l.denies(Operation::Manage)) {
        problems.push(format!(
            "image {} ({id}) is in ERROR and an operator locked it ({level:?}): flightdeck cannot delete it to register it again until it is unlocked",
            d.name
        ));
        p.wait(crate::POLL_STUCK);
        return true;
    }
    let holders: Vec<String> = p
        .shared
        .holders
        .get(&key)
        .map(|h| h.iter().cloned().collect())
        .unwrap_or_default();
    let wait_for_others =
        !holders.is_empty() && p.options.on(crate::safety::Mechanism::TemplateLastHolder);
    if held.deleting || p.shared.deleting.contains(&key) || wait_for_others {
        problems.push(if wait_for_others {
            format!(
                "image {} ({id}) is in ERROR; it is deleted and registered again once {} give(s) it up too",
                d.name,
                holders.join(", ")
            )
        } else {
            format!(
                "image {} ({id}) is in ERROR and being deleted; it is registered again once it is gone",
                d.name
            )
        });
        p.wait(POLL_IMAGES);
        return true;
    }
    let what = format!("image {}", d.name);
    if !crate::churn::may_make(p, &what) {
        crate::churn::report(p);
        return true;
    }
    if let Some(h) = p.memory.one.images.get_mut(&d.name) {
        h.deleting = true;
    }
    p.act(
        Action::DeleteImage {
            image_id: id.to_string(),
            name: d.name.clone(),
        },
        format!(
            "image {} ({id}) has been in ERROR for {}: its copy failed; flightdeck registered it and no other cluster holds it, so it is deleted to be registered again",
            d.name,
            now.since(since)
        ),
    );
    p.wait(POLL_IMAGES);
    true
}
