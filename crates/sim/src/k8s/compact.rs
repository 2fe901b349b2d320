//! Objects kept small at rest. A parsed JSON object costs about ten times its text (every
//! map is a B-tree node of its own), and a fleet of a thousand workload clusters holds
//! tens of thousands of pods: the stores of the guests of OpenStack servers and
//! OpenNebula VMs keep each object encoded ([`encode`]) between controller passes and
//! parse it again when it is next read ([`Stored`]).
//!
//! The encoding is exact (decoding gives back the same `Value`): a tag byte per value,
//! the strings Kubernetes objects repeat from a fixed dictionary, and a string seen
//! before in the same object as a reference to it.

use std::cell::OnceCell;

use serde_json::{Map, Number, Value};

/// Strings Kubernetes objects are made of, each encoded as one byte.
const DICTIONARY: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "generation",
    "labels",
    "annotations",
    "ownerReferences",
    "controller",
    "blockOwnerDeletion",
    "spec",
    "status",
    "nodeName",
    "containers",
    "image",
    "terminationGracePeriodSeconds",
    "schedulerName",
    "default-scheduler",
    "restartPolicy",
    "Always",
    "priorityClassName",
    "system-node-critical",
    "phase",
    "Pending",
    "Running",
    "conditions",
    "type",
    "reason",
    "lastTransitionTime",
    "True",
    "False",
    "Ready",
    "PodScheduled",
    "Initialized",
    "ContainersReady",
    "containerStatuses",
    "ready",
    "started",
    "restartCount",
    "state",
    "running",
    "startedAt",
    "startTime",
    "qosClass",
    "BestEffort",
    "v1",
    "Pod",
    "Node",
    "apps/v1",
    "ReplicaSet",
    "DaemonSet",
    "kube-system",
    "default",
    "kube-proxy",
    "k8s-app",
    "registry.k8s.io/kube-proxy:v1.24.17",
    "kube-apiserver",
    "registry.k8s.io/kube-apiserver:v1.24.17",
    "component",
    "tier",
    "control-plane",
    "kubernetes.io/config.mirror",
    "kubernetes.io/config.source",
    "file",
    "app",
    "web",
    "pod-template-hash",
    "volumes",
    "emptyDir",
    "volumeMounts",
    "mountPath",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "node-role.kubernetes.io/control-plane",
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "linux",
    "kubernetes.io/arch",
    "amd64",
    "unschedulable",
    "KubeletReady",
    "KubeletNotReady",
    "providerID",
    "nginx:1.25",
    "policy/v1",
    "PodDisruptionBudget",
    "selector",
    "matchLabels",
    "minAvailable",
    "maxUnavailable",
    "replicas",
    "template",
    "readyReplicas",
    "availableReplicas",
    "observedGeneration",
    "disruptionsAllowed",
    "currentHealthy",
    "desiredHealthy",
    "expectedPods",
    "disruptedPods",
    "DisruptionAllowed",
    "SufficientPods",
    "InsufficientPods",
    "Namespace",
    "finalizers",
    "kubernetes",
    "Active",
    "Service",
    "kubeletVersion",
    "kubeProxyVersion",
    "osImage",
    "Debian GNU/Linux 12 (bookworm)",
    "containerRuntimeVersion",
    "containerd://1.6.20",
    "kernelVersion",
    "6.1.0-18-amd64",
    "operatingSystem",
    "architecture",
    "addresses",
    "Hostname",
    "InternalIP",
    "address",
    "capacity",
    "allocatable",
    "cpu",
    "memory",
    "pods",
    "2",
    "4Gi",
    "110",
    "nodeInfo",
    "v1.24.17",
    "cache",
    "redis:7.2",
    "/data",
    "",
    "Succeeded",
    "Failed",
    "kubernetes.io/metadata.name",
    "kube-public",
    "kube-node-lease",
];

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const UINT: u8 = 3;
const NEG: u8 = 4;
const FLOAT: u8 = 5;
const STRING: u8 = 6;
const SEEN: u8 = 7;
const ARRAY: u8 = 8;
const OBJECT: u8 = 9;
/// A UUID as Kubernetes writes one (lowercase, hyphenated): its 16 bytes.
const UUID: u8 = 10;
/// A time as `metav1.Time` writes one (`2026-01-01T00:00:00Z`): its 14 digits, packed.
const TIME: u8 = 11;
const WORD: u8 = 12;

/// Where a canonical UUID has its hyphens.
const UUID_DASHES: [usize; 4] = [8, 13, 18, 23];

/// The 16 bytes of `s` if it is a UUID written exactly as [`uuid_text`] writes it.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || UUID_DASHES.iter().any(|i| b.get(*i) != Some(&b'-')) {
        return None;
    }
    let hex: Vec<u8> = b.iter().copied().filter(|c| *c != b'-').collect();
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0_u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let (&[hi, lo], Some(slot)) = (pair, out.get_mut(i)) else {
            return None;
        };
        *slot = (nibble(hi)? << 4) | nibble(lo)?;
    }
    Some(out)
}

fn uuid_text(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Where a time's digits are: `YYYY-MM-DDTHH:MM:SSZ`.
const TIME_SHAPE: &[u8; 20] = b"0000-00-00T00:00:00Z";

/// The 14 digits of `s`, two to a byte, if it is a time written as [`time_text`] does.
fn time_bytes(s: &str) -> Option<[u8; 7]> {
    let b = s.as_bytes();
    if b.len() != TIME_SHAPE.len() {
        return None;
    }
    let mut digits = Vec::with_capacity(14);
    for (c, shape) in b.iter().zip(TIME_SHAPE) {
        match (shape, c) {
            (b'0', b'0'..=b'9') => digits.push(c - b'0'),
            (_, _) if c == shape && *shape != b'0' => {}
            _ => return None,
        }
    }
    let mut out = [0_u8; 7];
    for (slot, pair) in out.iter_mut().zip(digits.chunks(2)) {
        if let &[hi, lo] = pair {
            *slot = (hi << 4) | lo;
        }
    }
    Some(out)
}

fn time_text(bytes: &[u8]) -> String {
    let mut digits = bytes.iter().flat_map(|b| [b >> 4, b & 0x0f]);
    TIME_SHAPE
        .iter()
        .map(|shape| match shape {
            b'0' => char::from(b'0' + digits.next().unwrap_or(0)),
            c => char::from(*c),
        })
        .collect()
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

struct Encoder<'a> {
    out: Vec<u8>,
    seen: Vec<&'a str>,
}

impl<'a> Encoder<'a> {
    fn string(&mut self, s: &'a str) {
        if let Some(i) = DICTIONARY.iter().position(|w| *w == s)
            && i + usize::from(WORD) <= usize::from(u8::MAX)
        {
            self.out.push(WORD + i as u8);
        } else if let Some(u) = uuid_bytes(s) {
            self.out.push(UUID);
            self.out.extend_from_slice(&u);
        } else if let Some(t) = time_bytes(s) {
            self.out.push(TIME);
            self.out.extend_from_slice(&t);
        } else if let Some(i) = self.seen.iter().position(|w| *w == s) {
            self.out.push(SEEN);
            put_varint(&mut self.out, i as u64);
        } else {
            self.out.push(STRING);
            put_varint(&mut self.out, s.len() as u64);
            self.out.extend_from_slice(s.as_bytes());
            self.seen.push(s);
        }
    }

    fn value(&mut self, v: &'a Value) {
        match v {
            Value::Null => self.out.push(NULL),
            Value::Bool(false) => self.out.push(FALSE),
            Value::Bool(true) => self.out.push(TRUE),
            Value::Number(n) => self.number(n),
            Value::String(s) => self.string(s),
            Value::Array(items) => {
                self.out.push(ARRAY);
                put_varint(&mut self.out, items.len() as u64);
                for item in items {
                    self.value(item);
                }
            }
            Value::Object(m) => {
                self.out.push(OBJECT);
                put_varint(&mut self.out, m.len() as u64);
                for (k, item) in m {
                    self.string(k);
                    self.value(item);
                }
            }
        }
    }

    fn number(&mut self, n: &Number) {
        if let Some(u) = n.as_u64() {
            self.out.push(UINT);
            put_varint(&mut self.out, u);
        } else if let Some(i) = n.as_i64() {
            self.out.push(NEG);
            put_varint(&mut self.out, (-(i + 1)) as u64);
        } else {
            self.out.push(FLOAT);
            let f = n.as_f64().unwrap_or(0.0);
            self.out.extend_from_slice(&f.to_le_bytes());
        }
    }
}

/// `v` encoded.
pub(crate) fn encode(v: &Value) -> Box<[u8]> {
    let mut e = Encoder {
        out: Vec::with_capacity(256),
        seen: Vec::new(),
    };
    e.value(v);
    e.out.into_boxed_slice()
}

struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
    seen: Vec<String>,
}

impl Decoder<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut n = 0_u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(n);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let raw = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(raw)
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }

    fn string_after(&mut self, tag: u8) -> Option<String> {
        match tag {
            STRING => {
                let len = self.len()?;
                let raw = self.bytes.get(self.at..self.at.checked_add(len)?)?;
                self.at += len;
                let s = std::str::from_utf8(raw).ok()?.to_string();
                self.seen.push(s.clone());
                Some(s)
            }
            SEEN => {
                let i = self.len()?;
                self.seen.get(i).cloned()
            }
            UUID => Some(uuid_text(self.take(16)?)),
            TIME => Some(time_text(self.take(7)?)),
            t if t >= WORD => DICTIONARY
                .get(usize::from(t - WORD))
                .map(|s| (*s).to_string()),
            _ => None,
        }
    }

    fn value(&mut self) -> Option<Value> {
        let tag = self.byte()?;
        Some(match tag {
            NULL => Value::Null,
            FALSE => Value::Bool(false),
            TRUE => Value::Bool(true),
            UINT => Value::from(self.varint()?),
            NEG => Value::from(-i64::try_from(self.varint()?).ok()? - 1),
            FLOAT => {
                let raw = self.bytes.get(self.at..self.at + 8)?;
                self.at += 8;
                let f = f64::from_le_bytes(raw.try_into().ok()?);
                Value::Number(Number::from_f64(f)?)
            }
            ARRAY => {
                let len = self.len()?;
                let mut items = Vec::with_capacity(len.min(1024));
                for _ in 0..len {
                    items.push(self.value()?);
                }
                Value::Array(items)
            }
            OBJECT => {
                let len = self.len()?;
                let mut m = Map::new();
                for _ in 0..len {
                    let k = self.byte().and_then(|t| self.string_after(t))?;
                    m.insert(k, self.value()?);
                }
                Value::Object(m)
            }
            t => Value::String(self.string_after(t)?),
        })
    }
}

/// The value [`encode`] encoded (`Null` for bytes it did not make).
pub(crate) fn decode(bytes: &[u8]) -> Value {
    let mut d = Decoder {
        bytes,
        at: 0,
        seen: Vec::new(),
    };
    d.value().unwrap_or(Value::Null)
}

/// One stored object: parsed, encoded, or both (parsed since it was last read).
#[derive(Debug, Default)]
pub(crate) struct Stored {
    bytes: Option<Box<[u8]>>,
    /// Boxed: a fleet holds tens of thousands of these, most of them not parsed.
    parsed: OnceCell<Box<Value>>,
}

impl Stored {
    pub(crate) fn new(v: Value) -> Self {
        Stored {
            bytes: None,
            parsed: OnceCell::from(Box::new(v)),
        }
    }

    /// The object, parsed at its first read since it was last [`Stored::compact`]ed.
    pub(crate) fn get(&self) -> &Value {
        self.parsed
            .get_or_init(|| Box::new(self.bytes.as_deref().map_or(Value::Null, decode)))
    }

    /// The object, parsed.
    pub(crate) fn into_value(self) -> Value {
        match (self.parsed.into_inner(), self.bytes) {
            (Some(v), _) => *v,
            (None, Some(b)) => decode(&b),
            (None, None) => Value::Null,
        }
    }

    /// `f` of the object, without keeping it parsed.
    pub(crate) fn peek<R>(&self, f: impl FnOnce(&Value) -> R) -> R {
        match (self.parsed.get(), &self.bytes) {
            (Some(v), _) => f(v),
            (None, Some(b)) => f(&decode(b)),
            (None, None) => f(&Value::Null),
        }
    }

    /// Keeps the object encoded only.
    pub(crate) fn compact(&mut self) {
        if let Some(v) = self.parsed.take()
            && self.bytes.is_none()
        {
            self.bytes = Some(encode(&v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_decodes_to_what_was_encoded_and_takes_less_room() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "kube-proxy-c0-w-1", "namespace": "kube-system",
                "uid": "0b7c6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", "generation": 1,
                "labels": {"k8s-app": "kube-proxy", "odd key": "ünïcode"}},
            "spec": {"nodeName": "c0-w-1", "terminationGracePeriodSeconds": 30,
                "n": -5, "f": 1.5, "big": u64::MAX, "min": i64::MIN, "none": null,
                "flags": [true, false, []], "again": "c0-w-1"},
            "status": {"startTime": "2026-01-01T00:00:00Z", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        });
        let bytes = encode(&pod);
        assert_eq!(decode(&bytes), pod);
        assert!(bytes.len() * 2 < pod.to_string().len(), "{}", bytes.len());
        assert_eq!(decode(&bytes[..bytes.len() - 1]), Value::Null, "cut short");
    }

    #[test]
    fn uuids_and_times_take_their_bytes_and_only_exact_ones_are_packed() {
        for s in [
            "0b7c6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
            "2026-01-01T00:00:00Z",
            "1999-12-31T23:59:59Z",
        ] {
            let v = json!(s);
            let bytes = encode(&v);
            assert!(bytes.len() <= 17, "{s}: {}", bytes.len());
            assert_eq!(decode(&bytes), v);
        }
        for s in [
            "0B7C6F0E-1C2D-4E5F-8A9B-0C1D2E3F4A5B",
            "0b7c6f0e-1c2d-4e5f-8a9b-0c1d2e3f4a5",
            "0b7c6f0e+1c2d-4e5f-8a9b-0c1d2e3f4a5b",
            "2026-01-01T00:00:00+00:00",
            "2026-01-01 00:00:00Z",
            "20a6-01-01T00:00:00Z",
        ] {
            let v = json!(s);
            let bytes = encode(&v);
            assert!(bytes.len() > 17, "{s} is not packed");
            assert_eq!(decode(&bytes), v);
        }
    }

    #[test]
    fn every_dictionary_word_has_a_tag_of_its_own() {
        assert!(DICTIONARY.len() + usize::from(WORD) <= 256);
        for (i, w) in DICTIONARY.iter().enumerate() {
            assert_eq!(DICTIONARY.iter().position(|x| x == w), Some(i), "{w} twice");
        }
    }

    #[test]
    fn a_compacted_object_reads_the_same() {
        let mut s = Stored::new(json!({"metadata": {"name": "a"}}));
        s.compact();
        assert!(s.parsed.get().is_none());
        assert_eq!(s.peek(|v| v["metadata"]["name"].clone()), "a");
        assert!(s.parsed.get().is_none(), "a peek keeps nothing parsed");
        assert_eq!(s.get()["metadata"]["name"], "a");
    }
}
