//! The first pass over a spec file reads each document's `kind` and skips everything
//! else, whatever it holds: a value no typed field could take (an integer past 64 bits,
//! say) is left for the second, typed pass, which reports it with its field path.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A document as the first pass reads it.
#[derive(Deserialize)]
pub(crate) struct Probe {
    #[serde(default)]
    pub kind: Option<KindValue>,
}

/// The `kind` field: text, or what other kind of value it is.
pub(crate) enum KindValue {
    Text(String),
    Other,
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = KindValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a kind")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<KindValue, E> {
        Ok(KindValue::Text(v.to_string()))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<KindValue, E> {
        Ok(KindValue::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KindValue, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(KindValue::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KindValue, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(KindValue::Other)
    }
}

impl<'de> Deserialize<'de> for KindValue {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}
