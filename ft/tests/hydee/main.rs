//! HydEE proven on a deterministic simulator: the test scenarios of `shared/reference/hydee.md`, a test for each
//! resolution of the published pseudo-code, engine-level unit tests, and property tests over random programs.

mod setup;
mod sim;

mod determinism;
mod engine;
mod properties;
mod scenarios;
mod stamps;
