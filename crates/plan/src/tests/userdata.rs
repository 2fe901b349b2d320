//! `machine.userData`: rendered for each new machine; a content change rolls the set.

use flightdeck_spec::userdata::UserData;

use super::*;

fn with_user_data(mut spec: Cluster, content: &str) -> Cluster {
    let u = UserData::inline(content.into()).expect("valid user data");
    spec.spec.control_plane.machine.user_data = Some(u.clone());
    for p in &mut spec.spec.node_pools {
        p.machine.user_data = Some(u.clone());
    }
    spec
}

#[test]
fn a_new_machine_boots_with_its_user_data_filled_in() {
    let spec = with_user_data(
        spec(V1, 2),
        "hostname: {{ machine }}\napi: {{ endpoint.address }}:{{ endpoint.port }}\nrole: {{ role }} of {{ cluster }}\n",
    );
    let w = World::with_infra(spec);
    let p = w.plan();
    let data: Vec<&str> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::CreateServer {
                machine,
                user_data: Some(d),
                ..
            } if machine == "demo-cp-1" => Some(d.as_str()),
            _ => None,
        })
        .collect();
    let [data] = data[..] else {
        panic!(
            "one CreateServer for demo-cp-1 with user data: {:#?}",
            p.actions
        );
    };
    assert!(data.contains("hostname: demo-cp-1\n"), "{data}");
    assert!(data.contains("role: control-plane of demo\n"), "{data}");
    // The load balancer's VIP, once the load balancer exists.
    assert!(data.contains(":6443\n"), "{data}");
}

#[test]
fn new_user_data_rolls_the_machines_surge_first() {
    let mut w = World::cluster(with_user_data(spec(V1, 2), "v: 1\n"), V1, 2);
    // The machines were built with the first content.
    let digest = UserData::inline("v: 1\n".into()).expect("valid").digest;
    for r in w.memory.machines.values_mut() {
        r.template.user_data = digest;
    }
    assert_eq!(
        count(&w.plan(), "CreateServer"),
        0,
        "nothing to do while it is unchanged"
    );
    w.spec = with_user_data(w.spec.clone(), "v: 2\n");
    let p = w.plan();
    let created = targets(&p, "CreateServer");
    assert!(
        !created.is_empty(),
        "new content is a rollout: {:#?}",
        p.actions
    );
    assert!(
        removing(&p).is_empty(),
        "surge first: nothing is removed before the new machines serve"
    );
}
