//! Benchmarks run from the command line (`schedlab bench ...`), not tests.

pub mod aio;
pub mod fidelity;
pub mod machines;
pub mod model;
pub mod model_scale;
pub mod replay;
pub mod report;
pub mod trace;
pub mod wrr;
