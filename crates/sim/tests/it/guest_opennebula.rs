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

/// A VM made again under the name of a terminated one (its Node not yet deleted): the
/// new kubelet finds the Node of its name and takes it over, as a real one does. The
/// cluster lists one Node of that name, on the new VM, created when the first one was;
/// no Node of a gone machine is left.
#[test]
fn a_vm_made_again_under_its_name_takes_over_its_node() {
    let sim = common::sim(412);
    let workers = opennebula_cluster(&sim, 1);
    let name = "demo-w-0";
    let first = common::node(&sim, &workers[0].to_string()).expect("the first VM's node");
    ok_int(call(
        &sim,
        "one.vm.action",
        vec![s("terminate-hard"), i(workers[0])],
    ));
    wait_for(&sim, |sim| sim.stale_nodes().iter().any(|n| n.node == name));
    let t = allocate_template(&sim, "again", VM_BODY);
    let again = ok_int(instantiate(&sim, t, name, &tags_tmpl("u1", "w-0")));
    assert_ne!(again, workers[0]);
    wait_for(&sim, |sim| {
        common::node(sim, &again.to_string()).is_some_and(|n| n.ready)
    });
    let named: Vec<_> = sim
        .snapshot()
        .nodes
        .into_iter()
        .map(|(_, n)| n)
        .filter(|n| n.name == name)
        .collect();
    assert_eq!(named.len(), 1, "one Node per name: {named:?}");
    assert_eq!(named[0].server_id, Some(again.to_string()));
    assert_eq!(named[0].created_at, first.created_at, "the same Node");
    assert!(sim.stale_nodes().is_empty(), "{:?}", sim.stale_nodes());
}

/// With `guest_workload` off (the bench's baseline), a workload cluster is an empty one:
/// its nodes register and its API answers, but it runs only the control plane's static
/// pods and keeps no budgets.
#[test]
fn without_the_workload_a_guest_has_nodes_but_no_pods_or_budgets() {
    let sim = common::sim_with(
        flightdeck_sim::SimConfig {
            guest_workload: false,
            ..flightdeck_sim::SimConfig::default()
        },
        413,
    );
    let t = allocate_template(&sim, "machines", VM_BODY);
    ok_int(instantiate(&sim, t, "demo-w-0", &tags_tmpl("u1", "w-0")));
    ok_int(instantiate(&sim, t, "demo-cp-1", &tags_tmpl("u1", "cp-1")));
    wait_for(&sim, |sim| {
        sim.guest_view(CLUSTER)
            .is_some_and(|w| w.api_up && w.nodes.len() == 2 && w.nodes.iter().all(|n| n.ready))
    });
    common::wait_ms(&sim, 120_000);
    let w = sim.guest_view(CLUSTER).expect("the guest exists");
    let apps: Vec<_> = w.pods.iter().filter(|p| !p.mirror).collect();
    assert!(apps.is_empty(), "{apps:?}");
    assert!(w.pods.iter().any(|p| p.name == "kube-apiserver-demo-cp-1"));
    assert!(w.pdbs.is_empty(), "{:?}", w.pdbs);
}
