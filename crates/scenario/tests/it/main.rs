//! Every integration test of flightdeck-scenario, in one test binary: one link instead of
//! 15, and the long tests run beside the short ones.

mod cluster_pki;
mod common;
mod engine_backoff;
mod f12_foreign_lists;
mod f2_member_gate;
mod flight_control;
mod guest;
mod guest_swarm;
mod handover;
mod identity;
mod kubeadm;
mod kubevirt;
mod lagging_store;
mod lies;
mod lifecycle;
mod opennebula;
mod pace;
mod quiet;
mod replicas_f1;
mod spec_changes;
mod split_brain;
mod swarm;
mod unsafe_switches;
mod wire;
