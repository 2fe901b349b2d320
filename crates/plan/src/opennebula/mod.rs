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
//!
//! The files: `ledger` (what is wanted and what is held, and the ledger of what the other
//! clusters hold), `ensure` (registering and using), `release` (letting go, and deleting
//! as the last holder), `upstream` (the unsafe upstream policy a test keeps).

mod ensure;
mod ledger;
pub(crate) mod release;
mod upstream;

use flightdeck_spec::OpenNebulaProvider;

pub(crate) use ledger::OneInfra;
pub use ledger::{
    BLOCKED_RETRY, Desired, FAILED_IMAGE_RETRY, POLL_IMAGES, Shared, TemplatePolicy, desired, kind,
    template_name,
};

use crate::Planner;

/// Plans the images and templates; returns what machines can be made from.
pub(crate) fn plan_one_infra(p: &mut Planner<'_>, one: &OpenNebulaProvider) -> OneInfra {
    if p.options.templates == TemplatePolicy::UpstreamStampByName {
        return upstream::plan_upstream(p, one);
    }
    ensure::plan_content_addressed(p, one)
}
