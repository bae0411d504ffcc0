#!/usr/bin/env python3
"""scripts/vm/v2-command-check.py SERIAL_LOG

Judges, for scripts/vm-test, what scripts/vm/v2-command.sh saw in the guest:
command workloads (kind = "command") on a pure cgroup-v2 machine. Reads the
"@@ v2 ..." lines and the campaign's export (gzip + base64 between
"@@@ v2 csv begin/end") from the serial log, prints what each check saw, and
exits non-zero naming every check that failed:

  machine   cgroup2 mounted and no v1 hierarchy; every controller of cpu,
            memory and pids the root offers enabled in its subtree_control
  campaign  schedlab's exit 0; 8 runs (OTHER and FIFO × fork2 and daemon × 2
            repetitions), each ok with one worker
  groups    a session parent schedlab.* and worker groups under it, with
            cgroup.kill and cpu.stat; each run's top process and each daemon
            seen in a worker group (the observer on CPU 1)
  fork2     the tree's CPU (cpu.stat usage) against the sum of what its three
            tasks read of their own run time (the children before they
            ended, the top shell from its start to its end; within 10 % +
            100 ms, never less); user + system against usage
  daemon    stopped by schedlab at duration_s; its wall time at least
            duration_s + grace_s (the daemon ignores SIGTERM, so the tree
            ends only at the SIGKILL: cgroup.kill); the tree's CPU over its
            wall time that of one busy CPU (the daemon's spinning counted)
  figures   by what the kernel was built with (its /proc/config.gz): tasks
            (3 per tree), run-queue wait and time slices with CONFIG_TASKSTATS,
            cpu.pressure with CONFIG_PSI, memory.peak with CONFIG_MEMCG; each
            absent one empty (an empty cell, never 0) and named, with a
            reason, in the run's extra_json command.missing, and the
            report's per-condition tables say, for every condition, that
            its switches, run-queue wait and time slices were not given and
            why; the CPU figures never missing
  leftovers no daemon alive, no schedlab group under /sys/fs/cgroup, no
            cgroup journal
"""

import csv
import io
import json
import re
import sys

from serial_log import Checks, gz_block, lines_of, one

POLICIES = ("other", "fifo")
WORKLOADS = ("fork2", "daemon")
REPS = 2
RUNS = len(POLICIES) * len(WORKLOADS) * REPS
# The daemon workload's duration_s and grace_s in v2-command.sh.
DURATION_S, GRACE_S = 1.0, 0.3
# Tasks of each tree: fork2's shell and its two children; daemon's shell
# (become sleep), the subshell that forks the daemon, and the daemon.
TASKS = 3
# What the tasks' own readings miss: the worker's steps from the barrier to
# the exec and the shell's start-up before the top's first reading, and
# each task's writing a line and exiting after its last: 20-35 ms under TCG,
# up to ~150 ms when the host is loaded. A child counted twice would add
# ~45 % (two equal children), one not counted makes the gap negative.
SELF_SLACK_FRACTION, SELF_SLACK_NS = 0.10, 100e6
# One busy CPU: the daemon spins on CPU 0 from release to the SIGKILL (under
# FIFO, RT throttling leaves 5 % to others; the guest's own work on CPU 0).
BUSY_RANGE = (0.85, 1.05)


def block(log):
    data = gz_block(log, "v2 csv")
    if data is None:
        return None
    return list(csv.DictReader(io.StringIO(data.decode())))


def num(row, col):
    v = row.get(col, "")
    return None if v in ("", None) else float(v)


def bracketed(text):
    m = re.search(r"\[([^\]]*)\]", text or "")
    return m.group(1).split() if m else None


def machine(c, log):
    mounts = one(log, "@@ v2 mounts: ") or ""
    m = re.match(r"cgroup2 (\d+), cgroup v1 (\d+)", mounts)
    c.check("machine: cgroup2 only", bool(m) and int(m[1]) >= 1 and int(m[2]) == 0, mounts)
    root = one(log, "@@ v2 root: ") or ""
    parts = re.findall(r"\[([^\]]*)\]", root)
    offered, enabled = parts if len(parts) == 2 else ("", "")
    wanted = [x for x in ("cpu", "memory", "pids") if x in offered.split()]
    c.check(
        "machine: the root's controllers enabled",
        len(parts) == 2 and all(x in enabled.split() for x in wanted),
        root,
    )
    config = {}
    for line in lines_of(log, "@@ v2 config: "):
        k, _, v = line.partition("=")
        config[k] = v == "y"
    return config


def command_extra(row):
    try:
        programs = json.loads(row["extra_json"]).get("command") or []
    except (ValueError, KeyError):
        return {}
    return programs[0] if programs else {}


def campaign(c, log, rows):
    head = one(log, "@@ v2 campaign: ") or "(no campaign line)"
    out = " | ".join(lines_of(log, "@@ v2 campaign output: "))
    c.check("campaign: exit 0", head.startswith("exit 0 "), head + (f" ({out})" if out else ""))
    if rows is None:
        c.check("campaign: export", False, "no @@@ v2 csv block")
        return []
    workers = [r for r in rows if r.get("role") == "worker"]
    runs = {(r["policy"], r["workload"], r["rep"]) for r in workers}
    c.check(
        f"campaign: {RUNS} runs of one worker",
        len(workers) == RUNS and len(runs) == RUNS
        and {p for p, _, _ in runs} == set(POLICIES)
        and {w for _, w, _ in runs} == set(WORKLOADS),
        f"{len(workers)} worker rows, {len(runs)} runs: {sorted(runs)}",
    )
    bad = [f"{r['policy']}/{r['workload']}#{r['rep']} {r['status']} {r['reason']}" for r in workers
           if r["status"] != "ok"]
    c.check("campaign: every run ok", not bad, "; ".join(bad) or "all ok")
    return workers


def groups(c, log, workers):
    watched = lines_of(log, "@@ v2 watch: ")
    parents = [w for w in watched if re.fullmatch(r"group schedlab\.\d+\.\d+\.[0-9a-f]+", w)]
    kids = [w for w in watched if re.fullmatch(r"group schedlab\.[^/ ]+/\S+\.w0", w)]
    c.check("groups: a session parent and worker groups", bool(parents) and bool(kids),
            f"{len(parents)} parent(s), worker groups {sorted({k.split('/')[-1] for k in kids})}")
    files_line = next((w for w in watched if w.startswith("worker group files")), "")
    files = bracketed(files_line) or []
    c.check("groups: a worker group has cgroup.kill and cpu.stat",
            "cgroup.kill" in files and "cpu.stat" in files, files_line or "(never seen)")
    seen = {int(m[1]) for w in watched if (m := re.match(r"pid (\d+) in ", w))}
    tops = {int(float(r["pid"])) for r in workers if r.get("pid")}
    c.check("groups: each run's top process seen in its worker group",
            len(tops) == RUNS and tops <= seen, f"top pids {sorted(tops)}, unseen {sorted(tops - seen)}")
    daemons = [int(p) for p in bracketed(one(log, "@@ v2 daemons: ")) or []]
    c.check("groups: each daemon seen in a worker group (accounted after double-forking away)",
            len(daemons) == RUNS // 2 and set(daemons) <= seen,
            f"daemons {daemons}, unseen {sorted(set(daemons) - seen)}")
    return files


def fork2(c, rows):
    if not rows:
        c.check("fork2: runs", False, "no fork2 run in the export")
    for r in rows:
        name = f"fork2 {r['policy']}#{r['rep']}"
        tree, own = num(r, "run_ns"), num(r, "fig_self_ns")
        if tree is None or own is None or own <= 0:
            c.check(f"{name}: tree CPU against the tasks' own", False, f"run_ns {tree}, fig_self_ns {own}")
            continue
        gap = tree - own
        c.check(
            f"{name}: tree CPU against the tasks' own",
            0 <= gap <= SELF_SLACK_FRACTION * own + SELF_SLACK_NS,
            f"cpu.stat usage {tree / 1e6:.1f} ms, the tasks' own sum {own / 1e6:.1f} ms "
            f"(gap {gap / 1e6:+.1f} ms; the top's CPU before its first reading, its "
            f"worker's start-up included: {(num(r, 'fig_top_start_ns') or 0) / 1e6:.1f} ms)",
        )
        user_sys_ns = ((num(r, "utime_us") or 0) + (num(r, "stime_us") or 0)) * 1e3
        c.check(
            f"{name}: user + system against usage",
            abs(user_sys_ns - tree) <= 0.05 * tree + 20e6,
            f"user+system {user_sys_ns / 1e6:.1f} ms, usage {tree / 1e6:.1f} ms",
        )


def daemon(c, rows, log):
    trace = lines_of(log, "@@ v2 trace: ")
    if not rows:
        c.check("daemon: runs", False, "no daemon run in the export")
    for r in rows:
        name = f"daemon {r['policy']}#{r['rep']}"
        x = command_extra(r)
        wall, cpu = num(r, "wall_ns"), num(r, "run_ns")
        c.check(f"{name}: stopped by schedlab at duration_s", x.get("stopped_by_schedlab") is True,
                f"stopped_by_schedlab {x.get('stopped_by_schedlab')}, top {x.get('top_exit')}")
        floor_ns = (DURATION_S + GRACE_S) * 1e9
        ended_ok = wall is not None and floor_ns * 0.97 <= wall <= floor_ns + 2e9
        top = r.get("pid", "").split(".")[0]
        mine = [t for t in trace if t.split()[0] == top]
        c.check(
            f"{name}: the tree ended at the SIGKILL after grace_s",
            ended_ok,
            f"wall {None if wall is None else f'{wall / 1e6:.0f} ms'} "
            f"(duration_s + grace_s = {floor_ns / 1e6:.0f} ms)"
            + ("" if ended_ok else f"; the top's trace (pid, what, uptime): {mine}; all: {trace}"),
        )
        if wall and cpu is not None:
            share = cpu / wall
            c.check(f"{name}: tree CPU of one busy CPU (the daemon counted)",
                    BUSY_RANGE[0] <= share <= BUSY_RANGE[1],
                    f"cpu.stat usage {cpu / 1e6:.0f} ms over wall {wall / 1e6:.0f} ms = {share:.2f}")
        else:
            c.check(f"{name}: tree CPU of one busy CPU (the daemon counted)", False,
                    f"run_ns {cpu}, wall_ns {wall}")


def figures(c, config, workers, files, log):
    if not workers:
        c.check("figures", False, "no run in the export to read them from")
        return
    # figure name in `missing`, its column, what the kernel needs, the
    # file a worker group shows when it has it, the words its reason holds
    optional = [
        ("tasks", "fig_tree_tasks", "CONFIG_TASKSTATS", None, "taskstats"),
        ("run_queue_wait_ns", "wait_ns", "CONFIG_TASKSTATS", None, "taskstats"),
        ("timeslices", "timeslices", "CONFIG_TASKSTATS", None, "taskstats"),
        ("cpu_pressure_some_us", "fig_tree_cpu_pressure_some_us", "CONFIG_PSI", "cpu.pressure",
         "pressure"),
        ("peak_memory_bytes", "maxrss_kb", "CONFIG_MEMCG", "memory.peak", "memory.peak"),
        ("voluntary_switches", "nvcsw", "CONFIG_TASKSTATS", None, "taskstats"),
        ("involuntary_switches", "nivcsw", "CONFIG_TASKSTATS", None, "taskstats"),
        ("minor_faults", "minflt", "CONFIG_TASKSTATS", None, "taskstats"),
        ("major_faults", "majflt", "CONFIG_TASKSTATS", None, "taskstats"),
    ]
    # The report's metric of a column, by its label in the report.
    report_labels = {
        "nvcsw": "voluntary context switches",
        "nivcsw": "involuntary context switches",
        "wait_ns": "run-queue wait",
        "timeslices": "time slices",
    }
    report = lines_of(log, "@@ v2 report: ")
    report_done = one(log, "@@ v2 report done") is not None
    conditions = len(POLICIES) * len(WORKLOADS)
    # Figures that may be 0 when present.
    may_be_zero = {"nivcsw", "majflt", "fig_tree_cpu_pressure_some_us"}
    for missing_name, col, option, file, words in optional:
        has = config.get(option)
        if has is None:
            c.check(f"figures: {missing_name}", False, f"the guest did not say whether {option} is set")
            continue
        problems = []
        for r in workers:
            name = f"{r['workload']} {r['policy']}#{r['rep']}"
            missing = command_extra(r).get("missing") or {}
            v = num(r, col)
            if has:
                if missing_name in missing or v is None or (v <= 0 and col not in may_be_zero):
                    problems.append(f"{name}: {col} {v}, missing says {missing.get(missing_name)!r}")
                elif missing_name == "tasks" and v != TASKS:
                    problems.append(f"{name}: {v:.0f} tasks, not {TASKS}")
            else:
                why = missing.get(missing_name, "")
                if v is not None or words not in why:
                    problems.append(f"{name}: {col} {v}, missing says {why!r}")
        if has and file is not None and file not in files:
            problems.append(f"a worker group has no {file}")
        if not has and file is not None and file in files:
            problems.append(f"a worker group has {file}, yet {option} is not set")
        label = report_labels.get(col)
        if not has and label is not None:
            said = [x for x in report if f": {label}: not given for any of its " in x and words in x]
            if not report_done:
                problems.append("the report was not made: " + " | ".join(lines_of(log, "@@ v2 report failed: ")))
            elif len(said) != conditions:
                problems.append(f"the report says {label} not given ({words}) for {len(said)} of "
                                f"{conditions} conditions")
        seen = "present in every run" if has else f"empty and named in missing ({option} not set)"
        if not has and col in report_labels:
            seen += ", and in the report"
        c.check(f"figures: {missing_name}", not problems, "; ".join(problems[:3]) or seen)
    problems = []
    for r in workers:
        missing = command_extra(r).get("missing") or {}
        gone = [k for k in ("cpu_usage_ns", "cpu_user_ns", "cpu_system_ns") if k in missing]
        if gone or num(r, "run_ns") is None:
            problems.append(f"{r['workload']} {r['policy']}#{r['rep']}: missing {gone}")
    c.check("figures: cpu.stat usage, user and system", not problems,
            "; ".join(problems) or "present in every run")


def leftovers(c, log):
    for prefix, what in (("@@ v2 daemons: ", "daemons"), ("@@ v2 groups left: ", "groups"),
                         ("@@ v2 journals left: ", "journals")):
        line = one(log, prefix)
        if what == "daemons":
            m = re.search(r"alive \[([^\]]*)\]", line or "")
            ok = bool(m) and not m[1].split()
        else:
            left = bracketed(line)
            ok = left is not None and not left
        c.check(f"leftovers: {what}", ok, line or "(not reported)")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], errors="replace") as f:
        log = f.read().splitlines()
    c = Checks()
    print("v2 command campaign (pure cgroup v2):")
    config = machine(c, log)
    built = ", ".join(f"{k}={'y' if v else 'n'}" for k, v in config.items())
    print(f"  kernel: {built}")
    workers = campaign(c, log, block(log))
    files = groups(c, log, workers)
    fork2(c, [r for r in workers if r["workload"] == "fork2"])
    daemon(c, [r for r in workers if r["workload"] == "daemon"], log)
    figures(c, config, workers, files, log)
    leftovers(c, log)
    if c.failed:
        print(f"v2 command checks failed: {', '.join(c.failed)}", file=sys.stderr)
        sys.exit(1)
    print("v2 command checks: all passed")


if __name__ == "__main__":
    main()
