//! A plan that breaks its own guarantees is refused before anything of it is done.

use std::collections::BTreeSet;

use crate::PlanOptions;
use crate::action::{Action, PlannedAction};
use crate::opennebula::Shared;
use crate::safety::{Disabled, Mechanism};
use crate::verify::verify_actions;

fn planned(action: Action) -> PlannedAction {
    PlannedAction {
        action,
        reason: "test".into(),
    }
}

fn delete_server(id: &str) -> PlannedAction {
    planned(Action::DeleteServer {
        machine: format!("demo-{id}"),
        server_id: id.into(),
    })
}

fn delete_template(id: &str) -> PlannedAction {
    planned(Action::DeleteTemplate {
        template_id: id.into(),
        name: "master-ab12".into(),
    })
}

#[test]
fn a_pass_that_acts_twice_on_one_server_is_refused_naming_it() {
    let ok = verify_actions(
        &[delete_server("s-1"), delete_server("s-2")],
        &Shared::default(),
        &PlanOptions::default(),
    );
    assert_eq!(ok, Ok(()));
    let err = verify_actions(
        &[delete_server("s-1"), delete_server("s-1")],
        &Shared::default(),
        &PlanOptions::default(),
    )
    .expect_err("two deletes of s-1");
    assert!(err.contains("two actions on server s-1"), "{err}");
}

#[test]
fn f1_deleting_a_template_another_cluster_holds_is_refused_unless_the_rule_is_switched_off() {
    let mut shared = Shared::default();
    shared
        .holders
        .insert("template/7".into(), BTreeSet::from(["other".to_string()]));
    let err = verify_actions(&[delete_template("7")], &shared, &PlanOptions::default())
        .expect_err("held by other");
    assert!(err.contains("other"), "{err}");
    assert_eq!(
        verify_actions(&[delete_template("8")], &shared, &PlanOptions::default()),
        Ok(())
    );
    let unsafe_options = PlanOptions {
        disabled: Disabled::of([Mechanism::TemplateLastHolder]),
        ..PlanOptions::default()
    };
    assert_eq!(
        verify_actions(&[delete_template("7")], &shared, &unsafe_options),
        Ok(())
    );
}
