//! The workload cluster of an OpenNebula cluster runs the same workload as an OpenStack
//! one's, and loses the pods of a VM terminated under them.

use crate::common::{self, now, wait_for};
use crate::guest_support::*;
use crate::one_support::{VM_BODY, allocate_template, call, i, instantiate, ok_int, s, tags_tmpl};

/// VMs `demo-cp-1` and `demo-w-<i>` of cluster `demo`; answers the workers' VM ids.
fn opennebula_cluster(sim: &flightdeck_sim::SimCloud, workers: usize) -> Vec<i32> {
    let t = allocate_template(sim, "machines", VM_BODY);
    let ids: Vec<i32> = (0..workers)
        .map(|n| {
            let name = format!("demo-w-{n}");
            ok_int(instantiate(
                sim,
                t,
                &name,
                &tags_tmpl("u1", &format!("w-{n}")),
            ))
        })
        .collect();
    ok_int(instantiate(sim, t, "demo-cp-1", &tags_tmpl("u1", "cp-1")));
    wait_for(sim, |sim| workload_runs(sim, CLUSTER, workers + 1));
    ids
}

#[test]
fn an_opennebula_guest_runs_the_workload_and_loses_the_pods_of_a_terminated_vm() {
    let sim = common::sim(411);
    let workers = opennebula_cluster(&sim, 2);
    let mirrors: Vec<String> = pods(&sim, CLUSTER)
        .into_iter()
        .filter(|p| p.mirror)
        .map(|p| p.name)
        .collect();
    assert_eq!(
        mirrors,
        ["kube-apiserver-demo-cp-1"],
        "the VM keyed cp-1 is the control plane"
    );
    let node = running(&sim, CLUSTER, "cache")[0].1.clone();
    let vm = workers[if node == "demo-w-0" { 0 } else { 1 }];
    let began = now(&sim);
    ok_int(call(
        &sim,
        "one.vm.action",
        vec![s("terminate-hard"), i(vm)],
    ));
    wait_for(&sim, |sim| !sim.lost_pods().is_empty());
    let lost = sim.lost_pods();
    assert!(
        lost.iter()
            .any(|p| p.name.starts_with("cache-") && p.empty_dir),
        "{lost:?}"
    );
    assert!(
        lost.iter()
            .all(|p| p.node == node && p.deletion_began_at == Some(began))
    );
    assert!(lost.iter().all(|p| !p.name.starts_with("kube-proxy")));
    let (code, _) = evict(&sim, CLUSTER, "default", "nope");
    assert_eq!(
        code, 404,
        "the Eviction API answers for OpenNebula clusters too"
    );
}
