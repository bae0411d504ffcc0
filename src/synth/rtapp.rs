//! The replay's description as rt-app JSON (for rt-app and LISA users):
//! one rt-app task per replayed task, its events in order: `run` (µs of
//! rt-app's calibrated loop, from the work units at the synthesizing
//! machine's pi rate), `sleep` (µs; also for sleeps ended outside the
//! tree), `suspend` (wait for a `resume` by a partner), `resume` (wake a
//! partner) and `fork` (start a task, which has `"instance": 0`).
//!
//! rt-app knows threads only, so a replayed process becomes a thread; a
//! task kept as distributions becomes a loop of its mean burst and mean
//! sleep. JSON keys are unique, so each event's key carries its position
//! (`run3`), as rt-app allows.

use crate::workload::replay::desc::{Body, Op, ReplayTask, Waker};

fn us(ns: u64) -> u64 {
    ns.div_ceil(1000)
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

fn mean(v: &[u64]) -> u64 {
    if v.is_empty() {
        0
    } else {
        v.iter().sum::<u64>() / v.len() as u64
    }
}

/// The rt-app JSON text; `policy` is rt-app's name (SCHED_OTHER, …).
pub fn to_json(tasks: &[ReplayTask], pi_iter_per_s: f64, policy: &str) -> String {
    let run_us = |units: u64| ((units as f64 / pi_iter_per_s * 1e6).round() as u64).max(1);
    let mut out = String::from("{\n  \"tasks\": {\n");
    for (i, t) in tasks.iter().enumerate() {
        let mut ev: Vec<(String, String)> = Vec::new();
        let instance = if t.parent.is_some() { 0 } else { 1 };
        match &t.body {
            Body::Sequence(ops) => {
                for (k, op) in ops.iter().enumerate() {
                    let name = |x: usize| quote(&tasks[x].name);
                    ev.push(match *op {
                        Op::Run(n) => (format!("run{k}"), run_us(n).to_string()),
                        Op::Sleep {
                            ns,
                            by: Waker::Timer | Waker::External,
                        } => (format!("sleep{k}"), us(ns).to_string()),
                        Op::Sleep {
                            by: Waker::Task(_), ..
                        } => (format!("suspend{k}"), quote(&t.name)),
                        Op::Wake(x) => (format!("resume{k}"), name(x)),
                        Op::Fork(x) => (format!("fork{k}"), name(x)),
                    });
                }
                ev.push(("loop".into(), "1".into()));
            }
            Body::Distribution(d) => {
                for (k, &c) in d.forks.iter().enumerate() {
                    ev.push((format!("fork{k}"), quote(&tasks[c].name)));
                }
                ev.push(("run".into(), run_us(mean(&d.burst_work)).to_string()));
                if !d.sleep_ns.is_empty() {
                    ev.push(("sleep".into(), us(mean(&d.sleep_ns)).to_string()));
                }
                ev.push(("loop".into(), d.bursts.to_string()));
            }
        }
        out.push_str(&format!(
            "    {}: {{\n      \"instance\": {instance},\n",
            quote(&t.name)
        ));
        let body: Vec<String> = ev
            .iter()
            .map(|(k, v)| format!("      {}: {v}", quote(k)))
            .collect();
        out.push_str(&body.join(",\n"));
        out.push_str(if i + 1 < tasks.len() {
            "\n    },\n"
        } else {
            "\n    }\n"
        });
    }
    out.push_str(&format!(
        "  }},\n  \"global\": {{\n    \"duration\": -1,\n    \"default_policy\": {},\n    \
         \"calibration\": \"CPU0\",\n    \"lock_pages\": false,\n    \"logdir\": \"./\"\n  }}\n}}\n",
        quote(policy)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_in_order_and_valid_json() {
        let tasks = vec![
            ReplayTask {
                name: "t0".into(),
                comm: "sh".into(),
                parent: None,
                thread: false,
                body: Body::Sequence(vec![
                    Op::Run(2000),
                    Op::Fork(1),
                    Op::Sleep {
                        ns: 1500,
                        by: Waker::Task(1),
                    },
                ]),
            },
            ReplayTask {
                name: "t0.1".into(),
                comm: "cat".into(),
                parent: Some(0),
                thread: false,
                body: Body::Sequence(vec![
                    Op::Sleep {
                        ns: 2500,
                        by: Waker::Timer,
                    },
                    Op::Wake(0),
                ]),
            },
        ];
        let text = to_json(&tasks, 1e9, "SCHED_OTHER");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["tasks"]["t0"]["run0"], 2);
        assert_eq!(v["tasks"]["t0"]["fork1"], "t0.1");
        assert_eq!(v["tasks"]["t0"]["suspend2"], "t0");
        assert_eq!(v["tasks"]["t0.1"]["instance"], 0);
        assert_eq!(v["tasks"]["t0.1"]["sleep0"], 3);
        assert_eq!(v["tasks"]["t0.1"]["resume1"], "t0");
        assert_eq!(v["global"]["default_policy"], "SCHED_OTHER");
        // In the text, the events keep their order.
        assert!(text.find("run0").unwrap() < text.find("fork1").unwrap());
    }
}
