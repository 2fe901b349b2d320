//! Registering the wanted images and templates, or finding them registered, and using
//! them once they are usable.

use std::collections::{BTreeMap, BTreeSet};

use flightdeck_cloud::ImageState;
use flightdeck_cloud::opennebula::Operation;
use flightdeck_spec::OpenNebulaProvider;

use super::ledger::{
    BLOCKED_RETRY, Desired, Kind, Listed, OneInfra, POLL_IMAGES, desired, holdings, kind, listed,
    registered_by_line,
};
use super::release::{release_unwanted, retry_failed_image};
use crate::action::Action;
use crate::condition::{Condition, PlanEvent};
use crate::memory::Held;
use crate::{GONE_AFTER, POLL_MACHINES, Planner};

/// Plans the images and templates under content-addressed names (the safe policy).
pub(super) fn plan_content_addressed(p: &mut Planner<'_>, one: &OpenNebulaProvider) -> OneInfra {
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
pub(super) fn ensure(
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
                let registered =
                    p.shared.created.contains(&format!("{word}/{id}")) || obj.registered_here;
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
            let given_up = holdings(p, kind)
                .remove(&d.name)
                .is_some_and(|h| h.given_up);
            p.events.push(if given_up {
                PlanEvent::normal(
                    "ImageRegisteredAgain",
                    format!(
                        "image {} ({id}) was deleted after its copy failed; registering it again",
                        d.name
                    ),
                )
            } else {
                PlanEvent::warning(
                    &kind.reason("Lost"),
                    format!(
                        "{word} {} ({id}) is gone from OpenNebula; registering it again",
                        d.name
                    ),
                )
            });
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
            let found: Vec<(String, bool)> = listed(p, kind, |_, n| n == d.name)
                .iter()
                .map(|o| (o.id.to_string(), o.registered_here))
                .collect();
            let Some((id, registered_here)) = found.first() else {
                crate::churn::making(p, &what);
                // Held from here on, as one flightdeck registers (request_create).
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
            let created = p.shared.created.contains(&key) || *registered_here;
            let others = p.shared.holders.get(&key).map(|h| h.len()).unwrap_or(0);
            holdings(p, kind).insert(
                d.name.clone(),
                Held {
                    id: Some(id.clone()),
                    created,
                    ..Held::default()
                },
            );
            let (reason, how) = if created {
                (
                    "Shared",
                    format!("has the same content and is shared with {others} other cluster(s)"),
                )
            } else {
                (
                    "UsedNotOwned",
                    "was registered outside flightdeck; it is used as it is and never changed or deleted"
                        .to_string(),
                )
            };
            p.events.push(PlanEvent::normal(
                &kind.reason(reason),
                format!("{word} {} ({id}) {how}", d.name),
            ));
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
            if !retry_failed_image(p, d, obj, problems) {
                problems.push(format!(
                    "image {} ({}) is in ERROR: OpenNebula could not copy it in, and flightdeck did not register it; fix its source and delete it, or change its content",
                    d.name, obj.id
                ));
            }
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

pub(super) fn request_create(p: &mut Planner<'_>, kind: Kind, d: &Desired) {
    if !holdings(p, kind).contains_key(&d.name) {
        holdings(p, kind).insert(
            d.name.clone(),
            Held {
                id: None,
                created: true,
                ..Held::default()
            },
        );
    }
    let content = format!("{}{}", d.content, registered_by_line(&p.memory.uid));
    let action = match kind {
        Kind::Template => Action::CreateTemplate {
            name: d.name.clone(),
            content,
        },
        Kind::Image => Action::CreateImage {
            name: d.name.clone(),
            content,
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
