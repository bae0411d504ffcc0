//! The kernel side of the ext crate: loading the BPF scheduler through
//! libbpf-rs (its generated skeleton is the crate's only `unsafe`).

pub mod scx_wrr;
