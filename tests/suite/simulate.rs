//! `schedlab simulate`: a campaign carried out in the model through the
//! same seam, plan, store and report as a measured one, stored as a
//! campaign of the model (never resuming a measured campaign of the same
//! spec), with the schedule the documented policies give.

use crate::common;
use common::{schedlab, text};

const SPEC: &str = r#"
name = "sim"
repetitions = 2
cooldown_s = 0
[matrix]
policy = ["fifo", "rr", "other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
[workloads.pi]
kind = "pi"
iterations = 20000000
"#;

fn rows(dir: &std::path::Path, sql: &str) -> Vec<(String, String, i64)> {
    let c = rusqlite::Connection::open(dir.join("t.db")).unwrap();
    let mut st = c.prepare(sql).unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn a_simulated_campaign_is_stored_and_reported_as_the_model_s() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), SPEC).unwrap();
    let o = schedlab(
        &["simulate", "s.toml", "--db", "t.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let runs = rows(
        dir.path(),
        "SELECT r.policy, r.status, r.id FROM runs r ORDER BY r.id",
    );
    assert_eq!(runs.len(), 6);
    assert!(runs.iter().all(|r| r.1 == "ok"), "{runs:?}");
    let o = schedlab(&["campaigns", "--db", "t.db"], dir.path());
    assert!(text(&o).contains("model"), "{}", text(&o));
    // FIFO: the second process starts when the first has finished, so it
    // ends at twice the first's time; RR takes 100 ms turns of the same
    // work; OTHER shares: both end near the same time.
    let ends = |policy: &str| -> Vec<i64> {
        let c = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
        let mut st = c
            .prepare(
                "SELECT p.end_ns FROM processes p JOIN runs r ON r.id = p.run_id \
                 WHERE r.policy = ?1 AND r.rep = 1 ORDER BY p.end_ns",
            )
            .unwrap();
        st.query_map([policy], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let fifo = ends("fifo");
    let ratio = fifo[1] as f64 / fifo[0] as f64;
    assert!((ratio - 2.0).abs() < 0.02, "FIFO ends {fifo:?}");
    let other = ends("other");
    assert!(
        other[1] as f64 / (other[0] as f64) < 1.2,
        "OTHER ends {other:?}"
    );
    let o = schedlab(&["report", "--db", "t.db", "--format", "md"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("schedlab report: sim"), "{}", text(&o));
    // The same spec measured into the same database is another campaign.
    let o = schedlab(&["plan", "s.toml", "--db", "t.db"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("nothing left to run"), "{}", text(&o));
}

/// Three FIFO pi workers pinned to CPU 0, one repetition.
const FIFO3: &str = r#"
name = "fifo3"
repetitions = 1
cooldown_s = 0
[matrix]
policy = ["fifo"]
workload = ["pi"]
processes = [3]
cpus = ["0"]
[workloads.pi]
kind = "pi"
iterations = 2000000
"#;

/// The bars of the HTML report's timelines whose tooltip names `who`
/// ("worker" for the model's, "schedlab-w" for a trace's): (name, CPU,
/// start ms, end ms, how it ended), in the order drawn.
fn bars(html: &str, who: &str) -> Vec<(String, u32, f64, f64, String)> {
    let re = regex::Regex::new(&format!(
        r"<title>(?:pid \d+ \()?({}[ \w-]*?)\)? on CPU (\d+): ([\d.]+)–([\d.]+) ms \([\d.]+ µs\), ([a-z ]+)",
        regex::escape(who)
    ))
    .unwrap();
    re.captures_iter(html)
        .map(|c| {
            (
                c[1].to_string(),
                c[2].parse().unwrap(),
                c[3].parse().unwrap(),
                c[4].parse().unwrap(),
                c[5].trim().to_string(),
            )
        })
        .collect()
}

/// The FIFO workers' predicted slices: each worker once, whole, one after
/// the other on CPU 0 (no interleaving), each ending exited.
fn assert_fifo_order(slices: &[(String, u32, f64, f64, String)]) {
    assert_eq!(slices.len(), 3, "{slices:?}");
    let mut names: Vec<&str> = slices.iter().map(|s| s.0.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 3, "one slice per worker: {slices:?}");
    for w in slices.windows(2) {
        assert!(w[0].3 <= w[1].2 + 1e-6, "interleaved: {slices:?}");
    }
    assert!(
        slices.iter().all(|s| s.1 == 0 && s.4 == "exited"),
        "{slices:?}"
    );
}

/// `schedlab simulate` stores each run's predicted per-CPU timeline, and
/// `report --timeline-run` draws it as the model's: FIFO workers one after
/// the other, each released at once and waiting until the ones before it
/// ended (the model's wake-up-to-run latency); the trace export refuses
/// it (no kernel events).
#[test]
fn a_simulated_run_s_predicted_timeline_is_drawn_as_the_model_s() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), FIFO3).unwrap();
    let o = schedlab(
        &["simulate", "s.toml", "--db", "t.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(
        &[
            "report",
            "--db",
            "t.db",
            "--timeline-run",
            "1",
            "-o",
            "r.html",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(
        html.contains(
            "Run 1: who holds each CPU in the model&#39;s prediction (not a kernel trace)"
        ),
        "the chart's title names the model"
    );
    assert!(
        html.contains("the model&#39;s predicted timeline (schedlab simulate), not a kernel trace")
    );
    // The Trace section's timeline (the first screen draws the run too).
    let drawn = bars(&html, "worker");
    assert!(drawn.len() >= 3, "{drawn:?}");
    assert_fifo_order(&drawn[drawn.len() - 3..]);
    let o = schedlab(
        &[
            "report",
            "--db",
            "t.db",
            "--timeline-run",
            "1",
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let run = &j["trace"]["timeline"]["run"];
    assert_eq!(run["predicted"], true, "{run}");
    assert_eq!(run["slices_shown"], 3, "{run}");
    // The three released together at the start of the drawn window: the
    // first runs at once, the last waits until the second's slice ends,
    // where its own bar starts (HdrHistogram: within 0.1 %).
    let wake = &j["trace"]["conditions"][0]["trace_wake"];
    assert_eq!(wake["count"], 3, "{wake}");
    let last_start_us = drawn[drawn.len() - 1].2 * 1e3;
    let max_us = wake["max_us"].as_f64().unwrap();
    assert!(
        (max_us / last_start_us - 1.0).abs() < 2e-3,
        "{wake} against the last bar from {last_start_us} µs"
    );
    let o = schedlab(
        &[
            "report",
            "--db",
            "t.db",
            "--timeline-run",
            "1",
            "--format",
            "md",
        ],
        dir.path(),
    );
    let md = text(&o);
    assert!(
        md.contains("## Predicted timeline (the model's, not a kernel trace)"),
        "{md}"
    );
    assert!(
        md.contains("Run 1 (chosen): the model's predicted timeline"),
        "{md}"
    );
    assert!(
        md.contains("A predicted timeline's wake-up-to-run latency is the model's"),
        "{md}"
    );
    // The condition's row gives the waits 0, one and two workers' slices:
    // the p50 wake→run is the second's, one slice (the slices are equal).
    let row = md
        .lines()
        .find(|l| l.starts_with("| pi, 3 processes, FIFO |"))
        .unwrap_or_else(|| panic!("no trace row: {md}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let (slice_p50, wake_p50) = (cells[4], cells[11]);
    let p50_us: f64 = wake_p50.parse().unwrap_or_else(|_| panic!("{row}"));
    assert!(p50_us > 0.0 && wake_p50 == slice_p50, "{row}");
    let o = schedlab(
        &[
            "trace", "export", "--db", "t.db", "--run", "1", "-o", "x.json",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("run 1 was simulated (schedlab simulate)"),
        "{}",
        text(&o)
    );
    assert!(!dir.path().join("x.json").exists());
}

/// A traced FIFO run (root: tracefs and SCHED_FIFO) and its simulated
/// twin: `report --model-timeline` draws the model's prediction of the
/// same condition and repetition under the traced timeline.
#[test]
fn the_model_s_timeline_is_drawn_under_a_traced_run_of_the_same_condition() {
    let euid = schedlab::sys::proc::euid();
    if !common::require(
        euid == 0,
        format!("tracing needs root (tracefs; euid is {euid})"),
    ) {
        return;
    }
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), FIFO3).unwrap();
    let o = schedlab(
        &["run", "s.toml", "--db", "m.db", "--trace", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(
        &["simulate", "s.toml", "--db", "sim.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(
        &[
            "report",
            "--db",
            "m.db",
            "--timeline-run",
            "1",
            "--model-timeline",
            "sim.db",
            "-o",
            "r.html",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    let traced = html
        .find("Run 1: who held each CPU")
        .expect("the traced timeline");
    let model = html
        .find("Run 1: who holds each CPU in the model&#39;s prediction")
        .expect("the model's timeline");
    assert!(traced < model, "the model's is drawn under the traced one");
    assert!(html.contains("Under run 1: the model&#39;s predicted timeline of the same condition"));
    // The model's workers, whole (the default window is longer than the
    // prediction), one after the other; the traced ones are drawn too.
    assert_fifo_order(&bars(&html, "worker"));
    assert!(!bars(&html, "schedlab-w").is_empty());
    let o = schedlab(
        &[
            "report",
            "--db",
            "m.db",
            "--timeline-run",
            "1",
            "--model-timeline",
            "sim.db",
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &j["trace"]["timeline"];
    assert_eq!(t["run"]["predicted"], false, "{t}");
    assert_eq!(t["model"]["predicted"], true, "{t}");
    assert_eq!(t["model"]["run_id"], 1, "{t}");
    // A simulated database without the condition: refused, naming the flag.
    let o = schedlab(
        &[
            "report",
            "--db",
            "sim.db",
            "--timeline-run",
            "1",
            "--model-timeline",
            "m.db",
            "--format",
            "md",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--model-timeline m.db: no simulated ok run"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_cpu_this_machine_lacks_is_refused_as_plan_and_run_refuse_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spec = SPEC.replace("cpus = [\"0\"]", &format!("cpus = [\"{}\"]", n + 5));
    std::fs::write(dir.path().join("s.toml"), spec).unwrap();
    let plan = schedlab(&["plan", "s.toml"], dir.path());
    assert_eq!(plan.status.code(), Some(2), "{}", text(&plan));
    let o = schedlab(
        &["simulate", "s.toml", "--db", "t.db", "--quiet"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("matrix.cpus"), "{err}");
    // Refused before the database: nothing stored, no file made.
    assert!(!dir.path().join("t.db").exists(), "{err}");
}

#[test]
fn names_cannot_inject_headings_links_images_or_cells_into_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let w = r#"w|x\n## H2 [y](javascript:alert(2)) ![](http://evil.example/w.png)"#;
    let spec = format!(
        "name = \"camp|a\\n# Heading [x](javascript:alert(1)) ![](http://evil.example/p.png)\"\n\
         repetitions = 2\ncooldown_s = 0\n[matrix]\npolicy = [\"other\"]\nworkload = [\"{w}\"]\n\
         processes = [2]\ncpus = [\"0\"]\n[workloads.\"{w}\"]\nkind = \"pi\"\niterations = 1000000\n"
    );
    std::fs::write(dir.path().join("s.toml"), spec).unwrap();
    let o = schedlab(
        &["simulate", "s.toml", "--db", "t.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(
        &["report", "--db", "t.db", "--format", "md", "-o", "-"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    check_inert(&md);
    // compare's Markdown too (the campaign against itself, with --force
    // not needed: one database, two campaigns of the same spec are one).
    std::fs::write(
        dir.path().join("s2.toml"),
        std::fs::read_to_string(dir.path().join("s.toml"))
            .unwrap()
            .replace("repetitions = 2", "repetitions = 3"),
    )
    .unwrap();
    let o = schedlab(
        &["simulate", "s2.toml", "--db", "u.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = schedlab(
        &[
            "compare", "--db", "t.db", "--vs", "u.db", "--force", "--format", "md",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    check_inert(&String::from_utf8_lossy(&o.stdout));
}

/// No line of `md` that a name made a heading, no live link or image, and
/// every table row with as many cells as its header.
fn check_inert(md: &str) {
    for l in md.lines() {
        assert!(
            !l.starts_with("# Heading") && !l.starts_with("## H2"),
            "a name made a heading: {l}\n{md}"
        );
    }
    // A link needs an unescaped "](": every one here is "\](".
    let live = md
        .match_indices("](javascript:")
        .filter(|(i, _)| !md[..*i].ends_with('\\'))
        .count();
    assert_eq!(live, 0, "a live link:\n{md}");
    assert!(!md.contains("![]("), "a live image:\n{md}");
    assert!(
        md.contains("javascript:alert(2)"),
        "the name is shown:\n{md}"
    );
    // Cells: split on pipes not escaped by an odd number of backslashes.
    let cells = |row: &str| {
        let mut n = 0;
        let mut backslashes = 0;
        for c in row.chars() {
            if c == '|' && backslashes % 2 == 0 {
                n += 1;
            }
            backslashes = if c == '\\' { backslashes + 1 } else { 0 };
        }
        n
    };
    let mut header = None;
    for l in md.lines() {
        if !l.starts_with('|') {
            header = None;
            continue;
        }
        match header {
            None => header = Some(cells(l)),
            Some(h) => assert_eq!(cells(l), h, "a row of another width: {l}\n{md}"),
        }
    }
}

/// A spec whose condition runs on a guest level (`[machines.g]`, 1x4x1)
/// is simulated on the guest's 4 CPUs without booting it: the run is the
/// model's, and its predicted per-CPU lanes (`trace_cpus`) cover CPUs 0–3,
/// each busy nearly all the time with 6 hogs.
#[test]
fn a_guest_level_is_simulated_on_its_cpus_without_booting_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "name = \"g\"\nrepetitions = 1\ncooldown_s = 0\n[matrix]\npolicy = [\"other\"]\nworkload = [\"pi\"]\n\
                processes = [6]\ncpus = [\"all\"]\nmachine = [\"g\"]\n[workloads.pi]\nkind = \"pi\"\n\
                iterations = 20000000\n[machines.g]\nkernel = \"debian-6.12\"\ntopology = \"1x4x1\"\n\
                accel = \"tcg-icount\"\n";
    std::fs::write(dir.path().join("s.toml"), spec).unwrap();
    let o = schedlab(
        &["simulate", "s.toml", "--db", "t.db", "--quiet"],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let c = rusqlite::Connection::open(dir.path().join("t.db")).unwrap();
    let (status, release): (String, String) = c
        .query_row(
            "SELECT r.status, e.kernel_release FROM runs r JOIN environments e \
             ON e.id = r.environment_id",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "ok");
    assert!(release.starts_with("schedlab-model"), "{release}");
    let mut st = c
        .prepare("SELECT cpu, busy_ns, window_ns FROM trace_cpus ORDER BY cpu")
        .unwrap();
    let lanes: Vec<(i64, i64, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        lanes.iter().map(|l| l.0).collect::<Vec<_>>(),
        [0, 1, 2, 3],
        "{lanes:?}"
    );
    for (cpu, busy, window) in lanes {
        assert!(
            busy as f64 >= 0.9 * window as f64,
            "CPU {cpu}: {busy} of {window}"
        );
    }
}
