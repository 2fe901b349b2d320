//! Every integration test of flightdeck-openstack, in one test binary: one link instead of
//! 3, and the long tests run beside the short ones.

mod fake;
mod hostile;
mod provider;
mod session;
