//! The dry run as the API shows it.

use flightdeck_engine::Preview;

use crate::types::{BudgetView, PlanView, PlannedActionView, RepairView};

pub fn plan_view(cluster: &str, p: &Preview) -> PlanView {
    let plan = &p.plan;
    PlanView {
        cluster: cluster.to_string(),
        actions: plan
            .actions
            .iter()
            .map(|a| PlannedActionView {
                kind: a.action.kind().to_string(),
                summary: a.action.summary(),
                reason: a.reason.to_string(),
            })
            .collect(),
        repairs: plan
            .status
            .repairs
            .iter()
            .map(|r| RepairView {
                machine: r.machine.clone(),
                reason: r.reason.clone(),
                state: r.state.clone(),
            })
            .collect(),
        repair_budgets: plan
            .status
            .repair_budgets
            .iter()
            .map(|b| BudgetView {
                set: b.set.clone(),
                budget: b.budget,
                in_use: b.in_use,
            })
            .collect(),
        conditions: plan
            .conditions
            .iter()
            .filter(|c| c.status)
            .map(|c| format!("{}: {}", c.kind, c.message))
            .collect(),
        requeue_after: plan.requeue_after.map(|d| d.to_string()),
        observed_at: p.observed_at.millis(),
    }
}
