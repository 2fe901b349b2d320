//! What flightdeck sees of a cloud and how it asks the cloud to change: the observed
//! object model, ownership tags, provider traits (one per capability) and the error
//! taxonomy every provider maps its failures into. No I/O lives here.

pub mod access;
pub mod erased;
pub mod error;
pub mod identity;
pub mod kubevirt;
pub mod model;
pub mod opennebula;
pub mod ownership;
pub mod provider;
pub mod rng;
pub mod time;

pub use access::{Access, AccessBook, WorkloadAccess};
pub use erased::DynProvider;
pub use error::{CloudError, ErrorClass};
pub use identity::{Identity, NamedObject};
pub use kubevirt::{
    BootstrapTokenSecret, EndpointService, EvictionStrategy, GuestDrain, Pod, VirtualMachineCreate,
    VirtualMachines, Vmi,
};
pub use model::*;
pub use opennebula::{
    Image, ImageCreate, ImageState, Instantiate, LockLevel, TemplateCreate, Templates, VmTemplate,
};
pub use ownership::{Ownership, Role};
pub use provider::{Compute, GuestCluster, LoadBalancing, Network, Provider};
pub use rng::{Rng, SeededRng};
pub use time::{Clock, SimClock, Timestamp};
