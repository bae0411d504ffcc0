use super::dist::*;
#[test]
fn scratch_dump() {
    for df in [0.3, 1.0, 2.0, 3.0, 7.5, 1e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 3e7, 1e8, 1e9, 1e12] {
        for t in [0.0, 0.1, 0.7, 1.5, 1.8, 1.96, 2.2, 2.5, 3.0, 4.0, 5.0, 6.5, 8.0, 10.0, 15.0, 30.0] {
            println!("CMP {df:e} {t} {:e}", t_sf(t, df));
        }
        for p in [1e-15, 1e-9, 1e-4, 0.01, 0.025, 0.05, 0.2, 0.45] {
            println!("TQ {df:e} {p:e} {:e} {:e}", t_quantile(p, df), t_quantile(1.0 - p, df));
        }
    }
}
