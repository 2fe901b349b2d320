//! A store's objects by key ([`Objects`]), kept as [`super::compact`] says.

use std::collections::BTreeMap;

use super::compact::Stored;

/// A store's objects by key: a B-tree, or (a compacting store: a few dozen objects) a
/// sorted vector, which takes a third of the room.
#[derive(Debug)]
pub(crate) enum Objects<K> {
    Tree(BTreeMap<K, Stored>),
    Sorted(Vec<(K, Stored)>),
}

impl<K> Default for Objects<K> {
    fn default() -> Self {
        Objects::Tree(BTreeMap::new())
    }
}

impl<K: Ord> Objects<K> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Objects::Tree(m) => m.len(),
            Objects::Sorted(v) => v.len(),
        }
    }

    pub(crate) fn get(&self, key: &K) -> Option<&Stored> {
        match self {
            Objects::Tree(m) => m.get(key),
            Objects::Sorted(v) => v
                .binary_search_by(|(k, _)| k.cmp(key))
                .ok()
                .and_then(|i| v.get(i))
                .map(|(_, o)| o),
        }
    }

    /// Stores `value` under `key`, in place of what was there.
    pub(crate) fn insert(&mut self, key: K, value: Stored) {
        match self {
            Objects::Tree(m) => {
                m.insert(key, value);
            }
            Objects::Sorted(v) => match v.binary_search_by(|(k, _)| k.cmp(&key)) {
                Ok(i) => {
                    if let Some(slot) = v.get_mut(i) {
                        slot.1 = value;
                    }
                }
                Err(i) => v.insert(i, (key, value)),
            },
        }
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<Stored> {
        match self {
            Objects::Tree(m) => m.remove(key),
            Objects::Sorted(v) => {
                let i = v.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
                Some(v.remove(i).1)
            }
        }
    }

    pub(crate) fn values_mut(&mut self) -> Box<dyn Iterator<Item = &mut Stored> + '_> {
        match self {
            Objects::Tree(m) => Box::new(m.values_mut()),
            Objects::Sorted(v) => Box::new(v.iter_mut().map(|(_, o)| o)),
        }
    }

    /// The entries from `from` on, in key order.
    pub(crate) fn from<'a>(&'a self, from: &K) -> Box<dyn Iterator<Item = (&'a K, &'a Stored)> + 'a>
    where
        K: Clone,
    {
        match self {
            Objects::Tree(m) => Box::new(m.range(from.clone()..)),
            Objects::Sorted(v) => {
                let i = v.partition_point(|(k, _)| k < from);
                Box::new(v.iter().skip(i).map(|(k, o)| (k, o)))
            }
        }
    }
}
