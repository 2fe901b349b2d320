//! One simulated cluster's object store, as etcd behind an API server holds it: objects
//! by (resource, namespace, name) in key order, a cluster-wide `resourceVersion` bumped
//! on every change, and a bounded log of watch events.

use std::collections::{BTreeMap, VecDeque};

use flightdeck_cloud::Timestamp;
use serde_json::{Map, Value, json};

use super::compact::Stored;
use super::keyed::Objects;

/// The most objects one simulated cluster holds; creates beyond it are refused.
pub const KUBE_OBJECTS_MAX: usize = 20_000;
/// The most watch events one simulated cluster keeps; a watch from before the oldest
/// kept one answers `410 Expired`, as a compacted etcd does.
pub const KUBE_EVENTS_MAX: usize = 4_096;
/// The most watch events the workload cluster of an OpenStack or OpenNebula cluster
/// keeps ([`Store::compacting`]): none. A fleet holds a thousand of them, and nothing
/// watches them yet: a watch from before the latest resourceVersion is told to list
/// again (`410 Expired`), as an API server whose etcd was just compacted says; one from
/// the latest waits for what comes.
pub const GUEST_EVENTS_MAX: usize = 0;

/// The resources the simulated API servers serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    Namespace,
    Node,
    Pod,
    Service,
    Secret,
    Pdb,
    DaemonSet,
    ReplicaSet,
    Vm,
    Vmi,
}

/// How a resource appears in discovery and in paths.
#[derive(Debug)]
pub(crate) struct Resource {
    pub(crate) kind: Kind,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) kind_name: &'static str,
    /// `""` for the core group.
    pub(crate) group: &'static str,
    pub(crate) versions: &'static [&'static str],
    pub(crate) namespaced: bool,
    pub(crate) short_names: &'static [&'static str],
    /// Served by the infrastructure cluster only (KubeVirt).
    pub(crate) infra_only: bool,
    /// The short name used in mutation targets (`infra/vmi/<name>`).
    pub(crate) target: &'static str,
}

pub(crate) const RESOURCES: &[Resource] = &[
    Resource {
        kind: Kind::Namespace,
        plural: "namespaces",
        singular: "namespace",
        kind_name: "Namespace",
        group: "",
        versions: &["v1"],
        namespaced: false,
        short_names: &["ns"],
        infra_only: false,
        target: "namespace",
    },
    Resource {
        kind: Kind::Node,
        plural: "nodes",
        singular: "node",
        kind_name: "Node",
        group: "",
        versions: &["v1"],
        namespaced: false,
        short_names: &["no"],
        infra_only: false,
        target: "node",
    },
    Resource {
        kind: Kind::Pod,
        plural: "pods",
        singular: "pod",
        kind_name: "Pod",
        group: "",
        versions: &["v1"],
        namespaced: true,
        short_names: &["po"],
        infra_only: false,
        target: "pod",
    },
    Resource {
        kind: Kind::Service,
        plural: "services",
        singular: "service",
        kind_name: "Service",
        group: "",
        versions: &["v1"],
        namespaced: true,
        short_names: &["svc"],
        infra_only: false,
        target: "service",
    },
    Resource {
        kind: Kind::Secret,
        plural: "secrets",
        singular: "secret",
        kind_name: "Secret",
        group: "",
        versions: &["v1"],
        namespaced: true,
        short_names: &[],
        infra_only: false,
        target: "secret",
    },
    Resource {
        kind: Kind::Pdb,
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind_name: "PodDisruptionBudget",
        group: "policy",
        versions: &["v1", "v1beta1"],
        namespaced: true,
        short_names: &["pdb"],
        infra_only: false,
        target: "pdb",
    },
    Resource {
        kind: Kind::DaemonSet,
        plural: "daemonsets",
        singular: "daemonset",
        kind_name: "DaemonSet",
        group: "apps",
        versions: &["v1"],
        namespaced: true,
        short_names: &["ds"],
        infra_only: false,
        target: "daemonset",
    },
    Resource {
        kind: Kind::ReplicaSet,
        plural: "replicasets",
        singular: "replicaset",
        kind_name: "ReplicaSet",
        group: "apps",
        versions: &["v1"],
        namespaced: true,
        short_names: &["rs"],
        infra_only: false,
        target: "replicaset",
    },
    Resource {
        kind: Kind::Vm,
        plural: "virtualmachines",
        singular: "virtualmachine",
        kind_name: "VirtualMachine",
        group: "kubevirt.io",
        versions: &["v1"],
        namespaced: true,
        short_names: &["vm", "vms"],
        infra_only: true,
        target: "vm",
    },
    Resource {
        kind: Kind::Vmi,
        plural: "virtualmachineinstances",
        singular: "virtualmachineinstance",
        kind_name: "VirtualMachineInstance",
        group: "kubevirt.io",
        versions: &["v1"],
        namespaced: true,
        short_names: &["vmi", "vmis"],
        infra_only: true,
        target: "vmi",
    },
];

impl Kind {
    pub(crate) fn resource(self) -> &'static Resource {
        // RESOURCES lists every kind; the fallback is never taken.
        RESOURCES
            .iter()
            .find(|r| r.kind == self)
            .unwrap_or(&RESOURCES[0])
    }

    pub(crate) fn namespaced(self) -> bool {
        self.resource().namespaced
    }

    /// The `apiVersion` objects are stored and answered with.
    pub(crate) fn api_version(self) -> String {
        let r = self.resource();
        let version = r.versions.first().copied().unwrap_or("v1");
        if r.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", r.group)
        }
    }
}

/// One change, as a watch reports it.
#[derive(Debug)]
pub(crate) struct WatchEvent {
    pub(crate) resource_version: u64,
    pub(crate) kind: Kind,
    pub(crate) namespace: String,
    pub(crate) kind_of_change: &'static str,
    object: Stored,
}

impl WatchEvent {
    pub(crate) fn object(&self) -> &Value {
        self.object.get()
    }
}

type Key = (Kind, String, String);

/// One cluster's objects.
#[derive(Debug, Default)]
pub(crate) struct Store {
    objects: Objects<Key>,
    resource_version: u64,
    events: VecDeque<WatchEvent>,
    /// Events up to and including this resourceVersion were dropped from the log.
    events_dropped_through: u64,
    /// Keeps its objects encoded between passes ([`Store::compact`]) and at most
    /// [`GUEST_EVENTS_MAX`] watch events.
    compacting: bool,
}

/// `t` as RFC 3339 in UTC with whole seconds, as Kubernetes writes `metav1.Time`.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    let secs = t.millis() / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// An RFC 3339 time in UTC (`2026-01-01T00:00:00Z`, fractions of a second ignored), as
/// a bootstrap token's `expiration` is written; `None` if it is not one.
pub(crate) fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let time = time.split('.').next()?;
    let mut t = time.splitn(3, ':').map(|p| p.parse::<u64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Howard Hinnant's days-from-civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days).ok()? * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(Timestamp(secs * 1000))
}

/// Howard Hinnant's days-from-civil inverse: days since 1970-01-01 to (y, m, d).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The string at `path` in `v`, if there is one.
pub(crate) fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

/// The value at `path` in `v`, if there is one.
pub(crate) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// The object at `path` in `v`, created (replacing a non-object) on the way.
pub(crate) fn obj_at<'a>(v: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    let Value::Object(m) = v else {
        unreachable!("a value just made an object is an object")
    };
    match path.split_first() {
        None => m,
        Some((k, rest)) => obj_at(m.entry((*k).to_string()).or_insert(Value::Null), rest),
    }
}

/// Sets `path` (the last element the field) in `v` to `value`.
pub(crate) fn set_at(v: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    obj_at(v, parents).insert((*last).to_string(), value);
}

/// The name of an object.
pub(crate) fn name_of(v: &Value) -> &str {
    str_at(v, &["metadata", "name"]).unwrap_or("")
}

/// The labels of an object.
pub(crate) fn labels_of(v: &Value) -> BTreeMap<String, String> {
    at(v, &["metadata", "labels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an object is being deleted (has a `deletionTimestamp`).
pub(crate) fn deleting(v: &Value) -> bool {
    at(v, &["metadata", "deletionTimestamp"]).is_some_and(|d| !d.is_null())
}

impl Store {
    /// A store that keeps its objects small at rest (see [`super::compact`]).
    pub(crate) fn compacting() -> Self {
        Store {
            compacting: true,
            objects: Objects::Sorted(Vec::new()),
            ..Store::default()
        }
    }

    /// Drops what was parsed since the last call (a compacting store; others keep
    /// everything parsed).
    pub(crate) fn compact(&mut self) {
        if !self.compacting {
            return;
        }
        for o in self.objects.values_mut() {
            o.compact();
        }
        for e in &mut self.events {
            e.object.compact();
        }
    }

    /// `f` of the object, without keeping it parsed.
    pub(crate) fn peek<R>(
        &self,
        kind: Kind,
        ns: &str,
        name: &str,
        f: impl FnOnce(&Value) -> R,
    ) -> Option<R> {
        self.objects
            .get(&(kind, ns.to_string(), name.to_string()))
            .map(|o| o.peek(f))
    }

    /// `f` of each object of `kind`, without keeping them parsed.
    pub(crate) fn peek_all(&self, kind: Kind, mut f: impl FnMut(&Value)) {
        self.objects
            .from(&(kind, String::new(), String::new()))
            .take_while(|((k, _, _), _)| *k == kind)
            .for_each(|(_, o)| o.peek(&mut f));
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.resource_version
    }

    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    pub(crate) fn get(&self, kind: Kind, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(&(kind, ns.to_string(), name.to_string()))
            .map(Stored::get)
    }

    pub(crate) fn contains(&self, kind: Kind, ns: &str, name: &str) -> bool {
        self.get(kind, ns, name).is_some()
    }

    /// Objects of `kind` (in `ns` if given), in key order (namespace, then name).
    pub(crate) fn list(&self, kind: Kind, ns: Option<&str>) -> impl Iterator<Item = &Value> {
        let ns = ns.map(str::to_string);
        self.objects
            .from(&(kind, String::new(), String::new()))
            .take_while(move |((k, _, _), _)| *k == kind)
            .filter(move |((_, n, _), _)| ns.as_ref().is_none_or(|want| want == n))
            .map(|(_, v)| v.get())
    }

    /// Clones of the objects of `kind` (in `ns` if given).
    pub(crate) fn list_owned(&self, kind: Kind, ns: Option<&str>) -> Vec<Value> {
        self.list(kind, ns).cloned().collect()
    }

    fn bump(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn record(&mut self, kind: Kind, ns: &str, change: &'static str, object: &Value) {
        let max = if self.compacting {
            GUEST_EVENTS_MAX
        } else {
            KUBE_EVENTS_MAX
        };
        if max == 0 {
            self.events_dropped_through = self.resource_version;
            return;
        }
        if self.events.len() >= max
            && let Some(dropped) = self.events.pop_front()
        {
            self.events_dropped_through = dropped.resource_version;
        }
        self.events.push_back(WatchEvent {
            resource_version: self.resource_version,
            kind,
            namespace: ns.to_string(),
            kind_of_change: change,
            object: Stored::new(object.clone()),
        });
    }

    /// Stores a new object: sets `kind`, `apiVersion`, `metadata.namespace` (for
    /// namespaced kinds), `uid`, `creationTimestamp`, `generation` and
    /// `resourceVersion`. Answers what was stored; `None` when the object exists or the
    /// store is full.
    pub(crate) fn create(
        &mut self,
        kind: Kind,
        ns: &str,
        mut obj: Value,
        uid: String,
        now: Timestamp,
    ) -> Option<Value> {
        let name = name_of(&obj).to_string();
        let ns = if kind.namespaced() { ns } else { "" };
        let key = (kind, ns.to_string(), name);
        if self.objects.get(&key).is_some() || self.objects.len() >= KUBE_OBJECTS_MAX {
            return None;
        }
        let rv = self.bump();
        if let Value::Object(m) = &mut obj {
            m.insert("kind".into(), json!(kind.resource().kind_name));
            m.insert("apiVersion".into(), json!(kind.api_version()));
        }
        let meta = obj_at(&mut obj, &["metadata"]);
        if kind.namespaced() {
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(rfc3339(now)));
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        self.record(kind, ns, "ADDED", &obj);
        self.objects.insert(key, Stored::new(obj.clone()));
        Some(obj)
    }

    /// Replaces an existing object with `obj`, keeping its identity (`uid`,
    /// `creationTimestamp`, name, namespace, kind) and bumping `generation` when `spec`
    /// changed. Does nothing (and answers the stored object) when nothing changed.
    /// `None` when there is no such object.
    pub(crate) fn update(&mut self, kind: Kind, ns: &str, mut obj: Value) -> Option<Value> {
        let name = name_of(&obj).to_string();
        let ns = if kind.namespaced() { ns } else { "" };
        let key = (kind, ns.to_string(), name);
        let old = self.objects.get(&key)?.get();
        for field in ["uid", "creationTimestamp", "resourceVersion", "generation"] {
            let kept = at(old, &["metadata", field])
                .cloned()
                .unwrap_or(Value::Null);
            obj_at(&mut obj, &["metadata"]).insert(field.into(), kept);
        }
        if let (Value::Object(m), Value::Object(o)) = (&mut obj, old) {
            for field in ["kind", "apiVersion"] {
                if let Some(v) = o.get(field) {
                    m.insert(field.into(), v.clone());
                }
            }
        }
        if kind.namespaced() {
            obj_at(&mut obj, &["metadata"]).insert("namespace".into(), json!(ns));
        }
        if &obj == old {
            return Some(obj);
        }
        let spec_changed = obj.get("spec") != old.get("spec");
        let generation = at(old, &["metadata", "generation"])
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let rv = self.bump();
        let meta = obj_at(&mut obj, &["metadata"]);
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        if spec_changed {
            meta.insert("generation".into(), json!(generation + 1));
        }
        self.record(kind, ns, "MODIFIED", &obj);
        self.objects.insert(key, Stored::new(obj.clone()));
        Some(obj)
    }

    /// Changes an existing object in place through `f` (then as [`Store::update`]).
    pub(crate) fn modify(
        &mut self,
        kind: Kind,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        let mut obj = self.get(kind, ns, name)?.clone();
        f(&mut obj);
        obj_at(&mut obj, &["metadata"]).insert("name".into(), json!(name));
        self.update(kind, ns, obj)
    }

    /// Removes an object for good; answers it as it was last.
    pub(crate) fn remove(&mut self, kind: Kind, ns: &str, name: &str) -> Option<Value> {
        let ns = if kind.namespaced() { ns } else { "" };
        let stored = self
            .objects
            .remove(&(kind, ns.to_string(), name.to_string()))?;
        let mut obj = stored.into_value();
        let rv = self.bump();
        obj_at(&mut obj, &["metadata"]).insert("resourceVersion".into(), json!(rv.to_string()));
        self.record(kind, ns, "DELETED", &obj);
        Some(obj)
    }

    /// The events after `resource_version`, oldest first; `Err` with the oldest
    /// version still answerable when the log no longer reaches back that far.
    pub(crate) fn events_after(&self, resource_version: u64) -> Result<Vec<&WatchEvent>, u64> {
        if resource_version < self.events_dropped_through {
            return Err(self.events_dropped_through);
        }
        Ok(self
            .events
            .iter()
            .filter(|e| e.resource_version > resource_version)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_version_grows_on_every_change_and_watch_events_follow() {
        let mut s = Store::default();
        let now = Timestamp::SIM_EPOCH;
        let pod = json!({"metadata": {"name": "a"}, "spec": {}});
        assert!(
            s.create(Kind::Pod, "default", pod.clone(), "u1".into(), now)
                .is_some()
        );
        assert!(
            s.create(Kind::Pod, "default", pod, "u2".into(), now)
                .is_none()
        );
        let rv1 = s.resource_version();
        let same = s.modify(Kind::Pod, "default", "a", |_| {});
        assert!(same.is_some());
        assert_eq!(
            s.resource_version(),
            rv1,
            "an unchanged object is not bumped"
        );
        s.modify(Kind::Pod, "default", "a", |p| {
            set_at(p, &["spec", "x"], json!(1))
        });
        assert_eq!(s.resource_version(), rv1 + 1);
        let gen_ = s
            .get(Kind::Pod, "default", "a")
            .and_then(|p| at(p, &["metadata", "generation"]))
            .and_then(Value::as_u64);
        assert_eq!(gen_, Some(2));
        assert!(s.remove(Kind::Pod, "default", "a").is_some());
        let kinds: Vec<_> = s
            .events_after(0)
            .unwrap_or_default()
            .iter()
            .map(|e| e.kind_of_change)
            .collect();
        assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(Timestamp::SIM_EPOCH), "2026-01-01T00:00:00Z");
    }
}
