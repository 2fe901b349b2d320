//! Unit tests of the client: connection settings, rendering, SSE parsing, certificate
//! advice and the CLI's forms. Nothing here needs a running daemon.

mod cli;
mod connect;
mod render;
mod sse;
mod trust;
