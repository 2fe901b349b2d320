//! Every integration test of flightdeck-spec, in one test binary: one link instead of
//! 3, and the long tests run beside the short ones.

mod limits;
mod mutations;
mod spec_files;
