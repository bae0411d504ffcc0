#!/usr/bin/env python3
"""scripts/vm/scx-safety-check.py SERIAL_LOG

Judges, for scripts/vm-test, what scripts/vm/scx-safety.sh saw in the guest
(a Linux 6.12 kernel with sched_ext): the safety and failure paths of
matrix.ext_scheduler. Reads the "@@ safety ..." lines and the campaigns'
exports (gzip + base64 blocks) from the serial log, prints what each check
saw, and exits non-zero naming every check that failed:

  levels   tests/fixtures/ext-scheduler-levels.toml (tests/ext_scheduler.rs's
           spec): "none" ok; the program not installed skipped, naming it and
           PATH; the program that exits before loading failed with its exit
           code and output; "sleep 60" (ready_timeout_s 0.5) failed "not
           enabled within 0.5 s"; schedlab's exit 3 (runs failed); no sleep,
           no scheduler program left, sched_ext disabled
  kill9    schedlab SIGKILLed mid-run under scx_simple: scx_simple gone
           (PR_SET_PDEATHSIG), sched_ext disabled and the workers gone, each
           within SETTLE_S; the same command then resumes and finishes, every
           run ok, with scx_simple (switch-all) taking the workers itself
  sigint   SIGINT to schedlab mid-run under scx_simple: exit 130 with the
           "interrupted" note, and when it has exited scx_simple gone,
           sched_ext disabled, no worker
  partial  scx_qmap -p (SCX_OPS_SWITCH_PARTIAL): ok, every worker moved to
           SCHED_EXT by schedlab, none taken by the scheduler itself;
           scx_qmap -p -e 40 (scx_bpf_error) failed "stopped during the run"
           with the kernel's exit reason from the program's output
  wrapped  scx_simple under "sh -c 'scx_simple; echo …'" (a wrapper that
           forks it): both runs ok, and afterwards no scx_simple left and
           sched_ext disabled
"""

import base64
import collections
import csv
import gzip
import io
import json
import re
import sys

# "Within a few seconds": how long the kernel and the PR_SET_PDEATHSIG may
# take to clean up after schedlab is SIGKILLed (a guest under TCG is slow).
SETTLE_S = 5.0
EXIT_RUNS_FAILED = 3
WORKERS = 2  # processes = [2] in every spec of scx-safety.sh


def block(log, name):
    """The rows of the export printed between @@@ safety NAME csv begin/end."""
    begin, end = f"@@@ safety {name} csv begin", f"@@@ safety {name} csv end"
    if begin not in log or end not in log:
        return None
    inner = log[log.index(begin) + 1 : log.index(end)]
    text = gzip.decompress(base64.b64decode("".join(inner))).decode()
    return list(csv.DictReader(io.StringIO(text)))


def runs_of(rows):
    """(ext_scheduler, rep, run) -> that run's rows, in export order."""
    runs = collections.OrderedDict()
    for r in rows:
        runs.setdefault((r["ext_scheduler"], r["rep"], r["run"]), []).append(r)
    return runs


def ext_json(rows):
    """The run's extra_json ext_scheduler object ({} when absent)."""
    try:
        return json.loads(rows[0]["extra_json"] or "{}").get("ext_scheduler") or {}
    except json.JSONDecodeError:
        return {}


def line(log, prefix):
    """The first line starting with "@@ safety PREFIX", without the prefix."""
    for entry in log:
        if entry.startswith("@@ safety " + prefix):
            return entry[len("@@ safety " + prefix) :].strip()
    return None


def lines(log, prefix):
    return [e[len("@@ safety " + prefix) :].strip() for e in log if e.startswith("@@ safety " + prefix)]


def exit_code(text):
    m = re.search(r"exit (\d+)", text or "")
    return int(m.group(1)) if m else None


def check_levels(log, fail):
    rows = block(log, "levels")
    if rows is None:
        fail("levels: the guest printed no export of tests/fixtures/ext-scheduler-levels.toml")
        return
    runs = runs_of(rows)
    names = [k[0] for k in runs]
    want = ["none", "schedlab-no-such-scheduler --flag", "exits", "never-loads"]
    if names != want:
        fail(f"levels: the runs are {names}, not {want}")
        return
    # (status, fragments of the reason), as tests/ext_scheduler.rs expects
    # where a scheduler can load.
    expected = {
        "none": ("ok", []),
        "schedlab-no-such-scheduler --flag": (
            "skipped",
            ['"schedlab-no-such-scheduler" is not installed', "PATH="],
        ),
        "exits": ("failed", ["ended (exit code 3)", "cannot attach: no scheduler here"]),
        "never-loads": ("failed", ["not enabled within 0.5 s"]),
    }
    for (level, _rep, _run), rs in runs.items():
        status, says = expected[level]
        got = {(r["status"], r["reason"]) for r in rs}
        print(f"  levels: {level!r}: {rs[0]['status']}" + (f": {rs[0]['reason']}" if rs[0]["reason"] else ""))
        for st, reason in got:
            if st != status:
                fail(f"levels: {level!r} is {st}, not {status} ({reason or 'no reason'})")
            if level == "none":
                if reason:
                    fail(f"levels: 'none' has a reason: {reason}")
                continue
            key = f'matrix.ext_scheduler = "{level}"'
            for s in [key] + says:
                if s not in reason:
                    fail(f"levels: {level!r}: {s!r} is not in its reason: {reason}")
    if level_rows := [r for r in rows if r["ext_scheduler"] == "none"]:
        if len(level_rows) != WORKERS or any(r["role"] != "worker" for r in level_rows):
            fail(f"levels: 'none' has {len(level_rows)} rows, not {WORKERS} workers")
    head = line(log, "levels:")
    print(f"  levels: schedlab run {head}")
    if exit_code(head) != EXIT_RUNS_FAILED:
        fail(f"levels: schedlab run ended with {head}, not exit {EXIT_RUNS_FAILED} (runs failed)")
    after = line(log, "levels after:")
    print(f"  levels: afterwards {after}")
    if after != "state disabled; sleep processes: []; scheduler programs: []":
        fail(f"levels: after the campaign: {after} (expected sched_ext disabled, no sleep, no scheduler program)")


def seconds_of(text, what):
    m = re.search(what + r" (\d+\.\d+) s", text or "")
    return float(m.group(1)) if m else None


def check_kill9(log, fail):
    killed = line(log, "kill9: SIGKILL")
    if killed is None:
        fail("kill9: schedlab was not killed mid-run: " + " | ".join(lines(log, "kill9")))
        return
    print(f"  kill9: SIGKILL {killed}")
    m = re.search(r"mid-run: state (\S+), scheduler programs \[([^\]]*)\], workers \[([^\]]*)\]", killed)
    if not m or m.group(1) != "enabled" or not m.group(2) or not m.group(3):
        fail(f"kill9: not killed in the middle of a run under scx_simple: {killed}")
    exited = line(log, "kill9: schedlab exit")
    if exit_code("exit " + (exited or "")) != 137:
        fail(f"kill9: schedlab did not die of SIGKILL (exit {exited}, 137 expected)")
    after = line(log, "kill9 after:")
    print(f"  kill9: {after}")
    for what in ("scheduler programs gone", "state disabled", "workers gone"):
        s = seconds_of(after, what)
        if s is None:
            fail(f"kill9: {what}: never within 10 s of the SIGKILL ({after})")
        elif s > SETTLE_S:
            fail(f"kill9: {what} only {s:.2f} s after the SIGKILL (more than {SETTLE_S} s)")
    left = line(log, "kill9 left:")
    if left != "state disabled; scheduler programs []; workers []":
        fail(f"kill9: left after the SIGKILL: {left}")
    for k in lines(log, "kill9 kernel:"):
        print(f"  kill9: kernel: {k}")
    if not any('BPF scheduler "simple" disabled' in k for k in lines(log, "kill9 kernel:")):
        fail("kill9: the kernel did not log scx_simple (\"simple\") disabled after the SIGKILL")
    resume = line(log, "resume:")
    print(f"  kill9: the same command again: {resume}")
    if exit_code(resume) != 0 or not (resume or "").endswith("state disabled"):
        fail(f"kill9: resuming: {resume}; its output: " + " | ".join(lines(log, "resume output:")))
    rows = block(log, "resume")
    if rows is None:
        fail("kill9: the guest printed no export of the resumed campaign")
        return
    runs = runs_of(rows)
    reps = sorted(k[1] for k in runs)
    print(f"  kill9: resumed campaign: {len(runs)} runs (reps {', '.join(reps)}): "
          + ", ".join(f"{rs[0]['status']}" for rs in runs.values()))
    if reps != ["1", "2"]:
        fail(f"kill9: the resumed campaign holds reps {reps}, not 1 and 2")
    for (level, rep, _run), rs in runs.items():
        bad = [r for r in rs if r["status"] != "ok"]
        if bad:
            fail(f"kill9: resumed run of {level}, rep {rep} is {bad[0]['status']}: {bad[0]['reason']}")
        x = ext_json(rs)
        print(f"  kill9: rep {rep}: ops {x.get('ops')!r}, load {x.get('load_ms', 0):.0f} ms, "
              f"workers taken {x.get('workers_taken')}, moved to SCHED_EXT {x.get('workers_moved_to_sched_ext')}, "
              f"unloaded {x.get('unloaded')}")
        # scx_simple is in switch-all mode: it takes every fair worker itself.
        if (x.get("ops"), x.get("workers_taken"), x.get("workers_moved_to_sched_ext")) != ("simple", WORKERS, 0):
            fail(f"kill9: scx_simple (switch-all), rep {rep}: ops {x.get('ops')!r}, workers_taken "
                 f"{x.get('workers_taken')}, workers_moved_to_sched_ext {x.get('workers_moved_to_sched_ext')} "
                 f"(expected simple, {WORKERS}, 0)")


def check_sigint(log, fail):
    sent = line(log, "sigint: SIGINT")
    if sent is None:
        fail("sigint: SIGINT was not sent mid-run: " + " | ".join(lines(log, "sigint")))
        return
    print(f"  sigint: SIGINT {sent}")
    if "mid-run: state enabled, scheduler programs [" not in sent or sent.endswith("[]"):
        fail(f"sigint: not sent in the middle of a run under scx_simple: {sent}")
    exited = line(log, "sigint: schedlab exit")
    print(f"  sigint: schedlab exit {exited}")
    if exit_code("exit " + (exited or "")) != 130:
        fail(f"sigint: schedlab exit {exited} (130 expected: interrupted by SIGINT)")
    if not (exited or "").endswith("then state disabled; scheduler programs []; workers []"):
        fail(f"sigint: when schedlab had exited: {exited}")
    output = " | ".join(lines(log, "sigint output:"))
    print(f"  sigint: its output: {output}")
    if "interrupted by SIGINT" not in output:
        fail(f"sigint: schedlab did not say it was interrupted: {output}")
    if not any('BPF scheduler "simple" disabled' in k for k in lines(log, "sigint kernel:")):
        fail("sigint: the kernel did not log scx_simple (\"simple\") disabled")


def check_partial(log, fail):
    head = line(log, "partial:")
    print(f"  partial: schedlab run {head}")
    if exit_code(head) != EXIT_RUNS_FAILED or not (head or "").endswith("state disabled; scheduler programs []"):
        fail(f"partial: schedlab run {head} (expected exit {EXIT_RUNS_FAILED}: qmap-error failed; "
             "then sched_ext disabled, no scheduler program)")
    rows = block(log, "partial")
    if rows is None:
        fail("partial: the guest printed no export of the partial-mode campaign")
        return
    runs = {k[0]: rs for k, rs in runs_of(rows).items()}
    if sorted(runs) != ["qmap-error", "qmap-partial"]:
        fail(f"partial: the runs are {sorted(runs)}, not qmap-partial and qmap-error")
        return
    p = runs["qmap-partial"]
    x = ext_json(p)
    print(f"  partial: qmap-partial (scx_qmap -p): {p[0]['status']}{': ' + p[0]['reason'] if p[0]['reason'] else ''}; "
          f"ops {x.get('ops')!r}, load {x.get('load_ms', 0):.0f} ms, workers taken {x.get('workers_taken')}, "
          f"moved to SCHED_EXT {x.get('workers_moved_to_sched_ext')}, unloaded {x.get('unloaded')}")
    if any(r["status"] != "ok" for r in p):
        fail(f"partial: qmap-partial is {p[0]['status']}: {p[0]['reason']}")
    if (x.get("ops"), x.get("workers_taken"), x.get("workers_moved_to_sched_ext")) != ("qmap", 0, WORKERS):
        fail(f"partial: scx_qmap -p: ops {x.get('ops')!r}, workers_taken {x.get('workers_taken')}, "
             f"workers_moved_to_sched_ext {x.get('workers_moved_to_sched_ext')} (expected qmap, 0, {WORKERS})")
    print(f"  partial: the workers' recorded policy: {', '.join(r['process_policy'] for r in p)}")
    e = runs["qmap-error"]
    print(f"  partial: qmap-error (scx_qmap -p -e 40): {e[0]['status']}: {e[0]['reason']}")
    for k in lines(log, "partial kernel:"):
        print(f"  partial: kernel: {k}")
    if e[0]["status"] != "failed":
        fail(f"partial: qmap-error is {e[0]['status']}, not failed")
    for s in ('matrix.ext_scheduler = "qmap-error" stopped during the run', "test triggering error"):
        if s not in e[0]["reason"]:
            fail(f"partial: qmap-error: {s!r} is not in its reason: {e[0]['reason']}")


def check_wrapped(log, fail):
    head = line(log, "wrapped:")
    print(f"  wrapped: schedlab run {head}")
    if exit_code(head) != 0 or not (head or "").endswith("state disabled; scheduler programs []"):
        fail(f"wrapped: schedlab run {head} (expected exit 0, then sched_ext disabled and no scx_simple left); "
             "its output: " + " | ".join(lines(log, "wrapped output:")))
    rows = block(log, "wrapped")
    if rows is None:
        fail("wrapped: the guest printed no export of the wrapper campaign")
        return
    for (_level, rep, _run), rs in runs_of(rows).items():
        x = ext_json(rs)
        print(f"  wrapped: rep {rep}: {rs[0]['status']}{': ' + rs[0]['reason'] if rs[0]['reason'] else ''}; "
              f"ops {x.get('ops')!r}, program {x.get('exit')}, unloaded {x.get('unloaded')}")
        if rs[0]["status"] != "ok" or x.get("unloaded") is not True:
            fail(f"wrapped: rep {rep} is {rs[0]['status']} ({rs[0]['reason'] or 'no reason'}), "
                 f"sched_ext disabled after it stopped the program: {x.get('unloaded')}")


def main(log_path):
    log = open(log_path, encoding="utf-8", errors="replace").read().splitlines()
    failures = []
    for name, check in (
        ("levels", check_levels),
        ("kill9", check_kill9),
        ("sigint", check_sigint),
        ("partial", check_partial),
        ("wrapped", check_wrapped),
    ):
        before = len(failures)
        check(log, failures.append)
        print(f"safety {name}: {'ok' if len(failures) == before else 'FAILED'}")
    took = line(log, "took")
    if took:
        print(f"safety checks: {took}")
    return failures


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[0])
    problems = main(sys.argv[1])
    if problems:
        print("vm-test: the sched_ext safety checks: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)
