use super::*;
use crate::plan::expand;

const RATES: Rates = Rates {
    pi_iter_per_s: 1e9,
    hash_per_s: 1e5,
    flops_per_s: 1e9,
    copy_bytes_per_s: 1e9,
    wake_round_trip_s: 10e-6,
};

/// One pi process of `pi` (a `[workloads.pi]` body) on the host and on
/// guests of every accelerator, 2 repetitions, sequential.
fn spec(pi: &str) -> Spec {
    let text = format!(
        "repetitions = 2\ncooldown_s = 0\norder = \"sequential\"\n[matrix]\npolicy = [\"other\"]\nprocesses = [1]\n\
         workload = [\"pi\"]\nmachine = [\"host\", \"t\", \"i\", \"k\"]\n[workloads.pi]\n{pi}\n\
         [machines.t]\nkernel = \"debian-6.12\"\naccel = \"tcg\"\n\
         [machines.i]\nkernel = \"debian-6.12\"\naccel = \"tcg-icount\"\n\
         [machines.k]\nkernel = \"debian-6.12\"\naccel = \"kvm\"\n"
    );
    crate::spec::load(&text, "t", &[]).unwrap()
}

fn level(r: &Run) -> &str {
    r.machine.as_ref().map_or("", |m| m.name.as_str())
}

/// (level, seconds) of each run, in the runs' order.
fn by_level(runs: &[Run], est: &[f64]) -> Vec<(String, f64)> {
    runs.iter()
        .zip(est)
        .map(|(r, &s)| (level(r).to_string(), s))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn work_bound_guest_runs_take_the_emulator_s_slowdown_and_one_boot_per_level() {
    // 1e9 iterations at 1e9/s: 1 s on the host.
    let s = spec("iterations = 1000000000");
    let runs = expand(&s, 0);
    let pending: Vec<&Run> = runs.iter().collect();
    let est = estimates(
        &s,
        &runs,
        &pending,
        2,
        &RATES,
        1_000_000,
        &Measured::default(),
    );
    let host = plan::estimates(&s, &pending, 2, &RATES, 1_000_000);
    for ((l, e), h) in by_level(&runs, &est).iter().zip(&host) {
        if l == "host" {
            assert!(close(*e, *h), "{l}: {e} vs {h}");
        }
    }
    let got: Vec<(String, f64)> = by_level(&runs, &est);
    let of = |l: &str| -> Vec<f64> { got.iter().filter(|g| g.0 == l).map(|g| g.1).collect() };
    // The first run of each level carries its boot; the second does not.
    assert!(
        close(of("t")[0], TCG_BOOT_S + TCG_WORK_SLOWDOWN),
        "{:?}",
        of("t")
    );
    assert!(close(of("t")[1], TCG_WORK_SLOWDOWN));
    let icount = ICOUNT_VIRTUAL_SLOWDOWN * ICOUNT_HOST_S_PER_GUEST_S;
    assert!(close(of("i")[0], ICOUNT_BOOT_S + icount), "{:?}", of("i"));
    assert!(close(of("i")[1], icount));
    assert!(close(of("k")[1], 1.0), "{:?}", of("k"));
}

#[test]
fn duration_bound_runs_take_their_duration_except_under_icount() {
    let s = spec("duration_s = 2");
    let runs = expand(&s, 0);
    let pending: Vec<&Run> = runs.iter().filter(|r| r.rep == 2).collect();
    let est = estimates(
        &s,
        &runs,
        &pending,
        2,
        &RATES,
        1_000_000,
        &Measured::default(),
    );
    let got: Vec<(&str, f64)> = pending.iter().map(|r| level(r)).zip(est).collect();
    for (l, e) in got {
        let want = match l {
            "host" => 2.0,
            "t" => TCG_BOOT_S + 2.0,
            "i" => ICOUNT_BOOT_S + 2.0 * ICOUNT_HOST_S_PER_GUEST_S,
            "k" => TCG_BOOT_S + 2.0,
            _ => unreachable!(),
        };
        assert!(close(e, want), "{l}: {e} vs {want}");
    }
}

#[test]
fn the_campaign_s_own_measurements_replace_the_defaults() {
    let s = spec("iterations = 1000000000");
    let runs = expand(&s, 0);
    let first = |l: &str| runs.iter().find(|r| level(r) == l && r.rep == 1).unwrap();
    let second = |l: &str| runs.iter().find(|r| level(r) == l && r.rep == 2).unwrap();
    let mut m = Measured::default();
    // Level t: two boots measured, and its first run: 40 s of host time.
    m.boots_s.insert("t".into(), vec![3.0, 5.0]);
    m.runs_s.insert(first("t").key.clone(), 40.0);
    m.runs_by_level.insert("t".into(), 1);
    let pending = vec![second("t"), second("i")];
    let est = estimates(&s, &runs, &pending, 2, &RATES, 1_000_000, &m);
    // t: the median boot (4 s) and its condition's measured 40 s.
    assert!(close(est[0], 4.0 + 40.0), "{est:?}");
    // i: nothing measured, the defaults.
    let icount = ICOUNT_VIRTUAL_SLOWDOWN * ICOUNT_HOST_S_PER_GUEST_S;
    assert!(close(est[1], ICOUNT_BOOT_S + icount), "{est:?}");
    let d = describe(&s, &pending, &m);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(
        d[0].starts_with("t: 1 runs, a boot of 4.0 s (median of 2 measured)"),
        "{d:?}"
    );
    assert!(d[0].contains("its 1 measured runs"), "{d:?}");
    assert!(d[1].contains("not measured yet"), "{d:?}");
}

#[test]
fn a_condition_not_measured_yet_takes_its_level_s_measured_factor() {
    // Two conditions (1 and 2 processes on one guest CPU... and all CPUs).
    let text = "repetitions = 1\ncooldown_s = 0\n[matrix]\npolicy = [\"other\"]\nprocesses = [1, 2]\n\
                workload = [\"pi\"]\ncpus = [\"0\"]\nmachine = [\"t\"]\n[workloads.pi]\niterations = 1000000000\n\
                [machines.t]\nkernel = \"debian-6.12\"\naccel = \"tcg\"\n";
    let s = crate::spec::load(text, "t", &[]).unwrap();
    let runs = expand(&s, 0);
    let one = runs.iter().find(|r| r.processes == 1).unwrap();
    let two = runs.iter().find(|r| r.processes == 2).unwrap();
    let mut m = Measured::default();
    // 1 s on the host took 10 s in the guest: the level's factor is 10.
    m.runs_s.insert(one.key.clone(), 10.0);
    m.boots_s.insert("t".into(), vec![7.0]);
    let est = estimates(&s, &runs, &[two], 2, &RATES, 1_000_000, &m);
    // Two processes on one CPU: 2 s on the host, so 20 s, and the boot.
    assert!(close(est[0], 7.0 + 20.0), "{est:?}");
}
