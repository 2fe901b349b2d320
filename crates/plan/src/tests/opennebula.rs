//! F1: OpenNebula templates and images that never fight. Each test builds what the
//! cloud lists and what the other clusters hold, and checks what the planner does.

use std::collections::BTreeSet;

use flightdeck_cloud::{Image, ImageState, LockLevel, Observed, VmTemplate};
use flightdeck_spec::{Cluster, Document, load_documents};

use super::{T0, condition};
use crate::opennebula::{Shared, desired};
use crate::{Action, Held, Memory, Plan, PlanInput, PlanOptions, plan};

const MASTER: &str = "CPU = \"2\"\nMEMORY = \"4096\"";

fn one_spec(master: &str) -> Cluster {
    let indented: String = master
        .lines()
        .map(|l| format!("            {l}\n"))
        .collect();
    let yaml = format!(
        "apiVersion: flightdeck.dev/v1alpha1
kind: Cluster
metadata:
  name: demo
spec:
  bootstrap: {{provider: none}}
  controlPlane:
    replicas: 1
    version: v1.30.2
    machine: {{template: master}}
  network:
    podCIDR: 10.244.0.0/16
  provider:
    opennebula:
      endpoint: 10.0.0.250
      images:
        - name: ubuntu
          content: |
            PATH = \"https://images.example/ubuntu.qcow2\"
      templates:
        - name: master
          image: ubuntu
          content: |
{indented}"
    );
    let docs = load_documents(&yaml, "one-spec").expect("the OpenNebula test spec parses");
    match docs.into_iter().next() {
        Some(Document::Cluster(c)) => *c,
        other => panic!("expected one Cluster document, got {other:?}"),
    }
}

struct World {
    spec: Cluster,
    observed: Observed,
    memory: Memory,
    shared: Shared,
}

impl World {
    fn new() -> World {
        World {
            spec: one_spec(MASTER),
            observed: Observed::default(),
            memory: Memory::new("uid-1".into()),
            shared: Shared::default(),
        }
    }

    fn names(&self) -> (String, String) {
        let one = self
            .spec
            .spec
            .provider
            .opennebula
            .as_ref()
            .expect("an OpenNebula spec");
        let (images, templates) = desired(one);
        (images[0].name.clone(), templates[0].name.clone())
    }

    /// The cloud lists the image READY and the template, with the given IDs and lock.
    fn listed(&mut self, template_id: &str, lock: Option<LockLevel>) {
        let (image, template) = self.names();
        self.observed.images.push(Image {
            id: "7".into(),
            name: image.clone(),
            state: ImageState::Ready,
            content: String::new(),
            lock: None,
            owner: "oneadmin".into(),
            running_vms: 0,
        });
        self.observed.templates.push(VmTemplate {
            id: template_id.into(),
            name: template,
            content: format!("CPU = \"2\"\nDISK = [ IMAGE = \"{image}\" ]\n"),
            lock,
            owner: "oneadmin".into(),
        });
    }

    /// This cluster holds both objects (as the creator when `created`).
    fn holds(&mut self, template_id: &str, created: bool) {
        let (image, template) = self.names();
        let held = |id: &str| Held {
            id: Some(id.into()),
            created,
            ..Held::default()
        };
        self.memory.one.images.insert(image, held("7"));
        self.memory
            .one
            .templates
            .insert(template, held(template_id));
    }

    fn held_by_other(&mut self, key: &str, created: bool) {
        self.shared
            .holders
            .entry(key.into())
            .or_default()
            .insert("other".into());
        if created {
            self.shared.created.insert(key.into());
        }
    }

    fn plan(&self) -> Plan {
        let mut observed = self.observed.clone();
        observed.at = T0;
        plan(PlanInput {
            spec: &self.spec,
            observed: &observed,
            memory: &self.memory,
            now: T0,
            options: &PlanOptions::default(),
            shared: &self.shared,
            taken_up: None,
        })
    }

    fn deleting(&mut self) {
        self.memory.deletion_requested = Some(T0);
    }

    /// An earlier list of this deletion already showed nothing left.
    fn emptied_before(&mut self) {
        self.memory.deletion_proof.empty_since = Some(flightdeck_cloud::Timestamp(T0.0 - 10_000));
    }
}

fn kinds(p: &Plan) -> Vec<&'static str> {
    p.actions.iter().map(|a| a.action.kind()).collect()
}

fn events(p: &Plan) -> BTreeSet<String> {
    p.events.iter().map(|e| e.reason.clone()).collect()
}

#[test]
fn a_new_cluster_registers_its_image_and_template_under_content_addressed_names() {
    let w = World::new();
    let p = w.plan();
    let (image, template) = w.names();
    assert!(image.starts_with("ubuntu-") && template.starts_with("master-"));
    let created: Vec<String> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::CreateImage { name, .. } | Action::CreateTemplate { name, .. } => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(created, vec![image.clone(), template.clone()]);
    // Nothing is instantiated before the template exists.
    assert!(!kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
    // The creates are recorded before they are made (write-ahead), as ours.
    assert!(p.memory.one.templates[&template].created);
    assert_eq!(p.memory.one.templates[&template].id, None);
    let ready = condition(&p, "TemplatesReady").expect("TemplatesReady is reported");
    assert!(!ready.status);
}

#[test]
fn the_template_names_its_image_by_the_image_s_registered_name() {
    let w = World::new();
    let (image, _) = w.names();
    let one = w
        .spec
        .spec
        .provider
        .opennebula
        .as_ref()
        .expect("OpenNebula");
    let (_, templates) = desired(one);
    assert!(
        templates[0]
            .content
            .ends_with(&format!("DISK = [ IMAGE = \"{image}\" ]\n")),
        "{}",
        templates[0].content
    );
}

#[test]
fn two_clusters_with_the_same_template_share_it_instead_of_deleting_it() {
    // seed 000: the other cluster registered the template; this one finds it by its
    // content-addressed name and shares it. No create, no delete.
    let mut w = World::new();
    w.listed("42", None);
    w.held_by_other("template/42", true);
    w.held_by_other("image/7", true);
    let p = w.plan();
    assert!(
        !kinds(&p)
            .iter()
            .any(|k| k.starts_with("Create") || k.starts_with("Delete")),
        "{:?}",
        kinds(&p)
    );
    assert!(kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
    let (_, template) = w.names();
    let held = &p.memory.one.templates[&template];
    assert_eq!(held.id.as_deref(), Some("42"));
    assert!(held.created, "registered by flightdeck (the other cluster)");
    assert!(events(&p).contains("TemplateShared"), "{:?}", events(&p));
}

#[test]
fn a_template_registered_outside_flightdeck_is_used_but_never_owned() {
    let mut w = World::new();
    w.listed("42", None);
    let p = w.plan();
    let (_, template) = w.names();
    assert!(!p.memory.one.templates[&template].created);
    assert!(events(&p).contains("TemplateUsedNotOwned"));
    // ... and deleting the cluster leaves it in place.
    let mut w = World::new();
    w.listed("42", None);
    w.holds("42", false);
    w.deleting();
    w.emptied_before();
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteTemplate"), "{:?}", kinds(&p));
    assert!(p.memory.one.templates.is_empty());
    assert!(p.deleted);
}

#[test]
fn a_manage_lock_still_lets_machines_be_instantiated() {
    let mut w = World::new();
    w.listed("42", Some(LockLevel::Manage));
    w.holds("42", true);
    let p = w.plan();
    assert!(kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
    assert!(!kinds(&p).contains(&"DeleteTemplate"));
    let ready = condition(&p, "TemplatesReady").expect("reported");
    assert!(ready.status, "{ready:?}");
}

#[test]
fn a_use_lock_is_reported_and_the_cloud_has_the_last_word() {
    let mut w = World::new();
    w.listed("42", Some(LockLevel::Use));
    w.holds("42", true);
    let p = w.plan();
    // Tried once: the lock may be lifted any moment, and OpenNebula's refusal (with
    // its message) is what the cluster then reports.
    assert!(kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
    assert!(
        !kinds(&p).iter().any(|k| k.starts_with("Delete")),
        "a lock is never fought: {:?}",
        kinds(&p)
    );
    let ready = condition(&p, "TemplatesReady").expect("reported");
    assert!(!ready.status);
    assert!(ready.message.contains("locked at USE"), "{}", ready.message);
}

#[test]
fn a_refused_instantiation_is_retried_slowly_with_opennebula_s_message() {
    let mut w = World::new();
    w.listed("42", Some(LockLevel::Use));
    w.holds("42", true);
    let message = "[one.template.instantiate] User [0] : TEMPLATE is locked. [42].";
    w.memory.one.blocked.insert(
        "42".into(),
        crate::memory::Blocked {
            since: T0.plus(flightdeck_spec::Duration::from_secs(0)),
            message: message.into(),
        },
    );
    let p = w.plan();
    assert!(!kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
    let ready = condition(&p, "TemplatesReady").expect("reported");
    assert!(ready.message.contains(message), "{}", ready.message);
    assert!(
        p.requeue_after.is_some_and(|d| d.as_millis() >= 5_000),
        "no hot loop: {:?}",
        p.requeue_after
    );
    // Five minutes on, it is tried again.
    let mut later = World::new();
    later.observed = w.observed.clone();
    later.memory = w.memory.clone();
    let p = plan(PlanInput {
        spec: &later.spec,
        observed: &later.observed,
        memory: &later.memory,
        now: T0.plus(crate::opennebula::BLOCKED_RETRY),
        options: &PlanOptions::default(),
        shared: &later.shared,
        taken_up: None,
    });
    assert!(kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
}

#[test]
fn a_content_change_registers_a_sibling_and_leaves_the_locked_original_alone() {
    let mut w = World::new();
    w.listed("42", Some(LockLevel::Manage));
    w.holds("42", true);
    let (_, old) = w.names();
    w.spec = one_spec("CPU = \"4\"\nMEMORY = \"8192\"");
    let (_, new) = w.names();
    assert_ne!(old, new);
    let p = w.plan();
    let created: Vec<&str> = p
        .actions
        .iter()
        .filter_map(|a| match &a.action {
            Action::CreateTemplate { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(created, vec![new.as_str()]);
    assert!(!kinds(&p).contains(&"DeleteTemplate"), "{:?}", kinds(&p));
    // No machine uses the old one: it is let go of, and as it is locked, left in place.
    assert!(
        events(&p).contains("TemplateLeftLocked"),
        "{:?}",
        events(&p)
    );
    assert!(!p.memory.one.templates.contains_key(&old));
}

#[test]
fn the_last_holder_deletes_what_flightdeck_registered() {
    let mut w = World::new();
    w.listed("42", None);
    w.holds("42", true);
    w.deleting();
    let p = w.plan();
    assert_eq!(
        kinds(&p),
        vec!["DeleteTemplate"],
        "the image goes after the template"
    );
    let (_, template) = w.names();
    assert!(p.memory.one.templates[&template].deleting);
    assert!(!p.deleted);
}

#[test]
fn a_shared_template_is_left_to_the_clusters_that_still_hold_it() {
    let mut w = World::new();
    w.listed("42", None);
    w.holds("42", true);
    w.held_by_other("template/42", true);
    w.held_by_other("image/7", true);
    w.deleting();
    w.emptied_before();
    let p = w.plan();
    assert!(
        !kinds(&p).iter().any(|k| k.starts_with("Delete")),
        "{:?}",
        kinds(&p)
    );
    assert!(p.memory.one.is_empty());
    assert!(p.deleted);
}

#[test]
fn a_locked_template_no_one_needs_is_left_in_place_and_deletion_finishes() {
    let mut w = World::new();
    w.listed("42", Some(LockLevel::Manage));
    w.holds("42", true);
    w.deleting();
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteTemplate"), "{:?}", kinds(&p));
    assert!(events(&p).contains("TemplateLeftLocked"));
    // The image is deleted once the template is let go of, in the next pass.
    let mut w2 = World::new();
    w2.observed = w.observed.clone();
    w2.memory = p.memory.clone();
    w2.deleting();
    let p2 = w2.plan();
    assert_eq!(kinds(&p2), vec!["DeleteImage"]);
}

#[test]
fn an_object_another_cluster_is_deleting_is_neither_taken_up_nor_registered_twice() {
    let mut w = World::new();
    w.listed("42", None);
    w.shared.deleting.insert("template/42".into());
    w.held_by_other("image/7", true);
    let p = w.plan();
    assert!(
        !kinds(&p)
            .iter()
            .any(|k| *k == "CreateTemplate" || *k == "Instantiate"),
        "{:?}",
        kinds(&p)
    );
    let ready = condition(&p, "TemplatesReady").expect("reported");
    assert!(ready.message.contains("being deleted"), "{}", ready.message);
}

#[test]
fn an_unanswered_create_is_adopted_by_name_after_a_crash() {
    let mut w = World::new();
    w.listed("42", None);
    let (image, template) = w.names();
    for (map, name) in [
        (&mut w.memory.one.templates, template.clone()),
        (&mut w.memory.one.images, image),
    ] {
        map.insert(
            name,
            Held {
                id: None,
                created: true,
                ..Held::default()
            },
        );
    }
    let p = w.plan();
    assert!(!kinds(&p).contains(&"CreateTemplate"), "{:?}", kinds(&p));
    let held = &p.memory.one.templates[&template];
    assert_eq!(held.id.as_deref(), Some("42"));
    assert!(held.created);
}

#[test]
fn an_image_still_being_copied_in_holds_machines_back() {
    let mut w = World::new();
    w.listed("42", None);
    w.holds("42", true);
    w.observed.images[0].state = ImageState::Locked;
    let p = w.plan();
    assert!(!kinds(&p).contains(&"Instantiate"), "{:?}", kinds(&p));
    w.observed.images[0].state = ImageState::Error;
    let p = w.plan();
    let ready = condition(&p, "TemplatesReady").expect("reported");
    assert!(ready.message.contains("ERROR"), "{}", ready.message);
}

impl World {
    /// The image this cluster registered is listed in ERROR, first seen so `ago`.
    fn image_failed(&mut self, ago: flightdeck_spec::Duration) {
        self.listed("3", None);
        self.holds("3", true);
        self.observed.images[0].state = ImageState::Error;
        let (image, _) = self.names();
        if let Some(h) = self.memory.one.images.get_mut(&image) {
            h.failed_since = Some(flightdeck_cloud::Timestamp(T0.0 - ago.as_millis()));
        }
    }
}

fn problems(p: &Plan) -> String {
    condition(p, crate::opennebula::kind::TEMPLATES_READY)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[test]
fn an_image_flightdeck_registered_that_failed_is_not_deleted_before_its_retry_time() {
    let mut w = World::new();
    w.image_failed(flightdeck_spec::Duration::from_mins(1));
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteImage"), "{:?}", kinds(&p));
    assert!(
        problems(&p).contains("deletes it to register it again in 4m"),
        "{}",
        problems(&p)
    );
}

#[test]
fn an_image_flightdeck_registered_that_stayed_in_error_is_deleted_to_be_registered_again() {
    let mut w = World::new();
    w.image_failed(crate::opennebula::FAILED_IMAGE_RETRY);
    let p = w.plan();
    assert!(condition(&p, "PlanRejected").is_none(), "{:?}", p.events);
    assert!(kinds(&p).contains(&"DeleteImage"), "{:?}", kinds(&p));
    assert!(events(&p).contains("ImageGivenUp"));
    let (image, _) = w.names();
    let held = &p.memory.one.images[&image];
    assert!(held.given_up && held.deleting, "{held:?}");
}

#[test]
fn a_failed_image_another_cluster_still_holds_waits_for_it_to_give_it_up() {
    let mut w = World::new();
    w.image_failed(crate::opennebula::FAILED_IMAGE_RETRY);
    w.held_by_other("image/7", true);
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteImage"), "{:?}", kinds(&p));
    assert!(
        problems(&p).contains("once other give(s) it up too"),
        "{}",
        problems(&p)
    );
    // Given up, this cluster no longer counts as a holder in the others' ledger.
    let mine = crate::Memory::clone(&p.memory);
    let ledger = Shared::from_holdings("other", [("me", &mine.one)]);
    assert!(!ledger.holders.contains_key("image/7"), "{ledger:?}");
    assert!(ledger.created.contains("image/7"));
}

#[test]
fn a_failed_image_flightdeck_did_not_register_is_left_to_its_operator() {
    let mut w = World::new();
    w.image_failed(crate::opennebula::FAILED_IMAGE_RETRY);
    w.holds("3", false);
    let p = w.plan();
    assert!(!kinds(&p).contains(&"DeleteImage"), "{:?}", kinds(&p));
    assert!(
        problems(&p).contains("flightdeck did not register it"),
        "{}",
        problems(&p)
    );
}
