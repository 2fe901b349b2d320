//! Writes sample bootstrap data, one file per role and Kubernetes version (v1.30.0:
//! kubeadm v1beta3; v1.31.0: v1beta4), into the directory given as the one argument:
//! `<role>-<version>.yaml`. scripts/check-cloud-init-schema.sh checks each against
//! cloud-init's schema.
//!
//! The samples hold a PKI and a token made for them alone (a fixed seed for the token),
//! written `0600`; they protect nothing.

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use flightdeck_guest::cloudinit::Permissions;
use flightdeck_guest::{BootstrapToken, ClusterBootstrap, ClusterPki, File, Role, Secret, render};

const NOW: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        return Err("usage: render_samples DIRECTORY".into());
    };
    let dir = Path::new(&dir);
    let pki = ClusterPki::generate("demo", NOW)?;
    let hash = pki.discovery_hash()?;
    let token = BootstrapToken::generate(&mut splitmix64(41));
    for version in ["v1.30.0", "v1.31.0"] {
        let cluster = sample_cluster(version);
        let roles = [
            ("init", "demo-cp-0", Role::Init { pki: &pki }),
            (
                "join-control-plane",
                "demo-cp-1",
                Role::JoinControlPlane {
                    pki: &pki,
                    token: &token,
                    ca_cert_hash: &hash,
                },
            ),
            (
                "join-worker",
                "demo-md-0",
                Role::JoinWorker {
                    token: &token,
                    ca_cert_hash: &hash,
                },
            ),
        ];
        for (role_name, machine, role) in roles {
            let user_data = render(&cluster, machine, role)?;
            let path = dir.join(format!("{role_name}-{version}.yaml"));
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)?
                .write_all(user_data.expose().as_bytes())?;
            println!("{}", path.display());
        }
    }
    Ok(())
}

/// A cluster using every field, so the schema sees each kind of entry.
fn sample_cluster(version: &str) -> ClusterBootstrap {
    let args = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    ClusterBootstrap {
        cluster: "demo".to_string(),
        kubernetes_version: version.to_string(),
        endpoint_host: "api.demo.example".to_string(),
        endpoint_port: 6443,
        pod_subnet: Some("10.244.0.0/16".to_string()),
        service_subnet: Some("10.96.0.0/12".to_string()),
        api_server_extra_args: args(&[("audit-log-maxage", "30")]),
        controller_manager_extra_args: args(&[("bind-address", "0.0.0.0")]),
        scheduler_extra_args: args(&[("bind-address", "0.0.0.0")]),
        kubelet_extra_args: args(&[("cloud-provider", "external")]),
        pre_kubeadm_commands: vec!["swapoff -a".to_string()],
        post_kubeadm_commands: vec![
            "echo bootstrapped > /run/flightdeck-bootstrap.done".to_string(),
        ],
        files: vec![File {
            path: "/etc/sysctl.d/99-kubernetes.conf".to_string(),
            content: Secret::new("net.ipv4.ip_forward = 1\n".to_string()),
            permissions: Permissions::PUBLIC,
            owner: "root:root".to_string(),
        }],
        cert_sans: vec!["10.0.0.10".to_string(), "*.demo.example".to_string()],
    }
}

/// SplitMix64 from `seed`: the token's randomness, fixed so samples replay.
fn splitmix64(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
