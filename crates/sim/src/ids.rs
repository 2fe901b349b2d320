//! Identities the simulated cloud hands out: UUID-looking object ids, the address pool
//! of the one subnet every server and VIP lives on, and the creation-ordered tables the
//! objects are kept in.

use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use flightdeck_cloud::{Rng, SeededRng};
use flightdeck_spec::Cidr;

/// A fresh id in the 8-4-4-4-12 hex form OpenStack uses (a version-4 UUID), drawn from
/// `rng`. Not checked for uniqueness here; [`Table::insert`] callers draw again on the
/// (astronomically unlikely) collision.
pub(crate) fn uuid(rng: &mut SeededRng) -> String {
    let hi = rng.next_u64();
    let lo = rng.next_u64();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0x0fff,
        ((lo >> 48) & 0x3fff) | 0x8000,
        lo & 0xffff_ffff_ffff
    )
}

/// What a [`Table`] indexes its objects by besides their id: the cluster UID their
/// tags name, or the pool a member is in. Fixed when the object is made (OpenStack
/// objects' tags and a member's pool never change), so a list of one cluster's objects
/// costs what it answers, not the size of the cloud.
pub(crate) trait Grouped {
    fn group(&self) -> Option<&str>;
}

/// Objects of one kind, by id, iterated in creation order (the order every list
/// answers in). Lookups by id are logarithmic.
#[derive(Debug)]
pub(crate) struct Table<T> {
    by_seq: BTreeMap<u64, T>,
    seq_of: BTreeMap<String, u64>,
    by_group: BTreeMap<String, std::collections::BTreeSet<u64>>,
    /// Whether the table notes what changes, for [`Table::take_touched`].
    track: bool,
    touched: Touched,
}

/// What changed in a tracked [`Table`] since it was last asked: the ids inserted, handed
/// out for change or removed, or everything (its values were all handed out).
#[derive(Debug, Default)]
pub(crate) struct Touched {
    pub(crate) all: bool,
    pub(crate) ids: Vec<String>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            by_seq: BTreeMap::new(),
            seq_of: BTreeMap::new(),
            by_group: BTreeMap::new(),
            track: false,
            touched: Touched::default(),
        }
    }
}

impl<T> Table<T> {
    /// An empty table that notes what changes (see [`Table::take_touched`]).
    pub(crate) fn tracked() -> Self {
        Table {
            track: true,
            ..Table::default()
        }
    }

    /// What changed since the last call; empty for an untracked table.
    pub(crate) fn take_touched(&mut self) -> Touched {
        std::mem::take(&mut self.touched)
    }

    fn touch(&mut self, id: &str) {
        if self.track && !self.touched.all {
            self.touched.ids.push(id.to_string());
        }
    }
}

impl<T: Grouped> Table<T> {
    pub(crate) fn len(&self) -> usize {
        self.by_seq.len()
    }
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.seq_of.contains_key(id)
    }
    /// Adds `value` under `id`; `seq` must be unique and grow with creation time.
    pub(crate) fn insert(&mut self, seq: u64, id: String, value: T) {
        self.touch(&id);
        if let Some(g) = value.group() {
            self.by_group.entry(g.to_string()).or_default().insert(seq);
        }
        self.seq_of.insert(id, seq);
        self.by_seq.insert(seq, value);
    }
    pub(crate) fn get(&self, id: &str) -> Option<&T> {
        self.seq_of.get(id).and_then(|s| self.by_seq.get(s))
    }
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut T> {
        let seq = *self.seq_of.get(id)?;
        self.touch(id);
        self.by_seq.get_mut(&seq)
    }
    /// The object numbered `seq`.
    pub(crate) fn by_seq(&self, seq: u64) -> Option<&T> {
        self.by_seq.get(&seq)
    }
    /// The creation number of the object `id`.
    pub(crate) fn seq(&self, id: &str) -> Option<u64> {
        self.seq_of.get(id).copied()
    }
    /// The object numbered `seq`, for a change that is not noted as a touch (a derived
    /// status written by whoever reads the touches).
    pub(crate) fn untracked_mut(&mut self, seq: u64) -> Option<&mut T> {
        self.by_seq.get_mut(&seq)
    }
    pub(crate) fn remove(&mut self, id: &str) -> Option<T> {
        self.touch(id);
        let seq = self.seq_of.remove(id)?;
        let value = self.by_seq.remove(&seq)?;
        if let Some(g) = value.group()
            && let Some(seqs) = self.by_group.get_mut(g)
        {
            seqs.remove(&seq);
            if seqs.is_empty() {
                self.by_group.remove(g);
            }
        }
        Some(value)
    }
    /// The objects of `group`, in creation order.
    pub(crate) fn in_group<'a>(&'a self, group: &str) -> impl Iterator<Item = &'a T> + 'a {
        self.by_group
            .get(group)
            .into_iter()
            .flatten()
            .filter_map(|seq| self.by_seq.get(seq))
    }
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.by_seq.values()
    }
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        if self.track {
            self.touched = Touched {
                all: true,
                ids: Vec::new(),
            };
        }
        self.by_seq.values_mut()
    }
}

/// The addresses of the simulated subnet. Hands out never-used addresses first and then
/// the address freed longest ago, as Neutron's IPAM avoids handing a just-released
/// address straight to the next port; never the network address, the gateway (`.1`) or
/// the last address (IPv4 broadcast).
/// A subnet that does not parse has no addresses at all, so every allocation fails
/// visibly instead of silently using some other network.
#[derive(Debug)]
pub(crate) struct AddressPool {
    base: u128,
    v6: bool,
    /// Offsets `2..last` are host addresses.
    last: u128,
    next_fresh: u128,
    /// Released addresses, oldest release first.
    freed: VecDeque<u128>,
}

impl AddressPool {
    pub(crate) fn new(cidr: &str) -> Self {
        let empty = AddressPool {
            base: 0,
            v6: false,
            last: 0,
            next_fresh: 2,
            freed: VecDeque::new(),
        };
        let Ok(net) = cidr.parse::<Cidr>() else {
            return empty;
        };
        let (base, bits, v6) = match net.addr() {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32u32, false),
            IpAddr::V6(a) => (u128::from(a), 128u32, true),
        };
        let host_bits = bits - u32::from(net.prefix());
        // A /0 IPv6 pool would overflow u128; nobody needs more than 2^64 servers.
        let size = 1u128 << host_bits.min(64);
        AddressPool {
            base,
            v6,
            last: size.saturating_sub(1),
            ..empty
        }
    }

    /// A never-used address while there is one, else the one freed longest ago, or
    /// `None` when the subnet is exhausted.
    pub(crate) fn allocate(&mut self) -> Option<IpAddr> {
        let offset = if self.next_fresh < self.last {
            self.next_fresh += 1;
            self.next_fresh - 1
        } else {
            self.freed.pop_front()?
        };
        Some(self.address(offset))
    }

    /// Returns `ip` to the pool; addresses outside it are ignored.
    pub(crate) fn release(&mut self, ip: IpAddr) {
        let Some(offset) = self.offset(ip) else {
            return;
        };
        if (2..self.next_fresh).contains(&offset) && !self.freed.contains(&offset) {
            self.freed.push_back(offset);
        }
    }

    /// Whether a port holds `ip`: a server's or a VIP's that was taken and not released
    /// yet, or the gateway (`.1`, the router's own port on the subnet).
    pub(crate) fn holds(&self, ip: IpAddr) -> bool {
        match self.offset(ip) {
            Some(1) => self.last > 1,
            Some(o) => (2..self.next_fresh).contains(&o) && !self.freed.contains(&o),
            None => false,
        }
    }

    /// Every address a port holds, lowest first: the gateway, then those taken and not
    /// released.
    pub(crate) fn held(&self) -> impl Iterator<Item = IpAddr> + '_ {
        let gateway = (self.last > 1).then_some(1);
        gateway
            .into_iter()
            .chain((2..self.next_fresh).filter(|o| !self.freed.contains(o)))
            .map(|o| self.address(o))
    }

    fn offset(&self, ip: IpAddr) -> Option<u128> {
        let raw = match ip {
            IpAddr::V4(a) if !self.v6 => u128::from(u32::from(a)),
            IpAddr::V6(a) if self.v6 => u128::from(a),
            _ => return None,
        };
        raw.checked_sub(self.base).filter(|o| *o <= self.last)
    }

    /// Up to `n` host addresses nobody holds, highest first (without taking them).
    pub(crate) fn highest_free(&self, n: usize) -> Vec<IpAddr> {
        let held = |o: u128| o < self.next_fresh && !self.freed.contains(&o);
        let mut found = Vec::new();
        let mut offset = self.last;
        while found.len() < n && offset > 2 {
            offset -= 1;
            if !held(offset) {
                found.push(self.address(offset));
            }
        }
        found
    }

    fn address(&self, offset: u128) -> IpAddr {
        let raw = self.base + offset;
        if self.v6 {
            IpAddr::V6(Ipv6Addr::from(raw))
        } else {
            // The pool of an IPv4 subnet never leaves 32 bits.
            IpAddr::V4(Ipv4Addr::from(u32::try_from(raw).unwrap_or(u32::MAX)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Thing(&'static str);

    impl Grouped for Thing {
        fn group(&self) -> Option<&str> {
            Some(self.0)
        }
    }

    #[test]
    fn a_tracked_table_notes_every_change_and_an_untracked_one_none() {
        let mut t = Table::tracked();
        t.insert(1, "a".into(), Thing("g"));
        t.insert(2, "b".into(), Thing("g"));
        let _ = t.take_touched();
        assert!(t.get("a").is_some());
        assert!(t.take_touched().ids.is_empty(), "a read is no change");
        let _ = t.get_mut("b");
        let _ = t.remove("a");
        let _ = t.get_mut("missing");
        let touched = t.take_touched();
        assert_eq!(touched.ids, vec!["b".to_string(), "a".to_string()]);
        assert!(!touched.all);
        let seq = t.seq("b").expect("b is there");
        let _ = t.untracked_mut(seq);
        assert!(
            t.take_touched().ids.is_empty(),
            "a derived write is no change"
        );
        let _ = t.values_mut().count();
        assert!(t.take_touched().all);

        let mut quiet: Table<Thing> = Table::default();
        quiet.insert(1, "a".into(), Thing("g"));
        let _ = quiet.get_mut("a");
        let touched = quiet.take_touched();
        assert!(touched.ids.is_empty() && !touched.all);
    }

    #[test]
    fn ids_look_like_uuids_and_replay_from_the_seed() {
        let mut a = SeededRng::new(3);
        let mut b = SeededRng::new(3);
        let id = uuid(&mut a);
        assert_eq!(id, uuid(&mut b));
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, vec![8, 4, 4, 4, 12]);
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    }

    #[test]
    fn pool_hands_out_fresh_addresses_first_then_the_longest_freed() {
        let mut p = AddressPool::new("10.0.0.0/29");
        let got: Vec<IpAddr> = (0..5).filter_map(|_| p.allocate()).collect();
        let want: Vec<IpAddr> = (2..=6)
            .map(|i| IpAddr::V4(Ipv4Addr::new(10, 0, 0, i)))
            .collect();
        assert_eq!(got, want, ".0, .1 and broadcast .7 are never handed out");
        assert_eq!(p.allocate(), None, "a /29 has five host addresses here");
        p.release(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 4)));
        p.release(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(p.allocate(), Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 4))));
        assert_eq!(p.allocate(), Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3))));

        let mut p = AddressPool::new("10.0.0.0/24");
        let first = p.allocate();
        if let Some(ip) = first {
            p.release(ip);
        }
        assert_ne!(
            p.allocate(),
            first,
            "a just-freed address is not handed out again at once"
        );
    }

    #[test]
    fn highest_free_skips_held_addresses_and_takes_none() {
        let mut p = AddressPool::new("10.0.0.0/29");
        let ip = |i| IpAddr::V4(Ipv4Addr::new(10, 0, 0, i));
        assert_eq!(p.highest_free(2), vec![ip(6), ip(5)], "never the broadcast");
        let held: Vec<IpAddr> = (0..5).filter_map(|_| p.allocate()).collect();
        assert_eq!(held.len(), 5);
        assert!(p.highest_free(3).is_empty(), "all five held");
        p.release(ip(5));
        assert_eq!(p.highest_free(3), vec![ip(5)]);
        assert_eq!(p.allocate(), Some(ip(5)), "looking took nothing");
    }

    #[test]
    fn unparsable_subnet_has_no_addresses() {
        assert_eq!(AddressPool::new("banana").allocate(), None);
    }
}

/// OpenStack objects are grouped by the cluster UID their tags name.
macro_rules! grouped_by_owner {
    ($($t:ty => |$v:ident| $tags:expr;)*) => {$(
        impl Grouped for $t {
            fn group(&self) -> Option<&str> {
                let $v = self;
                flightdeck_cloud::ownership::uid_of($tags)
            }
        }
    )*};
}

grouped_by_owner! {
    crate::nova::ServerRec => |s| &s.server.tags;
    flightdeck_cloud::SecurityGroup => |g| &g.tags;
    flightdeck_cloud::Router => |r| &r.tags;
    crate::octavia::LbRec => |l| &l.lb.tags;
    flightdeck_cloud::Listener => |l| &l.tags;
    flightdeck_cloud::Pool => |p| &p.tags;
    flightdeck_cloud::HealthMonitor => |h| &h.tags;
}

/// Members are grouped by their pool (what their list asks for).
impl Grouped for crate::members::MemberRec {
    fn group(&self) -> Option<&str> {
        Some(&self.member.pool_id)
    }
}

/// Nodes are grouped by the cluster UID of their server.
impl Grouped for crate::kube::NodeRec {
    fn group(&self) -> Option<&str> {
        Some(&self.uid)
    }
}
