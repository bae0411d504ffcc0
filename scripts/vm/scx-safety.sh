#!/bin/busybox sh
# scripts/vm/scx-safety.sh: in the guest of scripts/vm-test (a Linux 6.12
# kernel with sched_ext), the safety and failure paths of matrix.ext_scheduler
# that need a real sched_ext kernel. Prints "@@ safety ..." lines and the
# campaigns' exports (gzip + base64 between "@@@ safety NAME csv begin/end")
# for scripts/vm/scx-safety-check.py, which judges them on the host.
#
#   levels   tests/fixtures/ext-scheduler-levels.toml (the spec of
#            tests/ext_scheduler.rs): "none" ok, a program not installed
#            skipped, one that exits before loading failed, one that never
#            loads (sleep 60, ready_timeout_s 0.5) failed, and its sleep gone
#   kill9    schedlab SIGKILLed in the middle of a run under scx_simple: when
#            scx_simple is gone, sched_ext disabled and no worker left; then
#            the same command resumes the campaign
#   sigint   SIGINT to schedlab in a run under scx_simple: its exit, and
#            scx_simple, sched_ext's state and the workers when it has exited
#   partial  scx_qmap -p (SCX_OPS_SWITCH_PARTIAL): schedlab moves the workers
#            to SCHED_EXT; scx_qmap -p -e 40 (scx_bpf_error after 40
#            enqueues) is unloaded by the kernel during the run, which fails
#   wrapped  scx_simple started by "sh -c", which forks it: stopped with its
#            wrapper after each run (the process group), nothing left after
#
# Usage: scx-safety.sh LEVELS_SPEC
levels_spec=$1
scx=/sys/kernel/sched_ext
cd /tmp || exit 1

now() { read -r up _ </proc/uptime; echo "$up"; }
state() { read -r s <$scx/state; echo "$s"; }
# Pids of the processes whose comm matches the pattern $1 or $2 (builtins
# only: a scan forks nothing, so it can poll every 20 ms under TCG).
pids_of() {
    found=
    for d in /proc/[0-9]*; do
        read -r c 2>/dev/null <"$d/comm" || continue
        # shellcheck disable=SC2254 # patterns
        case $c in $1 | ${2:-$1}) found="$found ${d#/proc/}" ;; esac
    done
    echo "${found# }"
}
scx_programs() { pids_of scx_simple scx_qmap; }
# Workers: schedlab re-executed as "schedlab-wN" (comm "exe" for the moment
# between exec and naming itself).
workers() { pids_of 'schedlab-w*' exe; }
csv_block() { # NAME DB
    echo "@@@ safety $1 csv begin"
    schedlab export --db "$2" --format csv | gzip -c | base64
    echo "@@@ safety $1 csv end"
}
# Wait (up to 60 s) until a run under scx_simple has its workers running,
# then 0.5 s more: the middle of the run.
mid_run() {
    i=0
    while [ $i -lt 3000 ]; do
        if [ "$(state)" = enabled ] && [ -n "$(workers)" ]; then
            sleep 0.5
            return 0
        fi
        sleep 0.02
        i=$((i + 1))
    done
    return 1
}
kernel_lines() { dmesg | wc -l; }
kernel_since() { dmesg | tail -n +$(($1 + 1)) | grep sched_ext | sed "s/^/@@ safety $2 kernel: /"; }

# --- levels ---------------------------------------------------------------------
t_begin=$(now)
t0=$t_begin
schedlab run "$levels_spec" --db /tmp/levels.db --quiet >/tmp/levels.log 2>&1
rc=$?
echo "@@ safety levels: exit $rc in $(awk "BEGIN { printf \"%.1f\", $(now) - $t0 }") s"
echo "@@ safety levels after: state $(state); sleep processes: [$(pids_of sleep)]; scheduler programs: [$(scx_programs)]"
tail -n 3 /tmp/levels.log | sed 's/^/@@ safety levels output: /'
csv_block levels /tmp/levels.db

# --- kill -9 in the middle of a run under scx_simple ------------------------------
cat >/tmp/kill.toml <<'SPEC'
name = "ext-scheduler-kill"
repetitions = 2
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
ext_scheduler = ["scx_simple"]
[workloads.pi]
duration_s = 1.5
SPEC
k0=$(kernel_lines)
schedlab run /tmp/kill.toml --db /tmp/kill.db --quiet >/tmp/kill.log 2>&1 &
pid=$!
if mid_run; then
    scx_pids=$(scx_programs)
    worker_pids=$(workers)
    before=$(state)
    t_kill=$(now)
    kill -9 $pid
    echo "@@ safety kill9: SIGKILL to schedlab $pid at $t_kill s, mid-run: state $before, scheduler programs [$scx_pids], workers [$worker_pids]"
    wait $pid
    echo "@@ safety kill9: schedlab exit $?"
    # When each is seen, polled every 20 ms for up to 10 s.
    gone_scx= disabled= gone_workers= i=0
    while [ $i -lt 500 ] && { [ -z "$gone_scx" ] || [ -z "$disabled" ] || [ -z "$gone_workers" ]; }; do
        t=$(now)
        [ -n "$gone_scx" ] || [ -n "$(scx_programs)" ] || gone_scx=$t
        [ -n "$disabled" ] || [ "$(state)" != disabled ] || disabled=$t
        [ -n "$gone_workers" ] || [ -n "$(workers)" ] || gone_workers=$t
        sleep 0.02
        i=$((i + 1))
    done
    since() { [ -n "$1" ] && awk "BEGIN { printf \"%.2f s\", $1 - $t_kill }" || echo never; }
    echo "@@ safety kill9 after: scheduler programs gone $(since "$gone_scx"); state disabled $(since "$disabled"); workers gone $(since "$gone_workers")"
    echo "@@ safety kill9 left: state $(state); scheduler programs [$(scx_programs)]; workers [$(workers)]"
    kernel_since "$k0" kill9
    t0=$(now)
    schedlab run /tmp/kill.toml --db /tmp/kill.db --quiet >/tmp/resume.log 2>&1
    rc=$?
    echo "@@ safety resume: exit $rc in $(awk "BEGIN { printf \"%.1f\", $(now) - $t0 }") s; state $(state)"
    tail -n 3 /tmp/resume.log | sed 's/^/@@ safety resume output: /'
    csv_block resume /tmp/kill.db
else
    echo "@@ safety kill9: no run under scx_simple began within 60 s (state $(state))"
    tail -n 5 /tmp/kill.log | sed 's/^/@@ safety kill9 output: /'
    kill -9 $pid 2>/dev/null
fi

# --- SIGINT in the middle of a run under scx_simple -------------------------------
k0=$(kernel_lines)
schedlab run /tmp/kill.toml --db /tmp/sigint.db --quiet >/tmp/sigint.log 2>&1 &
pid=$!
if mid_run; then
    scx_pids=$(scx_programs)
    before=$(state)
    t_int=$(now)
    kill -INT $pid
    echo "@@ safety sigint: SIGINT to schedlab $pid at $t_int s, mid-run: state $before, scheduler programs [$scx_pids]"
    wait $pid
    rc=$?
    # Seen right when schedlab has exited: it stops the program first.
    echo "@@ safety sigint: schedlab exit $rc after $(awk "BEGIN { printf \"%.2f\", $(now) - $t_int }") s; then state $(state); scheduler programs [$(scx_programs)]; workers [$(workers)]"
    tail -n 2 /tmp/sigint.log | sed 's/^/@@ safety sigint output: /'
    kernel_since "$k0" sigint
else
    echo "@@ safety sigint: no run under scx_simple began within 60 s (state $(state))"
    tail -n 5 /tmp/sigint.log | sed 's/^/@@ safety sigint output: /'
    kill -9 $pid 2>/dev/null
fi

# --- a scheduler in partial mode, and one the kernel unloads mid-run --------------
cat >/tmp/partial.toml <<'SPEC'
name = "ext-scheduler-partial"
repetitions = 1
cooldown_s = 0
timeout_s = 60
order = "sequential"
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
ext_scheduler = ["qmap-partial", "qmap-error"]
[workloads.pi]
duration_s = 1.5
[ext_schedulers.qmap-partial]
command = ["scx_qmap", "-p"]
[ext_schedulers.qmap-error]
command = ["scx_qmap", "-p", "-e", "40"]
SPEC
k0=$(kernel_lines)
t0=$(now)
schedlab run /tmp/partial.toml --db /tmp/partial.db --quiet >/tmp/partial.log 2>&1
rc=$?
echo "@@ safety partial: exit $rc in $(awk "BEGIN { printf \"%.1f\", $(now) - $t0 }") s; state $(state); scheduler programs [$(scx_programs)]"
tail -n 3 /tmp/partial.log | sed 's/^/@@ safety partial output: /'
kernel_since "$k0" partial
csv_block partial /tmp/partial.db
# --- a scheduler started by a wrapper that forks it ------------------------------
cat >/tmp/wrapped.toml <<'SPEC'
name = "ext-scheduler-wrapped"
repetitions = 2
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other"]
workload = ["pi"]
processes = [2]
cpus = ["0"]
ext_scheduler = ["wrapped"]
[workloads.pi]
duration_s = 1
[ext_schedulers.wrapped]
command = ["sh", "-c", "scx_simple; echo scx_simple ended"]
SPEC
t0=$(now)
schedlab run /tmp/wrapped.toml --db /tmp/wrapped.db --quiet >/tmp/wrapped.log 2>&1
rc=$?
echo "@@ safety wrapped: exit $rc in $(awk "BEGIN { printf \"%.1f\", $(now) - $t0 }") s; state $(state); scheduler programs [$(scx_programs)]"
tail -n 3 /tmp/wrapped.log | sed 's/^/@@ safety wrapped output: /'
csv_block wrapped /tmp/wrapped.db
# (what a wrapper left behind must not reach the rest of the guest's tests)
for p in $(scx_programs); do kill -INT "$p"; done
i=0
while [ $i -lt 250 ] && [ "$(state)" != disabled ]; do sleep 0.02; i=$((i + 1)); done
echo "@@ safety took $(awk "BEGIN { printf \"%.1f\", $(now) - $t_begin }") s in the guest"
