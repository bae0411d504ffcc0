#!/usr/bin/env python3
"""scripts/vm/wrr-tree-check.py SERIAL_LOG

Judges, for scripts/vm-test, what scripts/vm/wrr-tree.sh saw in the guest:
schedlab's WRR as a sched_ext scheduler (wrr.mechanism = "ext") over two
command workers of weights 1 and 3 on CPU 0, each a shell forking two
CPU-bound children. Reads the campaign's database (gzip + base64 between
"@@@ wrr-tree db begin/end") from the serial log, prints each run's shares
and exits non-zero naming every check that failed:

  campaign  schedlab's exit 0; 3 runs, each ok under the ext mechanism (not
            a fallback), with two workers of weights 1 and 3
  shares    each worker's share of the two trees' CPU time, from their
            cgroups (processes.run_ns: cpu.stat usage since the release),
            within BOUND of its weight's (0.25, 0.75)
  turns     the scheduler recorded turns under each worker's pid (more
            than 5), and the CPU time of those turns is the tree's: at
            least TURN_FLOOR of the cgroup's (were only the shell in the
            turns, its children's CPU would be missing from them)
  leftovers no group of schedlab's left under /sys/fs/cgroup (a group
            with a process of a tree in it cannot be removed)

The shares' bound: the last, partial round can move a share by up to a
round (quantum x (1 + 3) = 40 ms) over the CPU the trees had, plus
EXTRA_POINTS for what schedlab does in the tree's cgroup around the turns
(the worker's steps from the release to the exec: 20-35 ms under TCG, the
same in both trees, which pulls the shares towards one half).
"""

import json
import os
import sqlite3
import sys
import tempfile

from serial_log import Checks, gz_block, lines_of

RUNS = 3
WEIGHTS = (1, 3)
QUANTUM_NS = 10e6
ROUND_NS = QUANTUM_NS * sum(WEIGHTS)
EXTRA_POINTS = 0.02
MIN_TURNS = 5
TURN_FLOOR = 0.9


def database(log, path):
    data = gz_block(log, "wrr-tree db")
    if data is None:
        return False
    with open(path, "wb") as f:
        f.write(data)
    return True


def runs_of(c, conn):
    runs = conn.execute("SELECT id, rep, status, reason, extra_json FROM runs ORDER BY rep").fetchall()
    c.check(f"campaign: {RUNS} runs", len(runs) == RUNS, f"{len(runs)} runs")
    good = []
    for run_id, rep, status, reason, extra in runs:
        try:
            mechanism = json.loads(extra).get("wrr", {}).get("mechanism")
        except ValueError:
            mechanism = None
        ok = status == "ok" and mechanism == "ext"
        c.check(f"campaign: run {rep} ok under ext", ok,
                f"status {status}{' (' + reason + ')' if reason else ''}, mechanism {mechanism}")
        if ok:
            good.append((run_id, rep))
    return good


def shares(c, conn, run_id, rep):
    workers = conn.execute(
        "SELECT process_index, pid, weight, run_ns FROM processes "
        "WHERE run_id = ? AND role = 'worker' ORDER BY weight",
        (run_id,),
    ).fetchall()
    weights = tuple(w for _, _, w, _ in workers)
    if weights != WEIGHTS or any(ns is None or ns <= 0 for _, _, _, ns in workers):
        c.check(f"run {rep}: two workers of weights 1 and 3 with their trees' CPU", False,
                f"workers {workers}")
        return
    cpu_ns = sum(ns for _, _, _, ns in workers)
    bound = ROUND_NS / cpu_ns + EXTRA_POINTS
    total_weight = sum(WEIGHTS)
    got = []
    for index, pid, weight, ns in workers:
        share = ns / cpu_ns
        ideal = weight / total_weight
        got.append(f"weight {weight}: {share:.4f} ({ns / 1e6:.0f} ms)")
        c.check(f"run {rep}: weight {weight}'s share of the trees' cgroup CPU",
                abs(share - ideal) <= bound,
                f"{share:.4f} against {ideal:.2f} (bound ±{bound:.4f}: a round {ROUND_NS / 1e6:.0f} ms "
                f"over {cpu_ns / 1e6:.0f} ms + {EXTRA_POINTS:.2f})")
        turns, turn_ns = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(cpu_ns), 0) FROM slices WHERE run_id = ? AND process_index = ?",
            (run_id, index),
        ).fetchone()
        c.check(f"run {rep}: weight {weight}'s turns hold its tree's CPU",
                turns > MIN_TURNS and turn_ns >= TURN_FLOOR * ns,
                f"{turns} turns under pid {pid} with {turn_ns / 1e6:.0f} ms of CPU, "
                f"the tree's cgroup {ns / 1e6:.0f} ms ({turn_ns / ns:.3f})")
    print(f"  shares run {rep}: " + ", ".join(got))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], errors="replace") as f:
        log = f.read().splitlines()
    c = Checks()
    print("WRR under sched_ext over command trees (weights 1:3, CPU 0):")
    head = (lines_of(log, "@@ wrr-tree campaign: ") or ["(no campaign line)"])[0]
    out = " | ".join(lines_of(log, "@@ wrr-tree campaign output: "))
    c.check("campaign: exit 0", head.startswith("exit 0 "), head + (f" ({out})" if out else ""))
    left = (lines_of(log, "@@ wrr-tree groups left: ") or ["(not reported)"])[0]
    c.check("leftovers: no group left", left == "[]", left)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "wrr-tree.db")
        if not database(log, path):
            c.check("campaign: database", False, "no @@@ wrr-tree db block")
        else:
            conn = sqlite3.connect(path)
            for run_id, rep in runs_of(c, conn):
                shares(c, conn, run_id, rep)
            conn.close()
    if c.failed:
        print(f"wrr-tree checks failed: {', '.join(c.failed)}", file=sys.stderr)
        sys.exit(1)
    print("wrr-tree checks: all passed")


if __name__ == "__main__":
    main()
