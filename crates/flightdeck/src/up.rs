//! `flightdeck up`: a file's clusters driven to Ready, on the built-in simulated cloud
//! (`up_sim.rs`) or on the real cloud their specs name.

use std::process::ExitCode;

use anyhow::bail;
use flightdeck_spec::{Document, load_file};

use crate::UpArgs;

pub async fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    if args.openstack || args.opennebula || args.kubevirt {
        return run_real(&args).await;
    }
    if args.workload_proxy.is_some() {
        bail!(
            "--workload-proxy is for a real cloud's clusters (--openstack, --opennebula or --kubevirt): the built-in simulator's are reached in process"
        );
    }
    #[cfg(feature = "sim")]
    return crate::up_sim::run(args).await;
    #[cfg(not(feature = "sim"))]
    bail!(
        "this flightdeck was built without the built-in simulator (cargo feature `sim`): name a cloud with --openstack, --opennebula or --kubevirt"
    )
}

/// `up --openstack`: the clusters in the file on the real cloud their spec names.
async fn run_real(args: &UpArgs) -> anyhow::Result<ExitCode> {
    let Some(state_dir) = &args.state_dir else {
        bail!("a real cloud needs --state-dir: it outlives one run, so must flightdeck's memory");
    };
    let mut clusters = Vec::new();
    for d in load_file(&args.file)? {
        match d {
            Document::Cluster(c) => clusters.push(*c),
            Document::Scenario(_) => bail!(
                "{}: holds a Scenario; `up` takes clusters",
                args.file.display()
            ),
        }
    }
    if args.kubevirt {
        let blocks: Vec<_> = clusters
            .iter()
            .map(|c| {
                c.spec.provider.kubevirt.clone().ok_or_else(|| {
                    anyhow::anyhow!(
                        "cluster {}: `up --kubevirt` needs spec.provider.kubevirt",
                        c.name()
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let [block] = &blocks[..] else {
            bail!("`up --kubevirt` takes one cluster at a time (each has its own kubeconfigs)");
        };
        let kubeadm = clusters.iter().any(|c| c.spec.bootstrap.kubeadm());
        return crate::real::run_kubevirt(
            block,
            kubeadm,
            state_dir,
            crate::real::Goal::Ready {
                specs: clusters,
                adopt: args.adopt,
            },
            args.timeout,
            args.workload_proxy.as_deref(),
        )
        .await;
    }
    if args.opennebula {
        let endpoints: std::collections::BTreeSet<Option<String>> = clusters
            .iter()
            .map(|c| match &c.spec.provider.opennebula {
                Some(one) => Ok(one.xmlrpc.as_ref().map(|x| x.to_string())),
                None => Err(anyhow::anyhow!(
                    "cluster {}: `up --opennebula` needs spec.provider.opennebula",
                    c.name()
                )),
            })
            .collect::<anyhow::Result<_>>()?;
        let [endpoint] = endpoints.iter().collect::<Vec<_>>()[..] else {
            bail!(
                "every cluster in one `up --opennebula` must name the same XML-RPC endpoint, found {endpoints:?}"
            );
        };
        return crate::real::run_opennebula(
            endpoint.as_deref(),
            state_dir,
            crate::real::Goal::Ready {
                specs: clusters,
                adopt: args.adopt,
            },
            args.timeout,
            args.workload_proxy.as_deref(),
        )
        .await;
    }
    let clouds: std::collections::BTreeSet<String> = clusters
        .iter()
        .filter_map(|c| {
            c.spec
                .provider
                .openstack
                .as_ref()
                .map(|o| o.cloud.to_string())
        })
        .collect();
    let [cloud] = clouds.iter().collect::<Vec<_>>()[..] else {
        bail!("every cluster in one `up --openstack` must name the same cloud, found {clouds:?}");
    };
    crate::real::run(
        cloud,
        state_dir,
        crate::real::Goal::Ready {
            specs: clusters,
            adopt: args.adopt,
        },
        args.timeout,
        args.workload_proxy.as_deref(),
    )
    .await
}
