#!/bin/busybox sh
# scripts/vm/v2-command.sh: in the guest of scripts/vm-test, command
# workloads (kind = "command") on a pure cgroup-v2 machine: cgroup2 alone
# at /sys/fs/cgroup, no v1 hierarchy, the controllers a current
# distribution enables at the root (cpu, memory, pids: those this kernel
# has) written to its cgroup.subtree_control. Prints "@@ v2 ..." lines and
# the campaign's export (gzip + base64 between "@@@ v2 csv begin/end") for
# scripts/vm/v2-command-check.py, which judges them on the host.
#
# The campaign (policy OTHER and FIFO, pinned to CPU 0, 2 repetitions):
#   fork2   a shell forks two CPU-bound children; each child reads its own
#           run time (/proc/self/schedstat, through the shell's `read`: no
#           new process) just before it ends, the top shell its own at its
#           start and end, and the top prints the sum ("self_ns N"): the
#           tree's cpu.stat usage must match it ("top_start_ns N": the top's
#           CPU before its first reading, its worker's start-up included)
#   daemon  a shell double-forks a daemon that ignores SIGTERM and spins,
#           then sleeps; stopped by duration_s (SIGTERM), the daemon is
#           left to the SIGKILL after grace_s (cgroup.kill); its pid goes
#           to /tmp/v2-daemons so that its absence can be checked (and the
#           top's and the daemon's start, with the uptime, to /tmp/v2-trace)
# An observer on CPU 1 records every group schedlab makes under
# /sys/fs/cgroup (its session's parent and each worker's group), every
# process it sees in a worker's group, and what a worker group offers;
# afterwards: no process of the trees, no schedlab group, no cgroup journal
# left.
#
# Usage: v2-command.sh [ITERATIONS]   (shell-loop iterations per child,
#                                      default 5000)
cg=/sys/fs/cgroup
cd /tmp || exit 1

# --- the machine: cgroup2 only, controllers enabled as a distribution does ----
v1=0
v2=0
while read -r line; do
    case $line in
    *" - cgroup2 "*) v2=$((v2 + 1)) ;;
    *" - cgroup "*) v1=$((v1 + 1)) ;;
    esac
done </proc/self/mountinfo
echo "@@ v2 mounts: cgroup2 $v2, cgroup v1 $v1"
read -r offered <$cg/cgroup.controllers
for c in cpu memory pids; do
    case " $offered " in
    *" $c "*) echo "+$c" >$cg/cgroup.subtree_control ;;
    esac
done
read -r enabled <$cg/cgroup.subtree_control
echo "@@ v2 root: controllers [$offered], subtree_control [$enabled]"
# What this kernel was built with, for the figures it can give.
for opt in CONFIG_TASKSTATS CONFIG_TASK_DELAY_ACCT CONFIG_PSI CONFIG_MEMCG CONFIG_CGROUP_PIDS; do
    if zcat /proc/config.gz | grep -q "^$opt=y"; then v=y; else v=n; fi
    echo "@@ v2 config: $opt=$v"
done
schedlab env 2>&1 | grep -i cgroup | sed 's/^/@@ v2 env: /'

# --- the campaign ------------------------------------------------------------
iterations=${1:-5000}
cat >/tmp/v2.toml <<'SPEC'
name = "v2-command"
repetitions = 2
cooldown_s = 0
timeout_s = 60
[matrix]
policy = ["other", "fifo"]
workload = ["fork2", "daemon"]
processes = [1]
cpus = ["0"]
[workloads.fork2]
kind = "command"
argv = ["sh", "-c", "read -r t0 c s < /proc/self/schedstat; for i in 1 2; do (n=0; while [ $n -lt ITERATIONS ]; do n=$((n+1)); done; read -r p c s < /proc/self/schedstat; echo $p > c.$i) & done; wait; read -r t c s < /proc/self/schedstat; t=$((t-t0)); for i in 1 2; do read -r p < c.$i; t=$((t+p)); done; echo self_ns $t; echo top_start_ns $t0"]
[workloads.fork2.figures.self_ns]
regex = 'self_ns ([0-9]+)'
unit = "ns"
better = "lower"
[workloads.fork2.figures.top_start_ns]
regex = 'top_start_ns ([0-9]+)'
unit = "ns"
better = "lower"
[workloads.daemon]
kind = "command"
argv = ["sh", "-c", "read -r me r < /proc/self/stat; read -r up r < /proc/uptime; echo $me top $up >> /tmp/v2-trace; ( (trap '' TERM; read -r me r < /proc/self/stat; read -r up r < /proc/uptime; echo $me daemon $up >> /tmp/v2-trace; echo $me >> /tmp/v2-daemons; while :; do :; done) & ); exec sleep 30"]
duration_s = 1.0
grace_s = 0.3
SPEC
sed -i "s/ITERATIONS/$iterations/" /tmp/v2.toml
rm -f /tmp/v2-daemons /tmp/v2-trace /tmp/v2-watch.stop
touch /tmp/v2-daemons /tmp/v2-trace
# The observer: every group under the root seen while the campaign runs,
# every process seen in a worker's group (the run's top process, its
# children, the daemon), and the files of the first worker group (which
# figures v2 offers it). Builtins only in the loop, but for sleep.
taskset -c 1 sh -c '
    seen=" "
    files=
    while [ ! -e /tmp/v2-watch.stop ]; do
        for g in /sys/fs/cgroup/schedlab.* /sys/fs/cgroup/schedlab.*/*.w*; do
            [ -d "$g" ] || continue
            name=${g#/sys/fs/cgroup/}
            case $seen in *" $name "*) ;; *)
                seen="$seen$name "
                echo "@@ v2 watch: group $name"
                ;;
            esac
            case $name in */*.w*) ;; *) continue ;; esac
            while read -r p; do
                case $seen in *" $p "*) ;; *)
                    seen="$seen$p "
                    echo "@@ v2 watch: pid $p in $name"
                    ;;
                esac
            done <"$g/cgroup.procs"
            [ -n "$files" ] && continue
            files=$(cd "$g" && for f in cgroup.kill cgroup.freeze cgroup.events cpu.stat cpu.pressure memory.peak pids.current; do [ -e $f ] && printf "%s " $f; done)
            read -r sc <"${g%/*}/cgroup.subtree_control"
            echo "@@ v2 watch: worker group files [${files% }], its parent enables [$sc]"
        done
        sleep 0.02
    done' >/tmp/v2-watch.log 2>&1 &
watch_pid=$!
read -r t0 _ </proc/uptime
schedlab run /tmp/v2.toml --db /tmp/v2.db --quiet >/tmp/v2-run.log 2>&1
rc=$?
read -r t1 _ </proc/uptime
echo "@@ v2 campaign: exit $rc in $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s ($iterations iterations per child)"
[ $rc -eq 0 ] || tail -n 5 /tmp/v2-run.log | sed 's/^/@@ v2 campaign output: /'
sleep 0.1
touch /tmp/v2-watch.stop
wait $watch_pid
cat /tmp/v2-watch.log

# --- what is left ---------------------------------------------------------------
daemons=
alive=
while read -r pid; do
    daemons="$daemons $pid"
    # (a zombie not yet reaped by init is dead: it holds no CPU nor group)
    st=
    [ -r "/proc/$pid/stat" ] && read -r _ _ st _ <"/proc/$pid/stat" 2>/dev/null
    [ -n "$st" ] && [ "$st" != Z ] && alive="$alive $pid($st)"
done </tmp/v2-daemons
sed 's/^/@@ v2 trace: /' /tmp/v2-trace
echo "@@ v2 daemons: started [${daemons# }], alive [${alive# }]"
left=
for g in $cg/schedlab.*; do [ -e "$g" ] && left="$left ${g#$cg/}"; done
echo "@@ v2 groups left: [${left# }]"
journals=
for j in /var/lib/schedlab/cgroup-journal.* /run/schedlab/cgroup-journal.*; do
    [ -e "$j" ] && journals="$journals $j"
done
echo "@@ v2 journals left: [${journals# }]"
echo "@@@ v2 csv begin"
schedlab export --db /tmp/v2.db --format csv | gzip -c | base64
echo "@@@ v2 csv end"
# What the report says of the figures this kernel did not give.
if schedlab report --db /tmp/v2.db --format md -o /tmp/v2.md >/tmp/v2-report.log 2>&1; then
    grep ': not given for ' /tmp/v2.md | sed 's/^/@@ v2 report: /'
    echo "@@ v2 report done"
else
    tail -n 3 /tmp/v2-report.log | sed 's/^/@@ v2 report failed: /'
fi
