//! flightdeck's declarative types: `Cluster` and `Scenario`, with their defaults and
//! validation. Parsing errors name the field path and, where the YAML parser knows it,
//! the line.

pub mod bootstrap;
pub mod capacity;
pub mod cidr;
pub mod cluster;
pub mod duration;
pub mod fault;
mod kind_probe;
pub mod kubevirt;
pub mod load;
pub mod locate;
pub mod names;
pub mod node_meta;
pub mod opennebula;
pub mod scenario;
pub mod userdata;
pub mod workload;
pub mod yaml_shape;

pub use cidr::Cidr;
pub use cluster::{Cluster, ClusterSpec, Flight, MachineTemplate, NodePool, Provider};
pub use duration::Duration;
pub use kubevirt::KubeVirtProvider;
pub use load::{Document, SpecError, load_documents, load_file};
pub use names::{KubernetesVersion, Name, Text};
pub use opennebula::{OpenNebulaProvider, content_addressed_name};
pub use scenario::{FaultKind, Invariant, Scenario, Service};

/// 64-bit FNV-1a: a small, stable hash for fingerprints that must not change between
/// builds or platforms (std's `Hasher`s make no such promise).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
