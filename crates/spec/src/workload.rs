//! `spec.workload`: how flightdeck reaches the workload cluster's own Kubernetes API, on
//! any cloud. Its nodes are what F3 (machines that never register), F7 (pod routes from
//! each node's `spec.podCIDR`) and F10 (a blind observer) judge by.
//!
//! ```yaml
//! workload:
//!   kubeconfig: demo.kubeconfig   # relative to the spec file
//! ```
//!
//! Until the file exists (the cluster's API is not up yet, so nobody wrote it), the
//! workload cluster is "not reachable yet": nothing is judged from an absent node list,
//! and F3 counts "never came up" from the load balancer's or the bootstrap's evidence.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The longest kubeconfig path taken.
pub const PATH_MAX_BYTES: usize = 4096;

/// `spec.workload`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// The workload cluster's kubeconfig file, on the host flightdeck runs on. Relative
    /// paths are relative to the spec file; `flightdeck apply` sends it absolute.
    pub kubeconfig: String,
}

impl WorkloadSpec {
    /// Makes a relative kubeconfig path absolute, against `base` (the spec file's
    /// directory).
    pub fn resolve(&mut self, base: &Path) {
        let path = Path::new(&self.kubeconfig);
        if path.is_relative() {
            let joined = base.join(path);
            let absolute = std::path::absolute(&joined).unwrap_or(joined);
            self.kubeconfig = absolute.to_string_lossy().into_owned();
        }
    }

    /// The field's own rules; on failure, the field path and the problem.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let field = || "spec.workload.kubeconfig".to_string();
        let k = &self.kubeconfig;
        if k.trim().is_empty() {
            return Err((
                field(),
                "must name the workload cluster's kubeconfig file".into(),
            ));
        }
        if k.len() > PATH_MAX_BYTES {
            return Err((
                field(),
                format!(
                    "is {} bytes long; at most {PATH_MAX_BYTES} are allowed",
                    k.len()
                ),
            ));
        }
        if k.chars().any(char::is_control) {
            return Err((field(), "contains control characters".into()));
        }
        Ok(())
    }

    /// A spec sent to the daemon must name the file absolutely: the daemon has no spec
    /// file to be relative to (`flightdeck apply` makes it absolute).
    pub fn check_absolute(&self) -> Result<(), (String, String)> {
        if Path::new(&self.kubeconfig).is_relative() {
            return Err((
                "spec.workload.kubeconfig".into(),
                format!(
                    "{:?} is a relative path; the daemon needs an absolute one (flightdeck apply -f makes it absolute against the spec file)",
                    self.kubeconfig
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_kubeconfig_is_made_absolute_against_the_spec_file() {
        let mut w = WorkloadSpec {
            kubeconfig: "demo.kubeconfig".into(),
        };
        w.resolve(Path::new("/etc/flightdeck"));
        assert_eq!(w.kubeconfig, "/etc/flightdeck/demo.kubeconfig");
        assert!(w.check_absolute().is_ok());
        let mut w = WorkloadSpec {
            kubeconfig: "/srv/k.yaml".into(),
        };
        w.resolve(Path::new("/etc"));
        assert_eq!(w.kubeconfig, "/srv/k.yaml");
    }

    #[test]
    fn an_empty_or_relative_kubeconfig_is_refused_by_field() {
        let w = WorkloadSpec {
            kubeconfig: " ".into(),
        };
        assert_eq!(
            w.validate().expect_err("empty").0,
            "spec.workload.kubeconfig"
        );
        let w = WorkloadSpec {
            kubeconfig: "k.yaml".into(),
        };
        assert!(
            w.check_absolute()
                .expect_err("relative")
                .1
                .contains("relative path")
        );
    }
}
