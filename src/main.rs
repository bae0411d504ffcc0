//! The schedlab binary: registers the sched_ext WRR loader when built with
//! the `ext` feature, then runs the command line (`schedlab::cli`).
#![forbid(unsafe_code)]
fn main() {
    #[cfg(feature = "ext")]
    schedlab_ext::register();
    std::process::exit(schedlab::cli::main());
}
