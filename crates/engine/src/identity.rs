//! The identity gate: before a new cluster creates anything, the cloud is searched for
//! objects of its name under another UID (see `flightdeck_cloud::identity`). A lost or
//! truncated store, a mistyped `--state-dir` or a second controller would otherwise
//! build a full second copy next to the first.
//!
//! - Nothing found: the cluster's UID is confirmed, and it builds.
//! - Found, not asked to adopt: the cluster holds with a `ForeignObjects` condition that
//!   lists them, and looks again at every resync (objects removed by hand free it).
//! - Found, asked to adopt (`--adopt`, `?adopt=true`): when they all carry one UID, the
//!   cluster takes that UID, and so every object by record; otherwise it holds and says
//!   why.

use std::collections::BTreeSet;

use flightdeck_cloud::{CloudError, Identity, NamedObject, Ownership};
use flightdeck_plan::condition::{kind, reason};
use flightdeck_plan::{ClusterStatus, Condition, IdentityCheck, Memory, PlanEvent};
use flightdeck_spec::Duration;

/// How many foreign objects a condition names; the rest are counted.
const LISTED_MAX: usize = 10;

/// How soon a held cluster looks at the cloud again.
pub(crate) const HELD_RECHECK: Duration = Duration::from_secs(60);

/// What the gate decided.
pub(crate) enum Gate {
    /// Go on (the memory's UID adopted, perhaps), and tell this.
    Go(Vec<PlanEvent>),
    /// Go on: the cloud showed no object of the cluster's name at all, under any UID,
    /// so its first lists of the kinds the check read are empty.
    GoFromNothing,
    /// Create nothing: `status` says why.
    Hold(Box<ClusterStatus>),
}

/// Checks a new cluster's identity; a confirmed one, or one being deleted, goes at once.
pub(crate) async fn gate<P: Identity>(
    provider: &P,
    owner: &Ownership,
    memory: &mut Memory,
    prev: &ClusterStatus,
) -> Result<Gate, CloudError> {
    if memory.identity.is_confirmed() || memory.deletion_requested.is_some() {
        return Ok(Gate::Go(Vec::new()));
    }
    let named = provider.list_named(owner).await?;
    // Nothing of the name under any UID: the first lists of those kinds are empty. Objects
    // of its own UID (a store restored from before this check) are listed as usual.
    if named.is_empty() {
        memory.identity = IdentityCheck::Confirmed;
        return Ok(Gate::GoFromNothing);
    }
    let found: Vec<NamedObject> = named.into_iter().filter(|f| f.is_foreign(owner)).collect();
    if found.is_empty() {
        memory.identity = IdentityCheck::Confirmed;
        return Ok(Gate::Go(Vec::new()));
    }
    let uids: BTreeSet<&str> = found.iter().map(|f| f.uid.as_str()).collect();
    let adoptable = match uids.iter().collect::<Vec<_>>()[..] {
        [uid] if !uid.is_empty() => Some(uid.to_string()),
        _ => None,
    };
    match (memory.identity, adoptable) {
        (IdentityCheck::Adopt, Some(uid)) => {
            let event = PlanEvent::normal(
                "ClusterAdopted",
                format!(
                    "took over UID {uid} of an earlier cluster {} and its {}: {}",
                    owner.cluster,
                    count(found.len(), "object"),
                    listing(&found)
                ),
            );
            tracing::info!(cluster = %owner.cluster, uid = %uid, objects = found.len(), "adopted");
            memory.uid = uid;
            memory.identity = IdentityCheck::Confirmed;
            Ok(Gate::Go(vec![event]))
        }
        (IdentityCheck::Adopt, None) => Ok(Gate::Hold(Box::new(held(
            prev,
            format!(
                "cannot adopt: the objects named for cluster {} carry {} ({}); adopt takes over one earlier cluster's objects, by its UID. Remove the others, then apply again: {}",
                owner.cluster,
                count(uids.len(), "UID"),
                uids.iter()
                    .map(|u| if u.is_empty() { "none" } else { u })
                    .collect::<Vec<_>>()
                    .join(", "),
                listing(&found)
            ),
        )))),
        _ => Ok(Gate::Hold(Box::new(held(
            prev,
            format!(
                "the cloud holds {} named for cluster {} under another UID than its own ({}), left by an earlier cluster of this name (a lost store, another state directory or controller): {}. Nothing is created: to take them over, run `up` or `apply` again with --adopt (API: ?adopt=true); or delete them",
                count(found.len(), "object"),
                owner.cluster,
                memory.uid,
                listing(&found)
            ),
        )))),
    }
}

/// The status of a held cluster: not Ready, with the `ForeignObjects` condition.
fn held(prev: &ClusterStatus, message: String) -> ClusterStatus {
    let mut status = prev.clone();
    status.ready = false;
    status.conditions.retain(|c| {
        c.kind != kind::FOREIGN_OBJECTS && c.kind != kind::READY && c.kind != kind::CLOUD_ERROR
    });
    status.conditions.push(Condition::new(
        kind::READY,
        false,
        reason::PROVISIONING,
        "held: objects of an earlier cluster of this name stand in the cloud",
    ));
    status.conditions.push(Condition::new(
        kind::FOREIGN_OBJECTS,
        true,
        kind::FOREIGN_OBJECTS,
        message,
    ));
    status
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn listing(found: &[NamedObject]) -> String {
    let mut text: Vec<String> = found
        .iter()
        .take(LISTED_MAX)
        .map(|f| f.to_string())
        .collect();
    if found.len() > LISTED_MAX {
        text.push(format!("and {} more", found.len() - LISTED_MAX));
    }
    text.join("; ")
}
