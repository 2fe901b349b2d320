//! Every integration test of flightdeck-flightdeck, in one test binary: one link instead of
//! 2, and the long tests run beside the short ones.

mod bench;
mod cli;
mod client;
mod tls;
