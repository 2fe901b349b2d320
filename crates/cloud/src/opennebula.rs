//! OpenNebula's objects as flightdeck sees them: VM templates and images, which several
//! clusters may share (F1), and the calls that make and remove them.
//!
//! VMs are [`crate::Server`]s: the OpenNebula provider maps `STATE`/`LCM_STATE` onto
//! [`crate::ServerStatus`] and keeps the ownership tags in the VM's user template.
//! Templates and images carry **no** ownership tags: whom they belong to is what
//! flightdeck recorded when it created them, never what their name or attributes say.

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::error::{CloudError, ErrorClass};
use crate::provider::Result;

/// An OpenNebula lock level (`one.*.lock`). Level 4 (ALL) is stored as USE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LockLevel {
    /// 1: blocks USE, MANAGE and ADMIN operations (instantiate included).
    Use,
    /// 2: blocks MANAGE and ADMIN operations (update, delete); instantiate still works.
    Manage,
    /// 3: blocks ADMIN operations only.
    Admin,
}

impl LockLevel {
    /// The level as OpenNebula numbers it in `<LOCK><LOCKED>`; 4 is stored as USE.
    pub fn from_number(n: i64) -> Option<LockLevel> {
        match n {
            1 | 4 => Some(LockLevel::Use),
            2 => Some(LockLevel::Manage),
            3 => Some(LockLevel::Admin),
            _ => None,
        }
    }

    pub fn number(self) -> i32 {
        match self {
            LockLevel::Use => 1,
            LockLevel::Manage => 2,
            LockLevel::Admin => 3,
        }
    }

    /// Whether an operation needing `op` is denied under this lock:
    /// `0 < lock ≤ operation level`, with USE=1, MANAGE=2, ADMIN=4.
    pub fn denies(self, op: Operation) -> bool {
        self.number() <= op.level()
    }
}

/// The authorization level an OpenNebula operation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Use,
    Manage,
    Admin,
}

impl Operation {
    pub fn level(self) -> i32 {
        match self {
            Operation::Use => 1,
            Operation::Manage => 2,
            Operation::Admin => 4,
        }
    }
}

/// A VM template (`one.templatepool.info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmTemplate {
    /// OpenNebula's numeric ID, as a string like every other cloud ID in flightdeck.
    pub id: String,
    pub name: String,
    /// The template body, re-rendered in OpenNebula's template syntax from the `TEMPLATE`
    /// element, one `KEY = "value"` per line in document order.
    pub content: String,
    pub lock: Option<LockLevel>,
    /// The owning OpenNebula user's name (`UNAME`).
    pub owner: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateCreate {
    pub name: String,
    /// The body in OpenNebula's template syntax, without `NAME` (the provider adds it).
    pub content: String,
}

/// `IMAGE/STATE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ImageState {
    Init,
    Ready,
    Used,
    Disabled,
    /// The datastore is still copying the image in.
    Locked,
    Error,
    Clone,
    Delete,
    UsedPers,
    LockUsed,
    LockUsedPers,
}

impl ImageState {
    pub fn from_number(n: i64) -> Option<ImageState> {
        use ImageState::*;
        Some(match n {
            0 => Init,
            1 => Ready,
            2 => Used,
            3 => Disabled,
            4 => Locked,
            5 => Error,
            6 => Clone,
            7 => Delete,
            8 => UsedPers,
            9 => LockUsed,
            10 => LockUsedPers,
            _ => return None,
        })
    }

    pub fn number(self) -> i32 {
        use ImageState::*;
        match self {
            Init => 0,
            Ready => 1,
            Used => 2,
            Disabled => 3,
            Locked => 4,
            Error => 5,
            Clone => 6,
            Delete => 7,
            UsedPers => 8,
            LockUsed => 9,
            LockUsedPers => 10,
        }
    }

    /// Whether a VM can be instantiated from a template that uses this image.
    pub fn usable(self) -> bool {
        matches!(self, ImageState::Ready | ImageState::Used)
    }
}

/// An image (`one.imagepool.info`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub id: String,
    pub name: String,
    pub state: ImageState,
    /// The image template body, rendered like [`VmTemplate::content`].
    pub content: String,
    pub lock: Option<LockLevel>,
    pub owner: String,
    /// How many VMs use the image (`RUNNING_VMS`).
    pub running_vms: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageCreate {
    pub name: String,
    /// The body in OpenNebula's template syntax, without `NAME`.
    pub content: String,
    pub datastore_id: u32,
}

/// `one.template.instantiate`: a VM from a template, with the cluster's ownership tags
/// in its user template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instantiate {
    pub template_id: String,
    pub name: String,
    pub tags: Vec<String>,
    /// The machine's cloud-init user data, variables filled in: the VM's
    /// `CONTEXT = [ USER_DATA, USERDATA_ENCODING = "base64" ]`.
    pub user_data: Option<String>,
}

/// Templates, images and instantiation (OpenNebula). Lists return every object the
/// session's user can see: ownership is decided by flightdeck's records, not here.
///
/// The default methods answer that the cloud has no such service, so that a provider for
/// another cloud need not pretend to have one; the planner never asks a cloud for
/// templates unless the cluster's spec names OpenNebula.
pub trait Templates {
    fn list_templates(&self) -> impl Future<Output = Result<Vec<VmTemplate>>> + Send {
        async { Err(unsupported("templatepool.info")) }
    }
    /// Returns the new template's ID.
    fn create_template(&self, req: &TemplateCreate) -> impl Future<Output = Result<String>> + Send {
        let _ = req;
        async { Err(unsupported("template.allocate")) }
    }
    fn delete_template(&self, id: &str) -> impl Future<Output = Result<()>> + Send {
        let _ = id;
        async { Err(unsupported("template.delete")) }
    }
    fn list_images(&self) -> impl Future<Output = Result<Vec<Image>>> + Send {
        async { Err(unsupported("imagepool.info")) }
    }
    /// Returns the new image's ID; the image starts LOCKED while it is copied in.
    fn create_image(&self, req: &ImageCreate) -> impl Future<Output = Result<String>> + Send {
        let _ = req;
        async { Err(unsupported("image.allocate")) }
    }
    fn delete_image(&self, id: &str) -> impl Future<Output = Result<()>> + Send {
        let _ = id;
        async { Err(unsupported("image.delete")) }
    }
    /// Returns the new VM's ID.
    fn instantiate(&self, req: &Instantiate) -> impl Future<Output = Result<String>> + Send {
        let _ = req;
        async { Err(unsupported("template.instantiate")) }
    }
}

fn unsupported(operation: &str) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        "templates",
        operation,
        None,
        "this cloud has no OpenNebula templates; the cluster's spec.provider names another cloud",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manage_lock_still_allows_instantiation_but_not_delete() {
        assert!(!LockLevel::Manage.denies(Operation::Use));
        assert!(LockLevel::Manage.denies(Operation::Manage));
        assert!(LockLevel::Manage.denies(Operation::Admin));
    }

    #[test]
    fn a_use_lock_denies_everything_and_an_admin_lock_only_admin() {
        assert!(LockLevel::Use.denies(Operation::Use));
        assert!(!LockLevel::Admin.denies(Operation::Use));
        assert!(!LockLevel::Admin.denies(Operation::Manage));
        assert!(LockLevel::Admin.denies(Operation::Admin));
    }

    #[test]
    fn lock_level_four_is_stored_as_use() {
        assert_eq!(LockLevel::from_number(4), Some(LockLevel::Use));
        assert_eq!(LockLevel::from_number(0), None);
    }
}
