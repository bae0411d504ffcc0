#![forbid(unsafe_code)]
fn main() {
    std::process::exit(schedlab::cli::main());
}
