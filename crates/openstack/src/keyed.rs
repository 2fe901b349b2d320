//! One member of an answer read straight into its type: `{"servers": [...],
//! "servers_links": [...]}` gives the servers and the page links beside them, and every
//! other member is skipped, without the answer being read into a JSON tree first (which
//! cost a tenth of a run against the simulator on the wire).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// What an answer holds under `key`, and its page links.
#[derive(Debug)]
pub(crate) struct Keyed<T> {
    /// `None` when the answer has no member `key` (or is empty).
    pub(crate) value: Option<T>,
    /// `<key>_links`, as answered.
    pub(crate) links: Option<Value>,
    /// Glance's `next`, as answered.
    pub(crate) next: Option<Value>,
}

/// Reads `text`, an answer whose member `key` is a `T`. An empty answer has nothing.
pub(crate) fn parse_keyed<T: DeserializeOwned>(text: &str, key: &str) -> Result<Keyed<T>, String> {
    if text.trim().is_empty() {
        return Ok(Keyed {
            value: None,
            links: None,
            next: None,
        });
    }
    let links_key = format!("{key}_links");
    let seed = Seed::<T> {
        key,
        links_key: &links_key,
        item: PhantomData,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let keyed = seed.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(keyed)
}

struct Seed<'k, T> {
    key: &'k str,
    links_key: &'k str,
    item: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Seed<'_, T> {
    type Value = Keyed<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Keyed<T>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Seed<'_, T> {
    type Value = Keyed<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object with a member {:?}", self.key)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keyed<T>, A::Error> {
        let mut keyed = Keyed {
            value: None,
            links: None,
            next: None,
        };
        while let Some(k) = map.next_key::<String>()? {
            if k == self.key {
                keyed.value =
                    Some(map.next_value().map_err(|e| {
                        serde::de::Error::custom(format_args!("{}: {e}", self.key))
                    })?);
            } else if k == self.links_key {
                keyed.links = Some(map.next_value()?);
            } else if k == "next" {
                keyed.next = Some(map.next_value()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(keyed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_member_asked_for_is_read_and_the_rest_skipped() {
        let text = r#"{"servers_links": [{"rel": "next", "href": "x"}], "other": {"a": [1, 2]},
            "servers": [{"id": "a"}, {"id": "b"}]}"#;
        let keyed: Keyed<Vec<Value>> = parse_keyed(text, "servers").expect("parses");
        assert_eq!(keyed.value.map(|v| v.len()), Some(2));
        assert!(keyed.links.is_some());
        assert!(keyed.next.is_none());
        let missing: Keyed<Vec<Value>> = parse_keyed(r#"{"ports": []}"#, "servers").expect("ok");
        assert!(missing.value.is_none(), "no member: nothing, not an error");
        let empty: Keyed<Value> = parse_keyed("  ", "server").expect("ok");
        assert!(empty.value.is_none());
    }

    #[test]
    fn a_member_of_the_wrong_shape_or_malformed_json_is_an_error_naming_it() {
        let e = parse_keyed::<Vec<u32>>(r#"{"servers": {"id": 1}}"#, "servers").expect_err("shape");
        assert!(e.starts_with("servers: "), "{e}");
        assert!(parse_keyed::<Vec<u32>>(r#"{"servers": [1,"#, "servers").is_err());
        assert!(parse_keyed::<Vec<u32>>(r#"{"servers": []} trailing"#, "servers").is_err());
    }
}
