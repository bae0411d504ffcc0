//! Benchmarks run from the command line (`schedlab bench ...`), not tests.

pub mod aio;
pub mod report;
pub mod wrr;
