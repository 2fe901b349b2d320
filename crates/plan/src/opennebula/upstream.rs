//! The upstream provider's template handling, kept only to prove the invariants catch
//! it (see [`TemplatePolicy::UpstreamStampByName`]).

use std::collections::BTreeMap;

use flightdeck_spec::OpenNebulaProvider;

use super::ensure::ensure;
use super::ledger::{Kind, OneInfra, POLL_IMAGES, UPSTREAM_STAMP, desired};
use crate::Planner;
use crate::action::Action;
use crate::memory::Held;

/// The upstream provider's template handling (see [`TemplatePolicy::UpstreamStampByName`]).
pub(super) fn plan_upstream(p: &mut Planner<'_>, one: &OpenNebulaProvider) -> OneInfra {
    let (images, templates) = desired(one);
    let mut problems = Vec::new();
    let mut infra = OneInfra {
        complete: true,
        ..OneInfra::default()
    };
    let mut image_ok = BTreeMap::new();
    for d in &images {
        image_ok.insert(
            d.name.clone(),
            ensure(p, Kind::Image, d, &mut problems).is_some(),
        );
    }
    let stamp = format!("{UPSTREAM_STAMP} = \"{}\"", p.memory.uid);
    for (t, spec) in templates.iter().zip(&one.templates) {
        let name = t.spec_name.clone();
        let content = format!("{}{stamp}\n", t.content);
        let found: Vec<(String, bool)> = p
            .observed
            .templates
            .iter()
            .filter(|x| x.name == name)
            .map(|x| (x.id.clone(), x.content.contains(&stamp)))
            .collect();
        match found.first() {
            Some((id, true)) => {
                let image_ready = spec
                    .image
                    .as_ref()
                    .and_then(|i| images.iter().find(|d| d.spec_name == i.as_str()))
                    .is_none_or(|d| image_ok.get(&d.name).copied().unwrap_or(false));
                if image_ready {
                    // Machine records name the template by what `machine_template` says.
                    infra.instantiable.insert(t.name.clone(), id.clone());
                } else {
                    infra.complete = false;
                }
                p.memory.one.templates.insert(
                    name,
                    Held {
                        id: Some(id.clone()),
                        created: true,
                        ..Held::default()
                    },
                );
            }
            Some((id, false)) => {
                infra.complete = false;
                p.act(
                    Action::DeleteTemplate {
                        template_id: id.clone(),
                        name: name.clone(),
                    },
                    "the template is stamped by another cluster (upstream policy)",
                );
                p.act(
                    Action::CreateTemplate {
                        name: name.clone(),
                        content,
                    },
                    "re-created with this cluster's stamp (upstream policy)",
                );
                p.memory.one.templates.insert(
                    name,
                    Held {
                        id: None,
                        created: true,
                        ..Held::default()
                    },
                );
            }
            None => {
                infra.complete = false;
                p.memory.one.templates.insert(
                    name.clone(),
                    Held {
                        id: None,
                        created: true,
                        ..Held::default()
                    },
                );
                p.act(
                    Action::CreateTemplate { name, content },
                    "the template does not exist (upstream policy)",
                );
            }
        }
    }
    if !infra.complete {
        p.wait(POLL_IMAGES);
    }
    infra
}
