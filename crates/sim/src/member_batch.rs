//! Octavia's batch member update, `PUT /v2/lbaas/pools/{pool_id}/members` (API 2.1;
//! `additive_only` since 2.11): a pool's members set in one call and one change of the
//! load balancer. Each requested member whose address and port a member of the pool
//! already has updates that member (its name and tags); every other one is created.
//! With `additive_only` nothing else is touched; without it, every member the request
//! leaves out is deleted. Octavia answers 202 with no body: the members' IDs and states
//! are read from the next list.

use flightdeck_cloud::{Clock, ErrorClass, Member, MemberCreate, ProvisioningStatus, Timestamp};

use crate::members::{insert_member, mark_deleted};
use crate::octavia::{CHILDREN_MAX, Child, OCTAVIA, begin_change, check_mutable, error, pool_lb};
use crate::{MutationKind, Result, SimCloud, State};

pub(crate) const OP: &str = "PUT /v2/lbaas/pools/{pool_id}/members";

/// What a batch did to one member.
pub(crate) struct Batched {
    pub member: Member,
    pub kind: MutationKind,
}

/// Sets pool `pool_id`'s members to `wanted` (see the module's doc).
pub(crate) fn batch_members(
    st: &mut State,
    now: Timestamp,
    pool_id: &str,
    wanted: &[MemberCreate],
    additive_only: bool,
) -> Result<Vec<Batched>> {
    let lb_id = pool_lb(st, OP, pool_id)?;
    check_mutable(st, OP, &lb_id)?;
    for (i, w) in wanted.iter().enumerate() {
        if w.pool_id != pool_id {
            let message = format!("member {} is of pool {}, not {pool_id}", w.name, w.pool_id);
            return Err(error(ErrorClass::Permanent, OP, 400, message));
        }
        if wanted[..i]
            .iter()
            .any(|o| o.address == w.address && o.protocol_port == w.protocol_port)
        {
            let message = format!(
                "Duplicate member address/port {}:{} in the request",
                w.address, w.protocol_port
            );
            return Err(error(ErrorClass::Permanent, OP, 400, message));
        }
    }
    let matched = |st: &State, w: &MemberCreate| {
        st.members
            .in_group(pool_id)
            .find(|m| m.member.address == w.address && m.member.protocol_port == w.protocol_port)
            .map(|m| (m.member.id.clone(), m.member.provisioning_status))
    };
    if let Some((id, status)) = wanted
        .iter()
        .filter_map(|w| matched(st, w))
        .find(|(_, s)| *s != ProvisioningStatus::Active && *s != ProvisioningStatus::Error)
    {
        let message = format!("Member {id} is {} and cannot be updated", status.as_str());
        return Err(error(ErrorClass::Conflict, OP, 409, message));
    }
    let new = wanted.iter().filter(|w| matched(st, w).is_none()).count();
    if st.members.len() + new > CHILDREN_MAX {
        return Err(crate::octavia::quota(OP, "Member"));
    }
    let left_out: Vec<String> = if additive_only {
        Vec::new()
    } else {
        st.members
            .in_group(pool_id)
            .filter(|m| {
                m.member.provisioning_status != ProvisioningStatus::PendingDelete
                    && !wanted.iter().any(|w| {
                        w.address == m.member.address && w.protocol_port == m.member.protocol_port
                    })
            })
            .map(|m| m.member.id.clone())
            .collect()
    };
    let mut done = Vec::new();
    let mut changed = Vec::new();
    for w in wanted {
        let (member, kind) = match matched(st, w) {
            Some((id, _)) => {
                let Some(m) = st.members.get_mut(&id) else {
                    continue;
                };
                m.member.name = w.name.clone();
                m.member.tags = w.tags.clone();
                m.member.provisioning_status = ProvisioningStatus::PendingUpdate;
                m.change += 1;
                (m.member.clone(), MutationKind::Update)
            }
            None => (insert_member(st, w), MutationKind::Create),
        };
        changed.push(member.id.clone());
        done.push(Batched { member, kind });
    }
    for id in left_out {
        if let Some(member) = mark_deleted(st, &id) {
            changed.push(id);
            done.push(Batched {
                member,
                kind: MutationKind::Delete,
            });
        }
    }
    let latency = st.config.latencies.member_create;
    begin_change(st, now, &lb_id, Child::Members(changed), latency);
    Ok(done)
}

impl SimCloud {
    /// Octavia's batch member update of pool `pool_id` (see [`crate::member_batch`]'s
    /// doc) as a call: counted, faulted like any call, and recorded in the mutation log
    /// as one create, update or delete per member it changed (a refused batch as one
    /// failed create per requested member). Answers the members it created or updated,
    /// PENDING; Octavia itself answers 202 with no body.
    pub fn batch_members(
        &self,
        pool_id: &str,
        wanted: &[MemberCreate],
        additive_only: bool,
    ) -> Result<Vec<Member>> {
        let mut st = self.lock();
        let result = self
            .enter(&mut st, OCTAVIA, OP)
            .and_then(|now| batch_members(&mut st, now, pool_id, wanted, additive_only));
        let now = self.clock.now();
        let logged: Vec<(String, String, Vec<String>, MutationKind)> = match &result {
            Ok(done) => done
                .iter()
                .map(|b| {
                    let m = &b.member;
                    (m.id.clone(), m.name.clone(), m.tags.clone(), b.kind)
                })
                .collect(),
            Err(_) => wanted
                .iter()
                .map(|w| {
                    (
                        String::new(),
                        w.name.clone(),
                        w.tags.clone(),
                        MutationKind::Create,
                    )
                })
                .collect(),
        };
        for (id, name, tags, kind) in logged {
            st.log
                .record(now, (OCTAVIA, OP), kind, (id, name, tags), result.is_ok());
        }
        st.settle(now);
        result.map(|done| {
            done.into_iter()
                .filter(|b| b.kind != MutationKind::Delete)
                .map(|b| b.member)
                .collect()
        })
    }
}
