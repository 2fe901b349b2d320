//! The fixed flavor catalog.

use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::links;
use super::microversion::Mv;
use crate::{App, errors, wire};

pub(super) struct Flavor {
    pub(super) id: &'static str,
    pub(super) name: &'static str,
    pub(super) vcpus: u32,
    pub(super) ram: u32,
    pub(super) disk: u32,
}

/// The flavors every simulated cloud has (DevStack's ids and sizes).
pub(super) const FLAVORS: [Flavor; 5] = [
    Flavor {
        id: "1",
        name: "m1.tiny",
        vcpus: 1,
        ram: 512,
        disk: 1,
    },
    Flavor {
        id: "2",
        name: "m1.small",
        vcpus: 1,
        ram: 2048,
        disk: 20,
    },
    Flavor {
        id: "3",
        name: "m1.medium",
        vcpus: 2,
        ram: 4096,
        disk: 40,
    },
    Flavor {
        id: "4",
        name: "m1.large",
        vcpus: 4,
        ram: 8192,
        disk: 80,
    },
    Flavor {
        id: "5",
        name: "m1.xlarge",
        vcpus: 8,
        ram: 16384,
        disk: 160,
    },
];

pub(super) fn flavor_by_name(name: &str) -> Option<&'static Flavor> {
    FLAVORS.iter().find(|f| f.name == name)
}

fn render_flavor(app: &App, f: &Flavor, mv: Mv, detail: bool) -> Value {
    let mut v = json!({"id": f.id, "name": f.name, "links": links(app, "flavors", f.id)});
    let Some(m) = v.as_object_mut() else {
        return v;
    };
    if detail {
        m.insert("ram".into(), json!(f.ram));
        m.insert("disk".into(), json!(f.disk));
        m.insert("vcpus".into(), json!(f.vcpus));
        m.insert("OS-FLV-EXT-DATA:ephemeral".into(), json!(0));
        m.insert("OS-FLV-DISABLED:disabled".into(), json!(false));
        m.insert(
            "swap".into(),
            if mv.at_least(75) { json!(0) } else { json!("") },
        );
        m.insert("rxtx_factor".into(), json!(1.0));
        m.insert("os-flavor-access:is_public".into(), json!(true));
        if mv.at_least(61) {
            m.insert("extra_specs".into(), json!({}));
        }
    }
    if mv.at_least(55) {
        m.insert("description".into(), Value::Null);
    }
    v
}

pub(super) async fn flavors_brief(
    State(app): State<App>,
    Extension(mv): Extension<Mv>,
) -> Response {
    let all: Vec<Value> = FLAVORS
        .iter()
        .map(|f| render_flavor(&app, f, mv, false))
        .collect();
    wire::json(StatusCode::OK, &json!({ "flavors": all }))
}

pub(super) async fn flavors_detail(
    State(app): State<App>,
    Extension(mv): Extension<Mv>,
) -> Response {
    let all: Vec<Value> = FLAVORS
        .iter()
        .map(|f| render_flavor(&app, f, mv, true))
        .collect();
    wire::json(StatusCode::OK, &json!({ "flavors": all }))
}

pub(super) async fn flavor_show(
    State(app): State<App>,
    Extension(mv): Extension<Mv>,
    Path(id): Path<String>,
) -> Response {
    match FLAVORS.iter().find(|f| f.id == id) {
        Some(f) => wire::json(
            StatusCode::OK,
            &json!({"flavor": render_flavor(&app, f, mv, true)}),
        ),
        None => errors::nova(
            StatusCode::NOT_FOUND,
            &format!("Flavor {id} could not be found."),
        ),
    }
}
