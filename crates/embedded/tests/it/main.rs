//! Every integration test of flightdeck-embedded, in one test binary: one link instead of
//! 2, and the long tests run beside the short ones.

mod kubevirt_user_data;
mod node_watch;
mod opennebula_user_data;
