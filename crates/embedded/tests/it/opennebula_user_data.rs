//! machine.userData on OpenNebula, through the real XML-RPC provider against the
//! simulator: the VM's CONTEXT carries the user data and keeps the template's own members.

use std::sync::Arc;

use flightdeck_cloud::{
    Instantiate, Ownership, Role, SimClock, TemplateCreate, Templates, Timestamp,
};
use flightdeck_sim::{SimCloud, SimConfig};

#[tokio::test]
async fn instantiated_vms_carry_the_user_data_in_their_context() {
    let clock = SimClock::new(Timestamp(1_767_225_600_000));
    let cloud = Arc::new(SimCloud::new(SimConfig::default(), 5, clock));
    let provider = flightdeck_embedded::in_process_opennebula(cloud.clone());
    let template_id = provider
        .create_template(&TemplateCreate {
            name: "master".into(),
            content: "CPU = 1\nMEMORY = 1024\nCONTEXT = [ NETWORK = \"YES\", SET_HOSTNAME = \"$NAME\" ]\n"
                .into(),
        })
        .await
        .expect("template");
    let owner = Ownership {
        cluster: "demo".into(),
        uid: "u1".into(),
    };
    let data = "#cloud-config\nhostname: demo-cp-1\n";
    let vm = provider
        .instantiate(&Instantiate {
            template_id,
            name: "demo-cp-1".into(),
            tags: owner.tags(&Role::Machine("cp-1".into())),
            user_data: Some(data.into()),
        })
        .await
        .expect("instantiate");
    let doc = provider
        .client()
        .vm_info(vm.parse().expect("VM id"))
        .await
        .expect("VM info");
    let context = doc.template.vectors("CONTEXT").next().expect("CONTEXT");
    let get = |k: &str| context.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("NETWORK").as_deref(), Some("YES"), "{context:?}");
    assert_eq!(get("SET_HOSTNAME").as_deref(), Some("$NAME"), "{context:?}");
    assert_eq!(get("USERDATA_ENCODING").as_deref(), Some("base64"));
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(get("USER_DATA").expect("USER_DATA"))
        .expect("base64");
    assert_eq!(String::from_utf8(decoded).expect("utf-8"), data);
    // Ownership still reaches the user template alongside.
    assert!(doc.user_template.single("FLIGHTDECK_UID").is_some());
}
