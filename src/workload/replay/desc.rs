//! The description of a replay: its tasks (the processes and threads of
//! the recorded tree), each with what it does in order ([`Op`]) or, for a
//! task with too many steps to list, the distribution of its CPU bursts
//! and sleeps ([`Dist`]); and its text form in a spec, which
//! `schedlab synthesize` writes ([`to_table`]) and the spec parser reads
//! ([`parse`]), with errors naming the key.
//!
//! A task's ops, as strings in `ops`:
//! - `run N`: a CPU burst of N work units of the calibrated loop (pi
//!   iterations, machine-independent);
//! - `sleep Nns timer`: a sleep of N ns that a timer ended;
//! - `sleep Nns external`: a sleep ended by a task outside the tree,
//!   replayed as a timer sleep of the same length;
//! - `sleep Nns by T`: a sleep ended by task T of the tree (N is how long
//!   it lasted when recorded; the replay waits for T's wake-up); `sleep
//!   0ns by T` is a wait the original found already satisfied (a read
//!   that found data): it keeps the order of T's wake-up, and blocks only
//!   if the replay gets there first (`crate::synth::order`);
//! - `wake T`: wake task T (which then ends one `sleep … by` of its own);
//! - `fork T`: start task T (a process, or a thread of this process).
//!
//! The end of the list is the task's exit.

use serde::{Deserialize, Serialize};

use crate::workload::keys::{KeyError, Keys};

/// What ended a sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Waker {
    Timer,
    /// A task outside the tree (replayed as a timer).
    External,
    /// Task index of the tree.
    Task(usize),
}

/// One step of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Work units of the calibrated loop.
    Run(u64),
    Sleep {
        ns: u64,
        by: Waker,
    },
    /// Task index woken.
    Wake(usize),
    /// Task index started.
    Fork(usize),
}

/// Points of the quantile tables of [`Dist`] (every 5 %, 0 to 100 %).
pub const QUANTILES: usize = 21;

/// A task described by distributions instead of a sequence: `bursts`
/// bursts, each followed by a timer sleep (none after the last), drawn
/// from the quantile tables; its forks spread evenly over the bursts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dist {
    pub bursts: u64,
    /// Work units at 0, 5, …, 100 %.
    pub burst_work: Vec<u64>,
    /// Sleep ns at 0, 5, …, 100 % (empty: no sleeps).
    pub sleep_ns: Vec<u64>,
    /// Task indices it starts.
    pub forks: Vec<usize>,
}

/// What a task does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    Sequence(Vec<Op>),
    Distribution(Dist),
}

/// One process or thread of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayTask {
    /// "t0" for the tree of worker 0, "t0.2" for the second task t0
    /// started, and so on: the same names in a trace of the replay.
    pub name: String,
    /// The recorded task's command name (information only).
    pub comm: String,
    /// Index of the task that started it; None for a worker's own task.
    pub parent: Option<usize>,
    /// A thread of its parent's process (else a process of its own).
    pub thread: bool,
    pub body: Body,
}

impl ReplayTask {
    /// Tasks it starts, in order.
    pub fn forks(&self) -> Vec<usize> {
        match &self.body {
            Body::Sequence(ops) => ops
                .iter()
                .filter_map(|o| match o {
                    Op::Fork(c) => Some(*c),
                    _ => None,
                })
                .collect(),
            Body::Distribution(d) => d.forks.clone(),
        }
    }
}

/// The roots (worker tasks), in order.
pub fn roots(tasks: &[ReplayTask]) -> Vec<usize> {
    (0..tasks.len())
        .filter(|&i| tasks[i].parent.is_none())
        .collect()
}

/// An op in its text form (task indices named).
pub fn op_text(op: &Op, tasks: &[ReplayTask]) -> String {
    let name = |i: usize| tasks.get(i).map_or("?", |t| t.name.as_str()).to_string();
    match *op {
        Op::Run(n) => format!("run {n}"),
        Op::Sleep { ns, by } => match by {
            Waker::Timer => format!("sleep {ns}ns timer"),
            Waker::External => format!("sleep {ns}ns external"),
            Waker::Task(t) => format!("sleep {ns}ns by {}", name(t)),
        },
        Op::Wake(t) => format!("wake {}", name(t)),
        Op::Fork(t) => format!("fork {}", name(t)),
    }
}

/// The tasks as the `tasks` array of a `[workloads.NAME]` table.
pub fn to_table(tasks: &[ReplayTask]) -> toml::Value {
    let arr = tasks
        .iter()
        .map(|t| {
            let mut m = toml::Table::new();
            m.insert("name".into(), t.name.clone().into());
            m.insert("comm".into(), t.comm.clone().into());
            if let Some(p) = t.parent {
                m.insert("parent".into(), tasks[p].name.clone().into());
                m.insert("thread".into(), t.thread.into());
            }
            let ints = |v: &[u64]| {
                toml::Value::Array(v.iter().map(|&x| toml::Value::Integer(int(x))).collect())
            };
            match &t.body {
                Body::Sequence(ops) => {
                    let ops = ops.iter().map(|o| op_text(o, tasks).into()).collect();
                    m.insert("ops".into(), toml::Value::Array(ops));
                }
                Body::Distribution(d) => {
                    m.insert("bursts".into(), toml::Value::Integer(int(d.bursts)));
                    m.insert("burst_work".into(), ints(&d.burst_work));
                    m.insert("sleep_ns".into(), ints(&d.sleep_ns));
                    let forks = d
                        .forks
                        .iter()
                        .map(|&c| tasks[c].name.clone().into())
                        .collect();
                    m.insert("forks".into(), toml::Value::Array(forks));
                }
            }
            toml::Value::Table(m)
        })
        .collect();
    toml::Value::Array(arr)
}

fn int(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Parse the `tasks` array of `k`'s table.
pub fn parse(k: &Keys) -> Result<Vec<ReplayTask>, KeyError> {
    let Some(v) = k.value("tasks") else {
        return Err(k.err(
            "tasks",
            "a replay needs its tasks (`schedlab synthesize` writes them from a traced run)",
        ));
    };
    let Some(arr) = v.as_array().filter(|a| !a.is_empty()) else {
        return Err(k.err("tasks", "must be a non-empty array of tables"));
    };
    let mut tables = Vec::with_capacity(arr.len());
    let mut index = std::collections::HashMap::new();
    for (i, v) in arr.iter().enumerate() {
        let key = format!("tasks[{i}]");
        let t = v.as_table().ok_or_else(|| k.err(&key, "must be a table"))?;
        let tk = k.nested(&key, t, format!("replay task {i}"));
        tk.only(&[
            "name",
            "comm",
            "parent",
            "thread",
            "ops",
            "bursts",
            "burst_work",
            "sleep_ns",
            "forks",
        ])?;
        let name = tk
            .str("name")?
            .ok_or_else(|| tk.err("name", "every task needs a name"))?
            .to_string();
        if index.insert(name.clone(), i).is_some() {
            return Err(tk.err("name", format!("task \"{name}\" is named twice")));
        }
        tables.push((tk, name));
    }
    let find = |tk: &Keys, key: &str, name: &str| {
        index
            .get(name)
            .copied()
            .ok_or_else(|| tk.err(key, format!("no task is named \"{name}\"")))
    };
    let mut tasks = Vec::with_capacity(tables.len());
    for (tk, name) in &tables {
        let parent = match tk.str("parent")? {
            Some(p) => Some(find(tk, "parent", p)?),
            None => None,
        };
        let body = match tk.strings("ops")? {
            Some(ops) => Body::Sequence(
                ops.iter()
                    .enumerate()
                    .map(|(j, s)| parse_op(s, |n| find(tk, &format!("ops[{j}]"), n)))
                    .map(|r| r.map_err(|e| tk.err("ops", e.message)))
                    .collect::<Result<_, _>>()?,
            ),
            None => Body::Distribution(parse_dist(tk, &find)?),
        };
        tasks.push(ReplayTask {
            name: name.clone(),
            comm: tk.str("comm")?.unwrap_or("").to_string(),
            parent,
            thread: tk.bool("thread")?.unwrap_or(false),
            body,
        });
    }
    check_tree(&tasks).map_err(|m| k.err("tasks", m))?;
    Ok(tasks)
}

fn parse_dist(
    tk: &Keys,
    find: &dyn Fn(&Keys, &str, &str) -> Result<usize, KeyError>,
) -> Result<Dist, KeyError> {
    let bursts = tk
        .int("bursts")?
        .ok_or_else(|| tk.err("ops", "a task needs `ops`, or `bursts` with `burst_work`"))?;
    let table = |key: &str| -> Result<Vec<u64>, KeyError> {
        let v = tk.ints(key)?.unwrap_or_default();
        if !(v.is_empty() || v.len() == QUANTILES) || v.iter().any(|&x| x < 0) {
            return Err(tk.err(
                key,
                format!("must list {QUANTILES} non-negative quantiles (0, 5, …, 100 %)"),
            ));
        }
        Ok(v.into_iter().map(|x| x as u64).collect())
    };
    let burst_work = table("burst_work")?;
    if burst_work.is_empty() {
        return Err(tk.err("burst_work", "a task with `bursts` needs `burst_work`"));
    }
    let forks = tk
        .strings("forks")?
        .unwrap_or_default()
        .iter()
        .map(|n| find(tk, "forks", n))
        .collect::<Result<_, _>>()?;
    Ok(Dist {
        bursts: bursts.max(0) as u64,
        burst_work,
        sleep_ns: table("sleep_ns")?,
        forks,
    })
}

/// One op from its text form; `find` resolves a task name.
pub fn parse_op(s: &str, find: impl Fn(&str) -> Result<usize, KeyError>) -> Result<Op, KeyError> {
    let bad = || KeyError {
        key: String::new(),
        message: format!(
            "\"{s}\" is not an op (run N | sleep Nns timer | sleep Nns external | \
             sleep Nns by TASK | wake TASK | fork TASK)"
        ),
    };
    let w: Vec<&str> = s.split_whitespace().collect();
    let num = |t: &str| t.parse::<u64>().map_err(|_| bad());
    Ok(match w.as_slice() {
        ["run", n] => Op::Run(num(n)?),
        ["wake", t] => Op::Wake(find(t)?),
        ["fork", t] => Op::Fork(find(t)?),
        ["sleep", d, rest @ ..] => {
            let ns = num(d.strip_suffix("ns").ok_or_else(bad)?)?;
            let by = match rest {
                ["timer"] => Waker::Timer,
                ["external"] => Waker::External,
                ["by", t] => Waker::Task(find(t)?),
                _ => return Err(bad()),
            };
            Op::Sleep { ns, by }
        }
        _ => return Err(bad()),
    })
}

/// Every task but the roots is started exactly once, by its parent, and
/// wake-ups balance per pair: each task waits for as many wake-ups by each
/// partner as that partner gives it (so the replay, which matches them
/// pair by pair in order, can neither hang on a missing one nor leave one
/// unused).
pub fn check_tree(tasks: &[ReplayTask]) -> Result<(), String> {
    let mut started = vec![0u32; tasks.len()];
    // (waker, wakee) → wake-ups given less wake-ups waited for.
    let mut balance: std::collections::BTreeMap<(usize, usize), i64> = Default::default();
    for (i, t) in tasks.iter().enumerate() {
        for c in t.forks() {
            started[c] += 1;
            if tasks[c].parent != Some(i) {
                return Err(format!(
                    "{} starts {}, whose parent is not {}",
                    t.name, tasks[c].name, t.name
                ));
            }
        }
        if let Body::Sequence(ops) = &t.body {
            for op in ops {
                match *op {
                    Op::Wake(x) => *balance.entry((i, x)).or_default() += 1,
                    Op::Sleep {
                        by: Waker::Task(w), ..
                    } => *balance.entry((w, i)).or_default() -= 1,
                    _ => {}
                }
            }
        }
    }
    for (i, t) in tasks.iter().enumerate() {
        match (t.parent, started[i]) {
            (None, 0) | (Some(_), 1) => {}
            (None, _) => return Err(format!("{} is a worker's task but is started", t.name)),
            (Some(_), n) => return Err(format!("{} is started {n} times (once needed)", t.name)),
        }
        if t.thread && t.parent.is_none() {
            return Err(format!("{} is a thread without a parent", t.name));
        }
    }
    if let Some((&(w, x), &d)) = balance.iter().find(|(_, d)| **d != 0) {
        let waits = tasks[x].ops_waiting_for(w).unwrap_or(0);
        return Err(format!(
            "{} is woken {} times by {} but waits for {waits} wake-ups by it",
            tasks[x].name,
            waits as i64 + d,
            tasks[w].name
        ));
    }
    Ok(())
}

impl ReplayTask {
    /// How many of its sleeps wait for task `w` (None for a distribution).
    fn ops_waiting_for(&self, w: usize) -> Option<u64> {
        match &self.body {
            Body::Sequence(ops) => Some(
                ops.iter()
                    .filter(|o| matches!(o, Op::Sleep { by: Waker::Task(x), .. } if *x == w))
                    .count() as u64,
            ),
            Body::Distribution(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn ops_round_trip_through_their_text() {
        let text = r#"
tasks = [
  { name = "t0", comm = "sh", ops = ["run 10", "fork t0.1", "sleep 500ns by t0.1", "sleep 7ns timer"] },
  { name = "t0.1", comm = "cat", parent = "t0", thread = true, ops = ["run 3", "sleep 9ns external", "wake t0"] },
]"#;
        let t = table(text);
        let tasks = parse(&Keys::new("r", "replay", &t)).unwrap();
        assert_eq!(
            tasks[0].body,
            Body::Sequence(vec![
                Op::Run(10),
                Op::Fork(1),
                Op::Sleep {
                    ns: 500,
                    by: Waker::Task(1)
                },
                Op::Sleep {
                    ns: 7,
                    by: Waker::Timer
                },
            ])
        );
        assert!(tasks[1].thread);
        let mut back = toml::Table::new();
        back.insert("tasks".into(), to_table(&tasks));
        let again = parse(&Keys::new("r", "replay", &back)).unwrap();
        assert_eq!(again, tasks);
    }

    #[test]
    fn errors_name_the_key() {
        let e = parse(&Keys::new("r", "replay", &table(""))).unwrap_err();
        assert_eq!(e.key, "workloads.r.tasks");
        let e = parse(&Keys::new(
            "r",
            "replay",
            &table(r#"tasks = [{ name = "t0", ops = ["run x"] }]"#),
        ))
        .unwrap_err();
        assert_eq!(e.key, "workloads.r.tasks[0].ops");
        assert!(
            e.message.contains("\"run x\" is not an op"),
            "{}",
            e.message
        );
        let e = parse(&Keys::new(
            "r",
            "replay",
            &table(r#"tasks = [{ name = "t0", ops = ["wake t9"] }]"#),
        ))
        .unwrap_err();
        assert!(e.message.contains("no task is named \"t9\""), "{e:?}");
        // Unbalanced wake-ups would hang a replay: refused.
        let e = parse(&Keys::new(
            "r",
            "replay",
            &table(r#"tasks = [{ name = "t0", ops = ["sleep 5ns by t0"] }]"#),
        ))
        .unwrap_err();
        assert!(e.message.contains("woken 0 times"), "{e:?}");
        // A task nobody starts.
        let e = parse(&Keys::new(
            "r",
            "replay",
            &table(
                r#"tasks = [{ name = "t0", ops = [] }, { name = "t1", parent = "t0", ops = [] }]"#,
            ),
        ))
        .unwrap_err();
        assert!(e.message.contains("started 0 times"), "{e:?}");
    }

    #[test]
    fn a_distribution_task_needs_its_quantiles() {
        let q: Vec<String> = (0..21).map(|i| i.to_string()).collect();
        let text = format!(
            "tasks = [{{ name = \"t0\", bursts = 5, burst_work = [{}] }}]",
            q.join(",")
        );
        let tasks = parse(&Keys::new("r", "replay", &table(&text))).unwrap();
        assert!(
            matches!(&tasks[0].body, Body::Distribution(d) if d.bursts == 5 && d.sleep_ns.is_empty())
        );
        let e = parse(&Keys::new(
            "r",
            "replay",
            &table(r#"tasks = [{ name = "t0", bursts = 5, burst_work = [1, 2] }]"#),
        ))
        .unwrap_err();
        assert_eq!(e.key, "workloads.r.tasks[0].burst_work");
    }

    #[test]
    fn wake_ups_must_balance_pair_by_pair() {
        let by = |w| Op::Sleep {
            ns: 1,
            by: Waker::Task(w),
        };
        let task = |name: &str, parent, ops| ReplayTask {
            name: name.into(),
            comm: String::new(),
            parent,
            thread: false,
            body: Body::Sequence(ops),
        };
        // t0 waits twice for t0.1, but t0.1 wakes it once and t0.2 once:
        // as many wake-ups in all, not from the partner it waits for.
        let mut tasks = vec![
            task("t0", None, vec![Op::Fork(1), Op::Fork(2), by(1), by(1)]),
            task("t0.1", Some(0), vec![Op::Wake(0)]),
            task("t0.2", Some(0), vec![Op::Wake(0)]),
        ];
        let e = check_tree(&tasks).unwrap_err();
        assert!(
            e.contains("t0 is woken 1 times by t0.1 but waits for 2"),
            "{e}"
        );
        tasks[0].body = Body::Sequence(vec![Op::Fork(1), Op::Fork(2), by(2), by(1)]);
        check_tree(&tasks).unwrap();
    }
}
