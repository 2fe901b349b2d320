//! Every integration test of flightdeck-spec, in one test binary: one link instead of
//! 4, and the long tests run beside the short ones.

mod every_error;
mod limits;
mod mutations;
mod spec_files;
