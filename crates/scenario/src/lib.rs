//! Proving ground: runs the real engine against the simulated cloud in virtual time,
//! injects faults and workload on a schedule, checks invariants after every step and
//! reports what happened.
//!
//! The simulator knows nothing of the planner and the planner nothing of the simulator;
//! this crate is where the two meet.

pub mod boot_check;
#[cfg(test)]
mod broken_world;
mod budget;
pub mod builtin;
pub mod churn_check;
pub mod converge_check;
mod dispatch;
pub mod engine_faults;
mod expect;
pub mod flight;
pub mod guest_checks;
pub mod invariants;
pub mod kubevirt;
pub mod leases;
pub mod load;
mod loopback;
pub mod one;
mod owned;
mod pace;
pub mod repair_check;
pub mod report;
pub mod runner;
pub mod serving;
pub mod split_brain;
mod split_brain_checks;
pub mod split_brain_swarm;
mod stage;
pub mod swarm;
mod swarm_faults;
mod swarm_fleet;
pub mod track;
mod truth;
mod unsafe_switch;
pub mod wire;
mod workload;

pub use dispatch::{run, run_wire};
pub use load::{LoadedScenario, ScenarioError, load_scenario};
pub use report::Report;
pub use runner::{Run, RunError, RunOptions, run_on};
