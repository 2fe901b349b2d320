//! A workload cluster's stacked etcd as etcd itself keeps it (issue 42): its members,
//! its leader and term, quorum counted as etcd counts it, and its alarms.
//!
//! Its JSON gateway (`gateway.rs`) answers as a real etcd does. Not wired into the
//! simulated clusters yet: kubeadm's init and control-plane joins do
//! not make members here, and the workload API does not yet answer 503 without quorum.
//! That comes with flightdeck's member removal (issue 42's items 1 to 3), since a
//! simulator that counted dead members today would break every control-plane rollout
//! flightdeck makes. What is here is the model those steps stand on, checked against
//! etcd's own rules (`server/etcdserver/server.go` `mayAddMember`, `mayRemoveMember`;
//! `server/etcdserver/api/membership/cluster.go` `IsReadyToAddVotingMember`,
//! `IsReadyToRemoveVotingMember`), with etcd's own error texts.
//!
//! Whether a member is reachable is not kept here: it is its machine's (its server runs
//! and no fault holds it), so every question that depends on it takes `alive`.

use std::collections::{BTreeMap, BTreeSet};

mod gateway;
pub use gateway::{Answering, GatewayAnswer, answer};

use flightdeck_cloud::Timestamp;
use serde::Serialize;

/// etcd's answer when a strict reconfiguration check finds too few started members.
pub const NOT_ENOUGH_STARTED: &str =
    "etcdserver: re-configuration failed due to not enough started members";
/// etcd's answer when a change would leave too few connected members.
pub const UNHEALTHY: &str = "etcdserver: unhealthy cluster";
pub const MEMBER_NOT_FOUND: &str = "etcdserver: member not found";
pub const BAD_TRANSFEREE: &str = "etcdserver: bad leader transferee";
/// A request that needs the raft log while no majority answers.
pub const NO_LEADER: &str = "etcdserver: no leader";
/// A leadership transfer asked of a member that does not lead.
pub const NOT_LEADER: &str = "etcdserver: not leader";
/// A write while a `NOSPACE` alarm is raised.
pub const NOSPACE: &str = "etcdserver: mvcc: database space exceeded";

/// One member, as `MemberList` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EtcdMember {
    pub id: u64,
    /// Empty until the member has started and published itself (etcd's
    /// `IsStarted`): a member added by a join that died before its etcd ran stays
    /// nameless.
    pub name: String,
    pub peer_url: String,
    pub client_url: String,
    pub added_at: Timestamp,
}

impl EtcdMember {
    pub fn started(&self) -> bool {
        !self.name.is_empty()
    }
}

/// etcd's alarm kinds (`AlarmType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Alarm {
    Nospace,
    Corrupt,
}

/// Why a change was refused: etcd's own text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdRefusal(pub &'static str);

impl EtcdRefusal {
    /// The gRPC code etcd answers it with (`rpctypes`), and the HTTP status its JSON
    /// gateway maps that code to (both as a real etcd 3.4 answered them).
    pub fn codes(&self) -> (u32, u16) {
        match self.0 {
            MEMBER_NOT_FOUND => (5, 404),
            BAD_TRANSFEREE | NOT_LEADER => (9, 412),
            UNHEALTHY | NO_LEADER => (14, 503),
            NOSPACE => (8, 429),
            _ => (2, 500),
        }
    }
}

impl std::fmt::Display for EtcdRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// One workload cluster's etcd.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GuestEtcd {
    members: BTreeMap<u64, EtcdMember>,
    leader: Option<u64>,
    /// Raft's term: a new leader, a new term.
    term: u64,
    /// Entries committed to the raft log (membership changes, leadership moves,
    /// alarms): etcd's `raftIndex`.
    index: u64,
    alarms: BTreeSet<(u64, Alarm)>,
}

impl GuestEtcd {
    /// The etcd `kubeadm init` starts: one member, started, its own leader, at the term
    /// and index a fresh single-member etcd shows (its first election, its bootstrap
    /// entries).
    pub fn init(member: EtcdMember) -> GuestEtcd {
        let id = member.id;
        GuestEtcd {
            members: BTreeMap::from([(id, member)]),
            leader: Some(id),
            term: 2,
            index: 4,
            alarms: BTreeSet::new(),
        }
    }

    pub fn members(&self) -> impl Iterator<Item = &EtcdMember> {
        self.members.values()
    }

    pub fn leader(&self) -> Option<u64> {
        self.leader
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    pub fn index(&self) -> u64 {
        self.index
    }

    pub fn alarms(&self) -> impl Iterator<Item = &(u64, Alarm)> {
        self.alarms.iter()
    }

    /// Whether a majority of the members (the dead ones counted: a member stays in the
    /// list until someone removes it) answers.
    pub fn has_quorum(&self, alive: impl Fn(u64) -> bool) -> bool {
        let up = self.members.keys().filter(|id| alive(**id)).count();
        up > self.members.len() / 2
    }

    /// Whether a change can be committed: a leader and a majority to agree.
    fn committable(&self, alive: impl Fn(u64) -> bool) -> Result<(), EtcdRefusal> {
        if self.leader.is_none() || !self.has_quorum(alive) {
            return Err(EtcdRefusal(NO_LEADER));
        }
        Ok(())
    }

    /// Raft's election, as far as the outcome goes: a leader that is gone, or any
    /// leader without a majority, is lost; with a majority, the live member with the
    /// lowest id leads in a new term (raft picks whichever times out first; the
    /// simulator picks the same one on every replay).
    pub fn elect(&mut self, alive: impl Fn(u64) -> bool + Copy) {
        if !self.has_quorum(alive) {
            self.leader = None;
            return;
        }
        if self
            .leader
            .is_some_and(|l| alive(l) && self.members.contains_key(&l))
        {
            return;
        }
        self.leader = self
            .members
            .values()
            .find(|m| m.started() && alive(m.id))
            .map(|m| m.id);
        self.term += 1;
    }

    /// `MemberAdd` of a voting member, with etcd's strict reconfiguration check: enough
    /// started members for the larger cluster's quorum, and every member connected.
    pub fn add(
        &mut self,
        member: EtcdMember,
        alive: impl Fn(u64) -> bool + Copy,
    ) -> Result<(), EtcdRefusal> {
        self.committable(alive)?;
        let started = self.members.values().filter(|m| m.started()).count();
        let size = self.members.len() + 1;
        let restoring_a_single_member = started == 1 && size == 2;
        if !restoring_a_single_member && started < size / 2 + 1 {
            return Err(EtcdRefusal(NOT_ENOUGH_STARTED));
        }
        if !self.members.keys().all(|id| alive(*id)) {
            return Err(EtcdRefusal(UNHEALTHY));
        }
        self.members.insert(member.id, member);
        self.index += 1;
        Ok(())
    }

    /// The member `id` has started and published its name (its etcd ran).
    pub fn publish(&mut self, id: u64, name: &str) {
        if let Some(m) = self.members.get_mut(&id) {
            m.name = name.to_string();
        }
    }

    /// `MemberRemove` with etcd's strict reconfiguration check: the members left must
    /// hold enough started ones for their quorum, and removing a live member must leave
    /// a connected majority. A removed leader steps down; the rest elect another.
    pub fn remove(
        &mut self,
        id: u64,
        alive: impl Fn(u64) -> bool + Copy,
    ) -> Result<(), EtcdRefusal> {
        self.committable(alive)?;
        if !self.members.contains_key(&id) {
            return Err(EtcdRefusal(MEMBER_NOT_FOUND));
        }
        let rest = self.members.values().filter(|m| m.id != id);
        let (size, started) = rest.fold((0, 0), |(n, s), m| (n + 1, s + usize::from(m.started())));
        if started < size / 2 + 1 {
            return Err(EtcdRefusal(NOT_ENOUGH_STARTED));
        }
        if alive(id) {
            let connected = self.members.keys().filter(|m| alive(**m)).count();
            if connected - 1 < 1 + (self.members.len() - 1) / 2 {
                return Err(EtcdRefusal(UNHEALTHY));
            }
        }
        self.members.remove(&id);
        self.index += 1;
        self.alarms.retain(|(m, _)| *m != id);
        if self.leader == Some(id) {
            self.leader = None;
            self.elect(alive);
        }
        Ok(())
    }

    /// `MoveLeader` to `to`: a started, live member; the term moves on.
    pub fn move_leader(
        &mut self,
        to: u64,
        alive: impl Fn(u64) -> bool + Copy,
    ) -> Result<(), EtcdRefusal> {
        self.committable(alive)?;
        match self.members.get(&to) {
            Some(m) if m.started() && alive(to) => {}
            _ => return Err(EtcdRefusal(BAD_TRANSFEREE)),
        }
        if self.leader != Some(to) {
            self.leader = Some(to);
            self.term += 1;
            self.index += 1;
        }
        Ok(())
    }

    /// A member raises an alarm (its backend is full: `NOSPACE`).
    pub fn raise(&mut self, member: u64, alarm: Alarm) {
        if self.members.contains_key(&member) && self.alarms.insert((member, alarm)) {
            self.index += 1;
        }
    }

    /// `Alarm` with `DEACTIVATE`: the alarm is gone from that member.
    pub fn disarm(&mut self, member: u64, alarm: Alarm) {
        if self.alarms.remove(&(member, alarm)) {
            self.index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64) -> EtcdMember {
        EtcdMember {
            id,
            name: format!("cp-{id}"),
            peer_url: format!("https://10.0.0.{id}:2380"),
            client_url: format!("https://10.0.0.{id}:2379"),
            added_at: Timestamp(0),
        }
    }

    fn three() -> GuestEtcd {
        let mut e = GuestEtcd::init(member(1));
        e.add(member(2), |_| true).expect("second");
        e.add(member(3), |_| true).expect("third");
        e
    }

    #[test]
    fn a_dead_member_left_in_the_list_counts_against_quorum() {
        let mut e = three();
        let gone = |id: u64| id != 1;
        assert!(e.has_quorum(gone), "2 of 3");
        // A rollout that deletes machines without removing members: 3 new members
        // joined, 3 dead ones listed.
        assert_eq!(e.add(member(4), gone), Err(EtcdRefusal(UNHEALTHY)));
        let e2 = {
            let mut e = three();
            for id in 4..=6 {
                e.members.insert(id, member(id));
            }
            e
        };
        assert!(!e2.has_quorum(|id| id > 3), "3 of 6 is no majority");
        e.remove(1, gone).expect("a dead member is removed");
        assert!(e.has_quorum(gone));
        assert_eq!(e.leader(), Some(2), "the removed leader's place is taken");
    }

    #[test]
    fn a_removal_that_would_break_quorum_is_refused_with_etcds_words() {
        let mut e = three();
        let two_down = |id: u64| id == 1;
        assert_eq!(e.remove(1, two_down), Err(EtcdRefusal(NO_LEADER)));
        let one_down = |id: u64| id != 3;
        assert_eq!(
            e.remove(1, one_down),
            Err(EtcdRefusal(UNHEALTHY)),
            "removing a live member with another one down leaves 1 of 2"
        );
        e.remove(3, one_down).expect("the down member goes");
        assert_eq!(e.remove(9, |_| true), Err(EtcdRefusal(MEMBER_NOT_FOUND)));
    }

    #[test]
    fn a_join_that_never_started_its_etcd_holds_the_next_change() {
        let mut e = GuestEtcd::init(member(1));
        let mut half = member(2);
        half.name.clear();
        e.add(half, |_| true)
            .expect("a one-member cluster takes a second member");
        let only_one = |id: u64| id == 1;
        assert!(!e.has_quorum(only_one), "1 of 2 answers");
        assert_eq!(
            e.add(member(3), |_| true),
            Err(EtcdRefusal(NOT_ENOUGH_STARTED))
        );
    }

    #[test]
    fn leadership_moves_only_to_a_started_live_member() {
        let mut e = three();
        let term = e.term();
        assert_eq!(
            e.move_leader(3, |id| id != 3),
            Err(EtcdRefusal(BAD_TRANSFEREE))
        );
        assert_eq!(e.move_leader(7, |_| true), Err(EtcdRefusal(BAD_TRANSFEREE)));
        e.move_leader(3, |_| true).expect("moved");
        assert_eq!((e.leader(), e.term()), (Some(3), term + 1));
    }

    #[test]
    fn a_majority_elects_and_a_minority_has_no_leader() {
        let mut e = three();
        e.elect(|id| id == 3);
        assert_eq!(e.leader(), None, "1 of 3");
        e.elect(|id| id != 1);
        assert_eq!(e.leader(), Some(2));
    }

    #[test]
    fn alarms_belong_to_members() {
        let mut e = three();
        e.raise(2, Alarm::Nospace);
        e.raise(9, Alarm::Nospace);
        assert_eq!(e.alarms().collect::<Vec<_>>(), vec![&(2, Alarm::Nospace)]);
        e.disarm(2, Alarm::Nospace);
        assert_eq!(e.alarms().count(), 0);
    }
}
