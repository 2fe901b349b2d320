//! Every integration test of flightdeck-sim-http, in one test binary: one link instead of
//! 7, and the long tests run beside the short ones.

mod common;
mod keystone;
mod kubernetes;
mod neutron;
mod node_watch;
mod nova;
mod octavia;
mod opennebula;
