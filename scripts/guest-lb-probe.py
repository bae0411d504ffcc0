#!/usr/bin/env python3
"""Summarise a scripts/guest-lb-probe console log: the guest's knobs, its
/proc/schedstat balancing counters over the hogs' window (per domain and
idle type, schedstat version 16/17 field order), each hog's /proc/PID/sched
counters, and from the sched_switch trace the hogs' turns (time between two
switches on a CPU, the outgoing task a hog still runnable) and migrations.

Usage: scripts/guest-lb-probe.py LOG [--dump-trace FILE]
"""
import base64
import collections
import gzip
import re
import statistics
import sys

LB_FIELDS = ["lb_count", "lb_balanced", "lb_failed", "lb_imbalance", "lb_gained",
             "lb_hot_gained", "lb_nobusyq", "lb_nobusyg"]
# Version 16 (6.12): __CPU_NOT_IDLE = 0, CPU_IDLE, CPU_NEWLY_IDLE.
IDLE_TYPES = ["busy", "idle", "newidle"]


def sections(lines):
    cur, out = None, collections.defaultdict(list)
    for l in lines:
        if l.startswith("PROBE "):
            cur = l[6:].strip()
            out[cur]  # noqa: B018, create
            continue
        if cur is not None:
            out[cur].append(l)
    return out


def schedstat(lines):
    doms, cpu = {}, None
    for l in lines:
        f = l.split()
        if not f:
            continue
        if f[0].startswith("cpu"):
            cpu = f[0]
        elif f[0].startswith("domain") and cpu:
            doms[(cpu, f[0])] = [int(x) for x in f[2:]]
    return doms


def main():
    log = sys.argv[1]
    text = open(log, "rb").read().decode("utf-8", "replace").replace("\r", "")
    lines = text.split("\n")
    secs = sections(lines)
    for l in lines:
        if l.startswith("PROBE kernel") or l.startswith("PROBE knob"):
            print(l[6:])
    before = schedstat(secs.get("schedstat-before", []))
    after = schedstat(secs.get("schedstat-after", []))
    tot = collections.Counter()
    print("\n/proc/schedstat over the window (after - before):")
    for key in sorted(after):
        d = [a - b for a, b in zip(after[key], before.get(key, [0] * len(after[key])))]
        parts = []
        for t, name in enumerate(IDLE_TYPES):
            v = dict(zip(LB_FIELDS, d[8 * t:8 * t + 8]))
            for k, x in v.items():
                tot[(name, k)] += x
            if v["lb_count"]:
                parts.append(f"{name}: " + " ".join(f"{k[3:]}={x}" for k, x in v.items()))
        alb = d[24:27]
        tot[("alb", "count")] += alb[0]
        tot[("alb", "pushed")] += alb[2]
        print(f"  {key[0]} {key[1]}: " + "; ".join(parts) + f"; alb count/failed/pushed={alb}")
    for name in IDLE_TYPES:
        if tot[(name, "lb_count")]:
            print(f"  all CPUs, {name}: " + " ".join(
                f"{k[3:]}={tot[(name, k)]}" for k in LB_FIELDS))
    hogs = {}
    for sec, body in secs.items():
        m = re.match(r"sched (\d+)$", sec)
        if not m:
            continue
        kv = {}
        for l in body:
            mm = re.match(r"^([\w.>-]+)\s*:\s*(-?[\d.]+)\s*$", l)
            if mm:
                kv[mm.group(1)] = float(mm.group(2))
        hogs[int(m.group(1))] = kv
    keys = ["se.sum_exec_runtime", "se.nr_migrations", "nr_involuntary_switches",
            "nr_failed_migrations_hot", "nr_failed_migrations_running",
            "nr_failed_migrations_affine", "nr_forced_migrations", "nr_migrations_cold",
            "wait_count", "slice_max", "se.slice", "se.avg.load_avg"]
    print("\nper hog (/proc/PID/sched):")
    print("  pid " + " ".join(k.split(".")[-1] for k in keys))
    for pid, kv in sorted(hogs.items()):
        print(f"  {pid} " + " ".join(f"{kv.get(k, float('nan')):g}" for k in keys))
    if hogs:
        n = len(hogs)
        for k in ["se.nr_migrations", "nr_involuntary_switches"]:
            print(f"  mean {k}: {sum(h.get(k, 0) for h in hogs.values()) / n:.2f}")
    body = secs.get("trace-gz-base64", [])
    if body:
        raw = gzip.decompress(base64.b64decode("".join(body)))
        trace = raw.decode("utf-8", "replace")
        if len(sys.argv) > 3 and sys.argv[2] == "--dump-trace":
            open(sys.argv[3], "w").write(trace)
        turns(trace, set(hogs))
        passes(trace)
        pelt(trace, set(hogs))


def turns(trace, hogs):
    last = {}
    lens = collections.Counter()
    migr = 0
    for l in trace.split("\n"):
        m = re.search(r"\[(\d+)\]\s+\S+\s+([\d.]+): sched_switch: .*prev_pid=(\d+) .*"
                      r"prev_state=(\S+) ==> .*next_pid=(\d+)", l)
        if m:
            cpu, ts, prev, state, nxt = int(m.group(1)), float(m.group(2)), int(m.group(3)), \
                m.group(4), int(m.group(5))
            if prev in hogs and cpu in last and last[cpu][1] == prev and state.startswith("R"):
                lens[round((ts - last[cpu][0]) * 1000)] += 1
            last[cpu] = (ts, nxt)
            continue
        m = re.search(r"sched_migrate_task: .*pid=(\d+)", l)
        if m and int(m.group(1)) in hogs:
            migr += 1
    if lens:
        vals = list(lens.elements())
        print(f"\nhogs' turns ending preempted (trace): {len(vals)}, median "
              f"{statistics.median(vals)} ms; by ms: "
              + " ".join(f"{k}:{v}" for k, v in sorted(lens.items())))
    print(f"hogs' migrations in the trace: {migr}")


def passes(trace):
    """With scripts/guest-lb-probe.kprobes: each busy balancing pass that
    weighed a task, by the domain's nr_balance_failed at its start, with
    lb_env's imbalance and whether a hog moved."""
    cur, rows = {}, []
    for l in trace.split("\n"):
        m = re.search(r"\[(\d+)\].*?([\d.]+): (lbfsg|lbcm|sched_migrate_task)(.*)", l)
        if not m:
            continue
        cpu, kind, rest = int(m.group(1)), m.group(3), m.group(4)
        if kind == "lbfsg":
            if cur.get(cpu) and cur[cpu][1] is not None:
                rows.append(tuple(cur[cpu]))
            cur[cpu] = [int(re.search(r"failed=(\d+)", rest).group(1)), None, 0]
        elif kind == "lbcm" and cpu in cur:
            cur[cpu][1] = int(re.search(r"imb=(-?\d+)", rest).group(1))
        elif kind == "sched_migrate_task" and "comm=sh" in rest and cpu in cur:
            cur[cpu][2] += 1
    rows += [tuple(v) for v in cur.values() if v[1] is not None]
    if not rows:
        return
    print("\nbalancing passes that weighed a task (kprobes), by nr_balance_failed:")
    for f in sorted({r[0] for r in rows}):
        sel = [r for r in rows if r[0] == f]
        moved = sorted(r[1] for r in sel if r[2])
        refused = sorted(r[1] for r in sel if not r[2])
        print(f"  failed={f}: {len(sel)} passes, {len(moved)} moved; imbalance when moved "
              f"{moved}, when not {refused}")


def pelt(trace, hogs):
    """With the kprobes' lbpelt line: the PELT loads the balancer weighed.
    Each hog's load_avg, and each CPU's beyond its whole hogs (the load of
    other tasks: the probe's shell, kernel threads), which moves the
    imbalance off the multiple of half a hog that the hogs alone give."""
    rows = []
    for l in trace.split("\n"):
        m = re.search(r": lbpelt: .*pid=(\d+) tload=(\d+) tutil=\d+ env_imbalance=(-?\d+) "
                      r"mtype=(\d+) srcload=(\d+) dstload=(\d+)", l)
        if m:
            rows.append(tuple(int(x) for x in m.groups()))
    if not rows:
        return
    hog = collections.Counter(r[1] for r in rows if r[0] in hogs)
    other = collections.Counter((r[0], r[1]) for r in rows if r[0] not in hogs)
    print("\nPELT as the balancer weighed it (kprobes, lbpelt):")
    print(f"  hogs' load_avg: {dict(hog)}; other tasks weighed (pid, load_avg): {dict(other)}")
    print(f"  migration types (0 load, 1 util, 2 task, 3 misfit): "
          f"{dict(collections.Counter(r[3] for r in rows))}")
    extra = [(r[4] % 1024 if r[4] % 1024 < 512 else r[4] % 1024 - 1024,
              r[5] % 1024 if r[5] % 1024 < 512 else r[5] % 1024 - 1024) for r in rows]
    whole = sum(1 for e in extra if abs(e[0]) <= 1 and abs(e[1]) <= 1)
    print(f"  {len(rows)} tasks weighed; source and destination within 1 of whole "
          f"hogs in {whole}; off by (src, dst): {sorted(set(extra))}")


if __name__ == "__main__":
    main()
