// SPDX-License-Identifier: GPL-2.0
/*
 * schedlab's weighted round robin (src/wrr/policy.rs) as a sched_ext
 * scheduler: a run queue per CPU, each task's turn lasting its slice
 * (quantum x weight, or its class's slice: schedlab computes it), a task
 * whose slice is used up going to the tail of its CPU's queue.
 *
 * Only the tasks schedlab puts under SCHED_EXT are scheduled here
 * (SCX_OPS_SWITCH_PARTIAL); everything else stays on the fair class,
 * which ranks above sched_ext, so a fault here cannot starve the system
 * and the kernel's watchdog unloads a scheduler that leaves a task
 * runnable too long.
 *
 * schedlab fills `tasks` (pid -> slice) before it releases the workers.
 * Every turn (from the moment a task starts running with a fresh slice to
 * the moment its slice is used up, it blocks or exits) is reported through
 * the `turns` ring buffer with the task's CPU time over it (its
 * sum_exec_runtime, which is also /proc/PID/schedstat's run time). A task
 * preempted by a higher class (fair, RT) keeps its slice and its place at
 * the head of its CPU's local queue: its turn goes on when it runs again.
 *
 * sched_ext enforces slices at scheduler ticks: a turn that starts just
 * after a tick and lasts a whole number of ticks ends one tick late (and a
 * tick delivered late, as under emulation, ends it later still). So each
 * task keeps a debt: the CPU time its turns got beyond (or short of) its
 * slice, summed since it last blocked (within two slices). Each turn aims
 * at the slice minus the debt (within half a slice), so that the errors do
 * not add up over a run, as schedlab's user-space dispatcher carries them
 * over (src/wrr/dispatch.rs); a task that blocks forfeits the rest of its
 * turn and its debt.
 *
 * Built by build.rs (cargo feature "ext") with clang 16+ against
 * vmlinux.h (Linux 6.12's BTF); CO-RE relocates field accesses on other
 * kernels. The 6.12 kfunc names and their 6.13+ renames are both declared
 * weak: the one the running kernel has is used.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

#define PF_EXITING 0x00000004
#define MAX_CPUS 1024
#define REASON_LEN 128
#define MSG_LEN 1024

/* How a turn ended: the values of `wrr_turn.end` (src/sys/scx_wrr.rs). */
#define WRR_END_EXPIRED 0  /* the slice was used up */
#define WRR_END_BLOCKED 1  /* the task went to sleep */
#define WRR_END_EXITED 2   /* the task exited */
#define WRR_END_LEFT 3     /* the task left sched_ext (scheduler unloaded, policy changed) */

/* kfuncs: 6.12 names, 6.13+ names (libbpf drops the ___suffix). */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
void scx_bpf_dispatch___v612(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
void scx_bpf_dsq_insert___v613(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym __weak;
bool scx_bpf_consume___v612(u64 dsq_id) __ksym __weak;
bool scx_bpf_dsq_move_to_local___v613(u64 dsq_id) __ksym __weak;
bool scx_bpf_dsq_move_to_local___v71(u64 dsq_id, u64 enq_flags) __ksym __weak;

static void wrr_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags)
{
	if (bpf_ksym_exists(scx_bpf_dsq_insert___v613))
		scx_bpf_dsq_insert___v613(p, dsq_id, slice, enq_flags);
	else
		scx_bpf_dispatch___v612(p, dsq_id, slice, enq_flags);
}

static bool wrr_move_to_local(u64 dsq_id)
{
	if (bpf_ksym_exists(scx_bpf_dsq_move_to_local___v71))
		return scx_bpf_dsq_move_to_local___v71(dsq_id, 0);
	if (bpf_ksym_exists(scx_bpf_dsq_move_to_local___v613))
		return scx_bpf_dsq_move_to_local___v613(dsq_id);
	return scx_bpf_consume___v612(dsq_id);
}

/* Set by schedlab before load. */
const volatile u32 nr_cpus = 1;
/*
 * Fault injection for scripts/vm-test (SCHEDLAB_TEST_EXT_STALL=1): never
 * dispatch schedlab's tasks, so that sched_ext's watchdog ejects the
 * scheduler and the run must fail with the kernel's reason.
 */
const volatile bool test_stall = false;

/*
 * One task of schedlab's: its slice (written by schedlab; the rest starts
 * at zero), its debt (carry_ns) and its open turn.
 */
struct wrr_task {
	u64 slice_ns;
	s64 carry_ns;
	u64 next_target_ns;
	u64 turn_start_ns;
	u64 turn_cpu_start_ns;
	u64 turn_target_ns;
	u32 in_turn;
	u32 runs;
};

/* One turn, as read by schedlab (src/sys/scx_wrr.rs). */
struct wrr_turn {
	u32 pid;
	u32 cpu;
	u64 start_ns;
	u64 end_ns;
	u64 cpu_ns;
	u64 slice_ns;   /* the task's slice */
	u64 target_ns;  /* this turn's: the slice minus the task's debt */
	u32 end;
	u32 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct wrr_task);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} turns SEC(".maps");

/* Why the kernel ended the scheduler (ops.exit), and turns not reported. */
struct wrr_exit {
	s32 kind;
	s32 pad;
	s64 exit_code;
	char reason[REASON_LEN];
	char msg[MSG_LEN];
};
struct wrr_exit exit_info = {};
u64 lost_turns = 0;

/* The CPU time the next turn aims at: the slice minus the debt. */
static u64 next_target(struct wrr_task *t)
{
	s64 half = t->slice_ns / 2;
	s64 carry = t->carry_ns;

	if (carry > half)
		carry = half;
	if (carry < -half)
		carry = -half;
	return t->slice_ns - carry;
}

static void end_turn(struct task_struct *p, struct wrr_task *t, u32 end)
{
	struct wrr_turn *r;
	u64 cpu_ns;

	if (!t->in_turn)
		return;
	t->in_turn = 0;
	cpu_ns = p->se.sum_exec_runtime - t->turn_cpu_start_ns;
	/* Only a turn that used up its slice carries its error over. */
	if (end == WRR_END_EXPIRED) {
		s64 limit = 2 * (s64)t->slice_ns;
		s64 debt = t->carry_ns + (s64)cpu_ns - (s64)t->slice_ns;

		if (debt > limit)
			debt = limit;
		if (debt < -limit)
			debt = -limit;
		t->carry_ns = debt;
	} else {
		t->carry_ns = 0;
	}
	r = bpf_ringbuf_reserve(&turns, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&lost_turns, 1);
		return;
	}
	r->pid = p->pid;
	r->cpu = scx_bpf_task_cpu(p);
	r->start_ns = t->turn_start_ns;
	r->end_ns = bpf_ktime_get_ns();
	r->cpu_ns = cpu_ns;
	r->slice_ns = t->slice_ns;
	r->target_ns = t->turn_target_ns;
	r->end = end;
	r->runs = t->runs;
	/* schedlab reads the ring every 100 ms: no wake-up per turn. */
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

static void start_turn(struct task_struct *p, struct wrr_task *t)
{
	t->in_turn = 1;
	t->turn_start_ns = bpf_ktime_get_ns();
	t->turn_cpu_start_ns = p->se.sum_exec_runtime;
	t->turn_target_ns = p->scx.slice;
	t->runs = 0;
}

static struct wrr_task *lookup(struct task_struct *p)
{
	u32 pid = p->pid;

	return bpf_map_lookup_elem(&tasks, &pid);
}

SEC("struct_ops/wrr_select_cpu")
s32 BPF_PROG(wrr_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	/* Never dispatch from here: every task goes through its CPU's queue. */
	return prev_cpu;
}

SEC("struct_ops/wrr_enqueue")
void BPF_PROG(wrr_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct wrr_task *t = lookup(p);
	s32 cpu;

	if (!t) {
		/* Not schedlab's (a child of a worker): first come, first served. */
		wrr_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
		return;
	}
	/* The tail of the queue of the CPU the task is on (workers are pinned). */
	cpu = scx_bpf_task_cpu(p);
	wrr_insert(p, cpu, next_target(t), enq_flags);
	scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

SEC("struct_ops/wrr_dispatch")
void BPF_PROG(wrr_dispatch, s32 cpu, struct task_struct *prev)
{
	struct wrr_task *t;

	if (test_stall)
		return;
	if (wrr_move_to_local(cpu))
		return;
	/*
	 * Nobody else is queued on this CPU: the previous task, if it is
	 * still runnable and its slice is used up, goes on with a new turn
	 * (without this the kernel would give it a default 20 ms slice).
	 */
	if (!prev || !(prev->scx.flags & SCX_TASK_QUEUED) || prev->scx.slice)
		return;
	t = lookup(prev);
	if (!t)
		return;
	end_turn(prev, t, WRR_END_EXPIRED);
	prev->scx.slice = next_target(t);
	start_turn(prev, t);
	t->runs = 1;
}

SEC("struct_ops/wrr_running")
void BPF_PROG(wrr_running, struct task_struct *p)
{
	struct wrr_task *t = lookup(p);

	if (!t)
		return;
	if (!t->in_turn)
		start_turn(p, t);
	t->runs++;
}

SEC("struct_ops/wrr_stopping")
void BPF_PROG(wrr_stopping, struct task_struct *p, bool runnable)
{
	struct wrr_task *t = lookup(p);

	if (!t)
		return;
	if (runnable && p->scx.slice)
		return; /* preempted by a higher class: the turn goes on */
	if (runnable)
		end_turn(p, t, WRR_END_EXPIRED);
	else if (p->flags & PF_EXITING)
		end_turn(p, t, WRR_END_EXITED);
	else
		end_turn(p, t, WRR_END_BLOCKED);
}

SEC("struct_ops/wrr_disable")
void BPF_PROG(wrr_disable, struct task_struct *p)
{
	struct wrr_task *t = lookup(p);

	if (t)
		end_turn(p, t, WRR_END_LEFT);
}

SEC("struct_ops.s/wrr_init")
s32 BPF_PROG(wrr_init)
{
	u32 cpu;
	s32 err;

	for (cpu = 0; cpu < MAX_CPUS && cpu < nr_cpus; cpu++) {
		err = scx_bpf_create_dsq(cpu, -1);
		if (err)
			return err;
	}
	return 0;
}

SEC("struct_ops/wrr_exit")
void BPF_PROG(wrr_exit, struct scx_exit_info *ei)
{
	exit_info.kind = ei->kind;
	exit_info.exit_code = ei->exit_code;
	bpf_probe_read_kernel_str(exit_info.reason, sizeof(exit_info.reason), ei->reason);
	bpf_probe_read_kernel_str(exit_info.msg, sizeof(exit_info.msg), ei->msg);
}

SEC(".struct_ops.link")
struct sched_ext_ops wrr_ops = {
	.select_cpu = (void *)wrr_select_cpu,
	.enqueue = (void *)wrr_enqueue,
	.dispatch = (void *)wrr_dispatch,
	.running = (void *)wrr_running,
	.stopping = (void *)wrr_stopping,
	.disable = (void *)wrr_disable,
	.init = (void *)wrr_init,
	.exit = (void *)wrr_exit,
	.flags = SCX_OPS_SWITCH_PARTIAL,
	.timeout_ms = 5000,
	.name = "schedlab_wrr",
};
