// SPDX-License-Identifier: GPL-2.0
/*
 * schedlab's weighted round robin (src/wrr/policy.rs) as a sched_ext
 * scheduler: a run queue of workers per CPU, each worker's turn lasting its
 * slice (quantum x weight, or its class's slice: schedlab computes it), a
 * worker whose slice is used up going to the tail of its CPU's queue.
 *
 * A worker is a group: the worker's process and every task forked by a
 * task of the group once the scheduler is loaded (a `command` worker's
 * whole tree: children, grandchildren, threads; an exec keeps a task in
 * its group). ops.init_task records a forked task's group (a task-local
 * storage entry naming the worker's pid) from the forking task's. The
 * group's turn is shared by its tasks: while it lasts, its runnable tasks
 * run one after another (each with the rest of the turn as its slice, on
 * the worker's CPU: they inherit its pinning), their CPU time is charged
 * to the group, and when the group's CPU time over the turn reaches the
 * turn's target the turn ends and the next group of the CPU's queue gets
 * its turn; a group none of whose tasks is runnable forfeits the rest of
 * its turn (as one blocked task does). A group's runnable tasks wait in
 * its own queue (DSQ GROUP_DSQ + index); each CPU keeps a FIFO of the
 * groups that wait for a turn and the group that owns the CPU. A worker
 * without children is a group of one, scheduled as one task always was.
 *
 * Only the tasks schedlab puts under SCHED_EXT (and their children, which
 * inherit it) are scheduled here (SCX_OPS_SWITCH_PARTIAL); everything else
 * stays on the fair class, which ranks above sched_ext, so a fault here
 * cannot starve the system and the kernel's watchdog unloads a scheduler
 * that leaves a task runnable too long.
 *
 * schedlab fills `tasks` (worker pid -> slice, queue index, CPU) before it
 * releases the workers. Every turn (from the moment a task of the group
 * starts running with a fresh turn to the moment the turn is used up, the
 * group has no runnable task left or exits) is reported through the `turns`
 * ring buffer under the worker's pid, with the group's CPU time over it
 * (the sum of its tasks' sum_exec_runtime over their runs in the turn; for
 * a group of one that is /proc/PID/schedstat's run time). A task preempted
 * by a higher class (fair, RT) keeps its slice and its place at the head of
 * its CPU's local queue: its group's turn goes on when it runs again.
 *
 * sched_ext enforces slices at scheduler ticks: a turn that starts just
 * after a tick and lasts a whole number of ticks ends one tick late (and a
 * tick delivered late, as under emulation, ends it later still). So each
 * group keeps a debt: the CPU time its turns got beyond (or short of) its
 * slice, summed since it last forfeited a turn (within two slices). Each
 * turn aims at the slice minus the debt (within half a slice), so that the
 * errors do not add up over a run, as schedlab's user-space dispatcher
 * carries them over (src/wrr/dispatch.rs); a group that forfeits a turn
 * (no runnable task) forfeits its debt too.
 *
 * A task of a group that runs on another CPU than its worker's (it changed
 * its own affinity) is scheduled first come, first served, outside the
 * group's turns.
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
#define WRR_END_BLOCKED 1  /* no task of the group was left runnable */
#define WRR_END_EXITED 2   /* the worker's process exited, no other task runnable */
#define WRR_END_LEFT 3     /* a task left sched_ext (scheduler unloaded, policy changed) */

/* kfuncs: 6.12 names, 6.13+ names (libbpf drops the ___suffix). */
s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
s32 scx_bpf_dsq_nr_queued(u64 dsq_id) __ksym;
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
/* The number of workers (groups): their queues are GROUP_DSQ + 0.. */
const volatile u32 nr_groups = 0;
/*
 * Fault injection for scripts/vm-test (SCHEDLAB_TEST_EXT_STALL=1): never
 * dispatch schedlab's tasks, so that sched_ext's watchdog ejects the
 * scheduler and the run must fail with the kernel's reason.
 */
const volatile bool test_stall = false;

/* A group's queue is GROUP_DSQ + its index (below: no built-in DSQ bit). */
#define GROUP_DSQ (1ULL << 32)
/* schedlab's MAX_PROCESSES (src/spec/validate.rs): workers of one run. */
#define MAX_GROUPS 10000
/* Groups skipped at most per pick (their tasks left the CPU's queue). */
#define MAX_STALE 64

/* Where a group is (`wrr_group.state`). */
#define GROUP_IDLE 0   /* no runnable task: in no CPU's queue */
#define GROUP_QUEUED 1 /* in its CPU's queue, waiting for a turn */
#define GROUP_OWNER 2  /* its CPU's: its turn is open or about to open */

/*
 * One worker of schedlab's and its tree: its slice, pid, queue index and
 * CPU (written by schedlab; the rest starts at zero), its debt (carry_ns),
 * its CPU time, its open turn and its place in its CPU's queue.
 */
struct wrr_group {
	u64 slice_ns;
	u32 pid;
	u32 index;
	u32 cpu;
	u32 state;
	s64 carry_ns;
	u64 cpu_ns;	/* the group's CPU time here, summed at each stop */
	u64 turn_start_ns;
	u64 turn_cpu_start_ns;
	u64 turn_target_ns;
	u32 in_turn;
	u32 runs;
	u32 next;	/* the pid of the next group in its CPU's queue */
	u32 pad;
};

/* A task's group (task-local storage). */
struct wrr_member {
	u32 leader;		/* the worker's pid: its key in `tasks` */
	u32 resume;		/* preempted by a higher class: keeps its slice */
	u64 stint_start_ns;	/* sum_exec_runtime when it last started running */
};

/* A CPU's queue of groups (pids; 0: none) and the group that owns it. */
struct wrr_cpu {
	u32 head;
	u32 tail;
	u32 owner;
	u32 pad;
};

/* One turn, as read by schedlab (src/sys/scx_wrr.rs). */
struct wrr_turn {
	u32 pid;
	u32 cpu;
	u64 start_ns;
	u64 end_ns;
	u64 cpu_ns;
	u64 slice_ns;   /* the group's slice */
	u64 target_ns;  /* this turn's: the slice minus the group's debt */
	u32 end;
	u32 runs;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct wrr_group);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wrr_member);
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, u32);
	__type(value, struct wrr_cpu);
} cpus SEC(".maps");

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
/* Tasks forked in a group that could not be given its storage (no memory). */
u64 lost_members = 0;

static struct wrr_group *group(u32 pid)
{
	if (!pid)
		return NULL;
	return bpf_map_lookup_elem(&tasks, &pid);
}

/* p's group and membership, when p is of a worker's tree on its CPU. */
static struct wrr_group *group_of(struct task_struct *p, struct wrr_member **m)
{
	struct wrr_member *mm;
	struct wrr_group *g;

	mm = bpf_task_storage_get(&members, p, 0, 0);
	if (!mm)
		return NULL;
	g = group(mm->leader);
	if (!g || scx_bpf_task_cpu(p) != g->cpu)
		return NULL;
	*m = mm;
	return g;
}

static u64 dsq_of(struct wrr_group *g)
{
	return GROUP_DSQ + g->index;
}

static struct wrr_cpu *cpu_of(u32 cpu)
{
	return bpf_map_lookup_elem(&cpus, &cpu);
}

/* The CPU time the next turn aims at: the slice minus the debt. */
static u64 next_target(struct wrr_group *g)
{
	s64 half = g->slice_ns / 2;
	s64 carry = g->carry_ns;

	if (carry > half)
		carry = half;
	if (carry < -half)
		carry = -half;
	return g->slice_ns - carry;
}

/* Charge the CPU time p ran since it started (or was last charged). */
static void charge(struct task_struct *p, struct wrr_group *g, struct wrr_member *m)
{
	u64 now = p->se.sum_exec_runtime;

	g->cpu_ns += now - m->stint_start_ns;
	m->stint_start_ns = now;
}

static void end_turn(struct wrr_group *g, u32 end)
{
	struct wrr_turn *r;
	u64 cpu_ns;

	if (!g->in_turn)
		return;
	g->in_turn = 0;
	cpu_ns = g->cpu_ns - g->turn_cpu_start_ns;
	/* Only a turn that used up its slice carries its error over. */
	if (end == WRR_END_EXPIRED) {
		s64 limit = 2 * (s64)g->slice_ns;
		s64 debt = g->carry_ns + (s64)cpu_ns - (s64)g->slice_ns;

		if (debt > limit)
			debt = limit;
		if (debt < -limit)
			debt = -limit;
		g->carry_ns = debt;
	} else {
		g->carry_ns = 0;
	}
	r = bpf_ringbuf_reserve(&turns, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&lost_turns, 1);
		return;
	}
	r->pid = g->pid;
	r->cpu = g->cpu;
	r->start_ns = g->turn_start_ns;
	r->end_ns = bpf_ktime_get_ns();
	r->cpu_ns = cpu_ns;
	r->slice_ns = g->slice_ns;
	r->target_ns = g->turn_target_ns;
	r->end = end;
	r->runs = g->runs;
	/* schedlab reads the ring every 100 ms: no wake-up per turn. */
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

static void start_turn(struct wrr_group *g)
{
	g->in_turn = 1;
	g->turn_start_ns = bpf_ktime_get_ns();
	g->turn_cpu_start_ns = g->cpu_ns;
	g->turn_target_ns = next_target(g);
	g->runs = 0;
}

/* Put g at the tail of its CPU's queue. */
static void push(struct wrr_cpu *c, struct wrr_group *g)
{
	struct wrr_group *tail = group(c->tail);

	g->next = 0;
	g->state = GROUP_QUEUED;
	if (tail)
		tail->next = g->pid;
	else
		c->head = g->pid;
	c->tail = g->pid;
}

/* Take the first group of the CPU's queue that has a runnable task. */
static struct wrr_group *pop(struct wrr_cpu *c)
{
	struct wrr_group *g;
	u32 i;

	for (i = 0; i < MAX_STALE; i++) {
		g = group(c->head);
		if (!g) {
			c->head = 0;
			c->tail = 0;
			return NULL;
		}
		c->head = g->next;
		if (!c->head)
			c->tail = 0;
		g->next = 0;
		g->state = GROUP_IDLE;
		if (scx_bpf_dsq_nr_queued(dsq_of(g)) > 0)
			return g;
	}
	return NULL;
}

SEC("struct_ops/wrr_select_cpu")
s32 BPF_PROG(wrr_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	/* Never dispatch from here: every task goes through its group's queue. */
	return prev_cpu;
}

SEC("struct_ops/wrr_enqueue")
void BPF_PROG(wrr_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct wrr_member *m = NULL;
	struct wrr_group *g = group_of(p, &m);
	struct wrr_cpu *c;

	if (!g || !(c = cpu_of(g->cpu))) {
		/* Not schedlab's, or off its worker's CPU: first come, first served. */
		wrr_insert(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
		return;
	}
	/* Its group's queue; the group to the tail of its CPU's (workers are pinned). */
	wrr_insert(p, dsq_of(g), next_target(g), enq_flags);
	if (g->state == GROUP_IDLE)
		push(c, g);
	scx_bpf_kick_cpu(g->cpu, SCX_KICK_IDLE);
}

SEC("struct_ops/wrr_dispatch")
void BPF_PROG(wrr_dispatch, s32 cpu, struct task_struct *prev)
{
	struct wrr_member *pm = NULL;
	struct wrr_group *g, *next, *pg = NULL;
	struct wrr_cpu *c;
	bool used_up;

	if (test_stall)
		return;
	c = cpu_of(cpu);
	if (!c)
		return;
	if (prev)
		pg = group_of(prev, &pm);
	g = group(c->owner);
	/* The owner's task is still running, and the turn is used up. */
	used_up = g && prev && pg == g && (prev->scx.flags & SCX_TASK_QUEUED) && !prev->scx.slice;
	if (g && !used_up) {
		/* Its task stopped with the turn going on: the next one runs. */
		if (wrr_move_to_local(dsq_of(g)))
			return;
		/* None of its tasks is runnable: it forfeits its turn. */
		end_turn(g, WRR_END_BLOCKED);
		g->state = GROUP_IDLE;
		c->owner = 0;
		g = NULL;
	}
	next = pop(c);
	if (next) {
		/* The used-up group to the tail (its turn ends as prev stops). */
		if (g)
			push(c, g);
		next->state = GROUP_OWNER;
		c->owner = next->pid;
		wrr_move_to_local(dsq_of(next));
		return;
	}
	if (!g || !prev || !pm)
		return;
	/*
	 * No other group is queued on this CPU: the owner goes on with a new
	 * turn, by another of its tasks (its turn ends as prev stops, the next
	 * opens as that one runs) or by prev (without this the kernel would
	 * give it a default 20 ms slice).
	 */
	if (wrr_move_to_local(dsq_of(g)))
		return;
	charge(prev, g, pm);
	end_turn(g, WRR_END_EXPIRED);
	start_turn(g);
	prev->scx.slice = g->turn_target_ns;
	g->runs = 1;
}

SEC("struct_ops/wrr_running")
void BPF_PROG(wrr_running, struct task_struct *p)
{
	struct wrr_member *m = NULL;
	struct wrr_group *g = group_of(p, &m);
	u64 used_ns;

	if (!g || !m)
		return;
	m->stint_start_ns = p->se.sum_exec_runtime;
	if (!g->in_turn) {
		start_turn(g);
		p->scx.slice = g->turn_target_ns;
	} else if (!m->resume) {
		/* Another task of the group goes on with the rest of its turn. */
		used_ns = g->cpu_ns - g->turn_cpu_start_ns;
		p->scx.slice = used_ns < g->turn_target_ns ? g->turn_target_ns - used_ns : 1;
	}
	m->resume = 0;
	g->runs++;
}

SEC("struct_ops/wrr_stopping")
void BPF_PROG(wrr_stopping, struct task_struct *p, bool runnable)
{
	struct wrr_member *m = NULL;
	struct wrr_group *g = group_of(p, &m);
	struct wrr_cpu *c;

	if (!g || !m)
		return;
	charge(p, g, m);
	if (runnable && p->scx.slice) {
		/* Preempted by a higher class: the turn goes on. */
		m->resume = 1;
		return;
	}
	if (runnable) {
		/* The turn is used up (dispatch has queued the group again). */
		end_turn(g, WRR_END_EXPIRED);
		return;
	}
	/* Another task of the group is runnable: it goes on with the turn. */
	if (scx_bpf_dsq_nr_queued(dsq_of(g)) > 0)
		return;
	/* (A task of the tree other than the worker's that exits: the group blocks.) */
	end_turn(g, (p->flags & PF_EXITING) && p->pid == g->pid ? WRR_END_EXITED : WRR_END_BLOCKED);
	c = cpu_of(g->cpu);
	if (c && c->owner == g->pid) {
		c->owner = 0;
		g->state = GROUP_IDLE;
	}
}

SEC("struct_ops/wrr_disable")
void BPF_PROG(wrr_disable, struct task_struct *p)
{
	struct wrr_member *m = NULL;
	struct wrr_group *g = group_of(p, &m);

	/* An exiting task's turn was reported as it stopped. */
	if (g && !(p->flags & PF_EXITING))
		end_turn(g, WRR_END_LEFT);
}

SEC("struct_ops/wrr_init_task")
s32 BPF_PROG(wrr_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct wrr_member *parent, *m;
	u32 leader;

	if (args->fork) {
		/* Forked by a task of a group (the current task): it joins it. */
		parent = bpf_task_storage_get(&members, bpf_get_current_task_btf(), 0, 0);
		if (!parent)
			return 0;
		leader = parent->leader;
	} else {
		/* A worker, there when the scheduler loads. */
		leader = p->pid;
		if (!group(leader))
			return 0;
	}
	m = bpf_task_storage_get(&members, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!m) {
		/* It runs first come, first served; schedlab reports it. */
		__sync_fetch_and_add(&lost_members, 1);
		return 0;
	}
	m->leader = leader;
	m->resume = 0;
	m->stint_start_ns = p->se.sum_exec_runtime;
	return 0;
}

SEC("struct_ops.s/wrr_init")
s32 BPF_PROG(wrr_init)
{
	u32 i;
	s32 err;

	for (i = 0; i < MAX_GROUPS && i < nr_groups; i++) {
		err = scx_bpf_create_dsq(GROUP_DSQ + i, -1);
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
	.init_task = (void *)wrr_init_task,
	.init = (void *)wrr_init,
	.exit = (void *)wrr_exit,
	.flags = SCX_OPS_SWITCH_PARTIAL,
	.timeout_ms = 5000,
	.name = "schedlab_wrr",
};
