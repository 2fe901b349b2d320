//! Every integration test of flightdeck-kubevirt, in one test binary: one link instead of
//! 3, and the long tests run beside the short ones.

mod guest;
mod infra;
mod kubeconfig;
mod support;
