#!/bin/busybox sh
# scripts/vm/wrr-tree.sh: in the guest of scripts/vm-test (a kernel with
# sched_ext), schedlab's WRR as a sched_ext scheduler (wrr.mechanism =
# "ext") over command workers' whole process trees. Prints "@@ wrr-tree ..."
# lines and the campaign's database (gzip + base64 between "@@@ wrr-tree db
# begin/end") for scripts/vm/wrr-tree-check.py, which judges them on the
# host.
#
# The campaign (3 repetitions): two command workers of weights 1 and 3 on
# CPU 0, quantum 10 ms, each a shell that forks two CPU-bound children and
# waits (as tests/wrr_tree.rs on the host, for the user-space mechanisms);
# duration_s stops both trees at once. Each worker's share is its cgroup's
# CPU time (the run_ns schedlab stores for a command worker: cgroup2
# cpu.stat usage since the release), an observer independent of the
# scheduler's own turn log; when only the shells were scheduled in turns
# (the children first come, first served outside them) both trees got
# about half.
#
# Usage: wrr-tree.sh [SECONDS]   (each run's duration_s, default 3)
seconds=${1:-3}
cd /tmp || exit 1
cat >/tmp/wrr-tree.toml <<SPEC
name = "wrr-tree-ext"
repetitions = 3
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["wrr"]
workload = ["fork2"]
processes = [2]
priorities = ["w"]
cpus = ["0"]
[priorities.w]
mode = "weights"
weight = [1, 3]
[workloads.fork2]
kind = "command"
argv = ["sh", "-c", "busy() { while :; do :; done; }; busy & busy & wait"]
duration_s = $seconds
grace_s = 1
[wrr]
quantum_ms = 10
mechanism = "ext"
SPEC
read -r t0 _ </proc/uptime
schedlab run /tmp/wrr-tree.toml --db /tmp/wrr-tree.db --quiet >/tmp/wrr-tree-run.log 2>&1
rc=$?
read -r t1 _ </proc/uptime
echo "@@ wrr-tree campaign: exit $rc in $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s ($seconds s per run)"
[ $rc -eq 0 ] || tail -n 5 /tmp/wrr-tree-run.log | sed 's/^/@@ wrr-tree campaign output: /'
# Nothing of the trees left: a group with a process in it cannot be removed.
left=
for g in /sys/fs/cgroup/schedlab.*; do [ -e "$g" ] && left="$left ${g#/sys/fs/cgroup/}"; done
echo "@@ wrr-tree groups left: [${left# }]"
echo "@@@ wrr-tree db begin"
gzip -c /tmp/wrr-tree.db | base64
echo "@@@ wrr-tree db end"
