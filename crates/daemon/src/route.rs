//! Which cloud a cluster lives on: the embedded simulator, or a real cloud named by its
//! spec. Each cloud has one backend (one engine); the route's label names it.

use flightdeck_openstack::CloudEntry;
use flightdeck_spec::Cluster;

use crate::error::Failure;

/// The cloud entry name that means "the embedded simulator" when clouds.yaml has no
/// entry of that name.
pub const SIM_CLOUD: &str = "sim";

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Route {
    SimOpenStack,
    SimOpenNebula,
    SimKubeVirt {
        namespace: String,
    },
    /// A clouds.yaml entry.
    OpenStack {
        cloud: String,
    },
    /// An XML-RPC endpoint (`None`: `$ONE_XMLRPC`).
    OpenNebula {
        xmlrpc: Option<String>,
    },
    /// An infra cluster's kubeconfig file and namespace.
    KubeVirt {
        infra: String,
        namespace: String,
    },
}

impl Route {
    /// The cluster's cloud as the API shows it; one backend per label.
    pub fn label(&self) -> String {
        match self {
            Route::SimOpenStack => "sim/openstack".into(),
            Route::SimOpenNebula => "sim/opennebula".into(),
            Route::SimKubeVirt { namespace } => format!("sim/kubevirt/{namespace}"),
            Route::OpenStack { cloud } => format!("openstack:{cloud}"),
            Route::OpenNebula { xmlrpc } => {
                format!("opennebula:{}", xmlrpc.as_deref().unwrap_or("$ONE_XMLRPC"))
            }
            Route::KubeVirt { infra, namespace } => format!("kubevirt:{infra}/{namespace}"),
        }
    }

    /// The kind of cloud, as metrics label it.
    pub fn cloud_kind(&self) -> &'static str {
        match self {
            Route::SimOpenStack | Route::OpenStack { .. } => "openstack",
            Route::SimOpenNebula | Route::OpenNebula { .. } => "opennebula",
            Route::SimKubeVirt { .. } | Route::KubeVirt { .. } => "kubevirt",
        }
    }

    pub fn is_sim(&self) -> bool {
        matches!(
            self,
            Route::SimOpenStack | Route::SimOpenNebula | Route::SimKubeVirt { .. }
        )
    }

    /// The simulator's cloud kind a fault goes to (`None` for real clouds).
    pub fn sim_kind(&self) -> Option<&'static str> {
        match self {
            Route::SimOpenStack => Some("openstack"),
            Route::SimOpenNebula => Some("opennebula"),
            Route::SimKubeVirt { .. } => Some("kubevirt"),
            _ => None,
        }
    }
}

/// Decides where `spec` lives. `sim`: whether the embedded simulator runs.
pub fn route(spec: &Cluster, sim: bool) -> Result<Route, Failure> {
    let p = &spec.spec.provider;
    let name = spec.name();
    if let Some(os) = &p.openstack {
        let cloud = os.cloud.as_str();
        return match CloudEntry::load(Some(cloud)) {
            Ok(_) => Ok(Route::OpenStack {
                cloud: cloud.to_string(),
            }),
            Err(_) if sim && cloud == SIM_CLOUD => Ok(Route::SimOpenStack),
            Err(e) => Err(Failure::unprocessable(format!(
                "cluster {name}: spec.provider.openstack.cloud: {cloud:?}: {e}{}",
                if sim {
                    format!(" (name the cloud {SIM_CLOUD:?} for the embedded simulator)")
                } else {
                    String::new()
                }
            ))),
        };
    }
    if let Some(one) = &p.opennebula {
        return match (&one.xmlrpc, sim) {
            (Some(x), _) => Ok(Route::OpenNebula {
                xmlrpc: Some(x.to_string()),
            }),
            (None, true) => Ok(Route::SimOpenNebula),
            (None, false) => Ok(Route::OpenNebula { xmlrpc: None }),
        };
    }
    if let Some(kv) = &p.kubevirt {
        let namespace = kv.namespace.to_string();
        return match (&kv.infra_kubeconfig, sim) {
            (Some(infra), _) => Ok(Route::KubeVirt {
                infra: infra.to_string(),
                namespace,
            }),
            (None, true) => Ok(Route::SimKubeVirt { namespace }),
            (None, false) => Err(Failure::unprocessable(format!(
                "cluster {name}: spec.provider.kubevirt.infraKubeconfig is absent and the embedded simulator is off (--no-sim)"
            ))),
        };
    }
    Err(Failure::unprocessable(format!(
        "cluster {name}: spec.provider names no cloud (openstack, opennebula or kubevirt)"
    )))
}
