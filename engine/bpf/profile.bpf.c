// SPDX-License-Identifier: GPL-2.0
/* The profiler, kernel side: everything is aggregated here, in maps (per-CPU
 * where hot), for the threads of one process tree; nothing is streamed to
 * user space while the workload runs, so the cost per event is a few map
 * operations whatever the event rate.
 *
 * The tree: the `followed` bitmap holds the processes; the loader seeds it with
 * the target, sched_process_fork adds every child of a followed process (a
 * new thread has its process's tgid already). Raw tracepoints throughout
 * (no tracefs record to fill); page faults are timed from the exceptions
 * tracepoint to the perf software fault event, as in noise.bpf.c.
 * Every program is named oslens_* so that a leak shows in `bpftool prog`. */
#include "common.bpf.h"

#include "profile.h"
#include "kstack.bpf.h"
#include "locknames.bpf.h"

/* The processes followed, one bit per tgid: a plain load on every event
 * (a hash lookup would cost more than the rest of a system call's
 * accounting). User space sets bits through the mmap'ed .bss. */
__u64 followed[PROF_PID_WORDS];

/* Scheduling state of each followed thread, keyed by tid: sched_switch
 * needs the next task's, which task storage cannot give a raw tracepoint. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct prof_task);
} tasks SEC(".maps");

/* What the current thread is in (a system call, a fault, a lock wait):
 * task-local storage, found from the task itself without hashing. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct prof_inflight);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_cpu);
} cpus SEC(".maps");

/* Created on first use, so that only the calls made cost memory, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct prof_syscall);
} syscalls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct prof_irq);
} irqs SEC(".maps");

/* A zeroed value to create entries from: too large for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_syscall);
} zero_syscall SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct prof_exit_key);
	__type(value, struct prof_exit);
} exits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct prof_preempt_key);
	__type(value, __u64);
} preempted_by SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct prof_lock_key);
	__type(value, struct prof_lock);
} locks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PE_MAX);
	__type(key, __u32);
	__type(value, struct runlen);
} runlens SEC(".maps");

/* ---- helpers ---- */

static __always_inline struct prof_cpu *this_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpus, &zero);
}

static __always_inline void count_lost(void)
{
	struct prof_cpu *c = this_cpu();
	if (c)
		c->lost++;
}

static __always_inline int followed_tgid(__u32 tgid)
{
	__u32 w = tgid / 64;
	if (w >= PROF_PID_WORDS)
		return 0;
	return (followed[w] >> (tgid % 64)) & 1;
}

static __always_inline void set_followed(__u32 tgid, int on)
{
	__u32 w = tgid / 64;
	if (w >= PROF_PID_WORDS)
		return;
	if (on)
		__sync_fetch_and_or(&followed[w], 1ull << (tgid % 64));
	else
		__sync_fetch_and_and(&followed[w], ~(1ull << (tgid % 64)));
}

/* The current thread's in-flight state; created only for followed threads. */
static __always_inline struct prof_inflight *current_inflight(int create)
{
	return bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline int current_followed(void)
{
	return followed_tgid(bpf_get_current_pid_tgid() >> 32);
}

/* The per-thread state of a followed thread, created on first sight. */
static __always_inline struct prof_task *task_state(__u32 tid)
{
	struct prof_task *t = bpf_map_lookup_elem(&tasks, &tid);
	if (t)
		return t;
	struct prof_task fresh = {};
	bpf_map_update_elem(&tasks, &tid, &fresh, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t)
		count_lost();
	return t;
}

/* floor(log2(v)) for v > 0, without loops */
/* hist.h's index: exact below 2^(b+1), then 2^b buckets per power of two */
static __always_inline __u32 hist_index(__u64 v)
{
	const __u32 sub = 1u << PROF_HIST_SUB_BITS;
	if (v < 2 * sub)
		return (__u32)v;
	__u32 shift = log2_u64(v) - PROF_HIST_SUB_BITS;
	__u64 idx = (__u64)shift * sub + (v >> shift);
	return idx < PROF_HIST_BUCKETS ? (__u32)idx : PROF_HIST_BUCKETS - 1;
}

static __always_inline void hist_add(struct prof_hist *h, __u64 v)
{
	__u32 i = hist_index(v);
	if (i < PROF_HIST_BUCKETS)
		h->bucket[i]++;
	h->count++;
	h->sum += v;
	if (h->min_plus1 == 0 || v + 1 < h->min_plus1)
		h->min_plus1 = v + 1;
	if (v > h->max)
		h->max = v;
}

static __always_inline void intr_add(struct prof_intr *s, __u64 ns, int on_workload)
{
	s->count++;
	s->ns += ns;
	if (on_workload) {
		s->workload_count++;
		s->workload_ns += ns;
	}
}

static __always_inline void run_length(__u32 entry, __u64 ns)
{
	struct runlen *r = bpf_map_lookup_elem(&runlens, &entry);
	if (r)
		runlen_add(r, ns);
}

/* A thread enters the kernel from user space (a system call, a user fault). */
static __always_inline void entry_begin(struct prof_inflight *f, __u32 entry, __u64 now)
{
	f->entry = entry;
	f->entry_run_ns = 0;
	f->entry_resumed_ns = now;
}

/* ... and goes back: its run length is its time on the CPU since entry_begin. */
static __always_inline void entry_end(struct prof_inflight *f, __u32 entry, __u64 now)
{
	if (f->entry != entry)
		return;
	f->entry = 0;
	__u64 resumed = f->entry_resumed_ns;
	if (!resumed) { /* it slept in the entry: back on the CPU since its last switch-in */
		__u32 tid = (__u32)bpf_get_current_pid_tgid();
		struct prof_task *t = bpf_map_lookup_elem(&tasks, &tid);
		if (!t || !t->on_ns)
			return;
		resumed = t->on_ns;
	}
	run_length(entry, f->entry_run_ns + (now - resumed));
}

/* A followed thread in user space is current here: what interrupts it is an entry of its own. */
static __always_inline __u32 interrupts_user(void)
{
	if (!current_followed())
		return 0;
	struct prof_inflight *f = current_inflight(0);
	return !f || !f->entry;
}

/* ---- the process tree ---- */

SEC("raw_tp/sched_process_fork")
int BPF_PROG(oslens_prof_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!followed_tgid(ptgid))
		return 0;
	set_followed(BPF_CORE_READ(child, tgid), 1);
	return 0;
}

/* A dying task's accounting. Raw times: user space scales utime/stime to the
 * precise runtime as the kernel does for /proc. */
static __always_inline void read_exit(struct task_struct *p, struct prof_exit *e)
{
	e->utime_ns = BPF_CORE_READ(p, utime);
	e->stime_ns = BPF_CORE_READ(p, stime);
	e->runtime_ns = BPF_CORE_READ(p, se.sum_exec_runtime);
	e->nvcsw = BPF_CORE_READ(p, nvcsw);
	e->nivcsw = BPF_CORE_READ(p, nivcsw);
	e->min_flt = BPF_CORE_READ(p, min_flt);
	e->maj_flt = BPF_CORE_READ(p, maj_flt);
}

/* The exit record is made here, and completed at the task's last switch
 * (exit_completed): sum_exec_runtime is brought up to date only when the
 * scheduler runs, and a child that lives less than a tick without sleeping
 * (a fork loop's `cat`) still shows about 0 here; do_exit's own work after
 * this point (closing files, notifying the parent) is missing too. Made here
 * still, so that a task not yet switched out for the last time when the
 * maps are read has a record. */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(oslens_prof_exit)
{
	struct task_struct *p = (struct task_struct *)bpf_get_current_task_btf();
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (!followed_tgid(tgid))
		return 0;
	struct prof_exit e = {};
	e.tid = BPF_CORE_READ(p, pid);
	e.tgid = tgid;
	read_exit(p, &e);
	e.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(e.comm, sizeof e.comm);
	struct prof_exit_key k = {.tid = e.tid, .start_ns = BPF_CORE_READ(p, start_time)};
	if (bpf_map_update_elem(&exits, &k, &e, BPF_ANY)) {
		struct prof_cpu *c = this_cpu();
		if (c)
			c->exits_lost++;
	}
	return 0;
}

/* A followed task's last switch (TASK_DEAD): the scheduler has just charged
 * its last run to sum_exec_runtime (update_curr, before the tracepoint), so
 * its figures are final. */
static __always_inline void exit_completed(struct task_struct *prev, __u32 cpu)
{
	struct prof_exit_key k = {.tid = BPF_CORE_READ(prev, pid), .start_ns = BPF_CORE_READ(prev, start_time)};
	struct prof_exit *e = bpf_map_lookup_elem(&exits, &k);
	if (!e)
		return; /* its exit was counted in exits_lost */
	read_exit(prev, e);
	e->cpu = cpu;
}

/* The last moment a task is seen: forget its state (its tgid too once the
 * whole process is gone, so that a recycled pid is not followed). */
SEC("raw_tp/sched_process_free")
int BPF_PROG(oslens_prof_free, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	bpf_map_delete_elem(&tasks, &tid);
	if (tid == tgid)
		set_followed(tgid, 0);
	return 0;
}

/* ---- system calls ---- */

SEC("raw_tp/sys_enter")
int BPF_PROG(oslens_prof_sys_enter, struct pt_regs *regs, long id)
{
	if (!current_followed())
		return 0;
	struct prof_inflight *f = current_inflight(1);
	if (!f)
		return 0;
	f->sys_nr = id;
	f->sys_ns = bpf_ktime_get_ns();
	entry_begin(f, PE_SYSCALL, f->sys_ns);
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(oslens_prof_sys_exit, struct pt_regs *regs, long ret)
{
	struct prof_inflight *f = current_inflight(0);
	if (!f || !f->sys_ns)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 ns = now - f->sys_ns;
	__u32 nr = (__u32)f->sys_nr;
	f->sys_ns = 0;
	entry_end(f, PE_SYSCALL, now);
	struct prof_syscall *s = bpf_map_lookup_elem(&syscalls, &nr);
	if (!s) {
		__u32 zero = 0;
		struct prof_syscall *z = bpf_map_lookup_elem(&zero_syscall, &zero);
		if (!z)
			return 0;
		bpf_map_update_elem(&syscalls, &nr, z, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&syscalls, &nr);
		if (!s) {
			count_lost();
			return 0;
		}
	}
	hist_add(&s->h, ns);
	if (ret < 0 && ret >= -4095)
		s->errors++;
	return 0;
}

/* ---- scheduling ---- */

SEC("raw_tp/sched_switch")
int BPF_PROG(oslens_prof_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	struct prof_cpu *c = this_cpu();
	if (!c)
		return 0;
	learn_rq_lock(prev, &c->rq_known);

	if (followed_tgid(BPF_CORE_READ(prev, tgid))) {
		if (task_sched_state(prev) & TASK_DEAD)
			exit_completed(prev, cpu);
		struct prof_task *t = task_state(BPF_CORE_READ(prev, pid));
		if (t) {
			if (t->on_ns)
				c->ran_ns += now - t->on_ns;
			/* prev is the current task: its in-flight entry pauses */
			struct prof_inflight *f = current_inflight(0);
			if (f && f->entry) {
				__u64 resumed = f->entry_resumed_ns ? f->entry_resumed_ns : t->on_ns;
				if (resumed)
					f->entry_run_ns += now - resumed;
				f->entry_resumed_ns = 0;
			}
			t->on_ns = 0;
			t->off_ns = now;
			/* the kernel's own rule for nvcsw/nivcsw */
			int involuntary = preempt || task_sched_state(prev) == 0;
			t->off_involuntary = involuntary;
			t->ready_ns = involuntary ? now : 0;
			if (involuntary) {
				c->involuntary++;
				struct prof_preempt_key k = {};
				BPF_CORE_READ_STR_INTO(&k.comm, next, comm);
				if (BPF_CORE_READ(next, flags) & PF_KTHREAD)
					k.kind = PROF_BY_KTHREAD;
				else if (followed_tgid(BPF_CORE_READ(next, tgid)))
					k.kind = PROF_BY_WORKLOAD;
				else
					k.kind = PROF_BY_OTHER;
				__u64 *n = bpf_map_lookup_elem(&preempted_by, &k);
				if (!n) {
					__u64 zero = 0;
					bpf_map_update_elem(&preempted_by, &k, &zero, BPF_NOEXIST);
					n = bpf_map_lookup_elem(&preempted_by, &k);
				}
				if (n)
					__sync_fetch_and_add(n, 1);
				else
					c->lost++;
			} else {
				c->voluntary++;
			}
		}
	}

	if (followed_tgid(BPF_CORE_READ(next, tgid))) {
		struct prof_task *t = task_state(BPF_CORE_READ(next, pid));
		if (t) {
			c->switch_ins++;
			if (t->off_ns) {
				hist_add(t->off_involuntary ? &c->offcpu_involuntary : &c->offcpu_voluntary,
					 now - t->off_ns);
				t->off_ns = 0;
			}
			if (t->ready_ns) {
				hist_add(&c->runq, now - t->ready_ns);
				t->ready_ns = 0;
			}
			if (t->last_cpu && t->last_cpu != cpu + 1)
				c->migrated_switch_ins++;
			t->last_cpu = cpu + 1;
			t->on_ns = now;
		}
	}
	return 0;
}

static __always_inline void woken(struct task_struct *p)
{
	if (!followed_tgid(BPF_CORE_READ(p, tgid)))
		return;
	struct prof_task *t = task_state(BPF_CORE_READ(p, pid));
	struct prof_cpu *c = this_cpu();
	if (!t || !c)
		return;
	c->wakeups++;
	if (!t->ready_ns)
		t->ready_ns = bpf_ktime_get_ns();
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(oslens_prof_wakeup, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(oslens_prof_wakeup_new, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(oslens_prof_migrate, struct task_struct *p, int dest_cpu)
{
	if (!followed_tgid(BPF_CORE_READ(p, tgid)))
		return 0;
	struct prof_cpu *c = this_cpu();
	if (c)
		c->migrations++;
	return 0;
}

/* ---- page faults (see noise.bpf.c for the method) ---- */

static __always_inline void fault_start(int from_user)
{
	if (!current_followed())
		return;
	struct prof_inflight *f = current_inflight(1);
	if (!f)
		return;
	f->fault_ns = bpf_ktime_get_ns();
	if (from_user)
		entry_begin(f, PE_FAULT, f->fault_ns);
}

static __always_inline void fault_end(int major)
{
	if (!current_followed())
		return;
	struct prof_cpu *c = this_cpu();
	struct prof_inflight *f = current_inflight(0);
	if (!c)
		return;
	if (major)
		c->major_faults++;
	else
		c->minor_faults++;
	if (!f || !f->fault_ns)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 ns = now - f->fault_ns;
	entry_end(f, PE_FAULT, now);
	hist_add(&c->fault, ns);
	if (major)
		hist_add(&c->major_fault, ns);
	f->fault_ns = 0;
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(oslens_prof_fault_user, unsigned long address)
{
	fault_start(1);
	return 0;
}

SEC("raw_tp/page_fault_kernel")
int BPF_PROG(oslens_prof_fault_kernel, unsigned long address)
{
	fault_start(0);
	return 0;
}

SEC("perf_event")
int oslens_prof_fault_min(struct bpf_perf_event_data *ctx)
{
	fault_end(0);
	return 0;
}

SEC("perf_event")
int oslens_prof_fault_maj(struct bpf_perf_event_data *ctx)
{
	fault_end(1);
	return 0;
}

/* ---- interrupts, on every CPU ---- */

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(oslens_prof_irq_entry, int irq, struct irqaction *action)
{
	struct prof_cpu *c = this_cpu();
	if (!c)
		return 0;
	c->hardirq_start = bpf_ktime_get_ns();
	c->hardirq_on_workload = current_followed();
	c->hardirq_from_user = interrupts_user();
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(oslens_prof_irq_exit, int irq, struct irqaction *action)
{
	struct prof_cpu *c = this_cpu();
	if (!c || !c->hardirq_start)
		return 0;
	__u64 ns = bpf_ktime_get_ns() - c->hardirq_start;
	c->hardirq_start = 0;
	intr_add(&c->hardirq, ns, c->hardirq_on_workload);
	if (c->hardirq_from_user)
		run_length(PE_HARDIRQ, ns);
	__u32 key = irq;
	struct prof_irq *s = bpf_map_lookup_elem(&irqs, &key);
	if (!s) {
		struct prof_irq fresh = {};
		bpf_probe_read_kernel_str(fresh.name, sizeof fresh.name, BPF_CORE_READ(action, name));
		bpf_map_update_elem(&irqs, &key, &fresh, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&irqs, &key);
		if (!s) {
			c->lost++;
			return 0;
		}
		if (!s->name[0])
			bpf_probe_read_kernel_str(s->name, sizeof s->name, BPF_CORE_READ(action, name));
	}
	intr_add(&s->s, ns, c->hardirq_on_workload);
	return 0;
}

SEC("raw_tp/softirq_entry")
int BPF_PROG(oslens_prof_softirq_entry, unsigned int vec)
{
	struct prof_cpu *c = this_cpu();
	if (!c)
		return 0;
	c->softirq_start = bpf_ktime_get_ns();
	c->softirq_on_workload = current_followed();
	c->softirq_from_user = interrupts_user();
	return 0;
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(oslens_prof_softirq_exit, unsigned int vec)
{
	struct prof_cpu *c = this_cpu();
	if (!c || !c->softirq_start)
		return 0;
	__u64 ns = bpf_ktime_get_ns() - c->softirq_start;
	c->softirq_start = 0;
	intr_add(&c->softirq, ns, c->softirq_on_workload);
	if (c->softirq_from_user)
		run_length(PE_SOFTIRQ, ns);
	if (vec < PROF_SOFTIRQS)
		intr_add(&c->softirq_vec[vec], ns, c->softirq_on_workload);
	return 0;
}

static __always_inline void vector_entry(__u32 which)
{
	struct prof_cpu *c = this_cpu();
	if (!c)
		return;
	c->vector_start = bpf_ktime_get_ns();
	c->vector_which = which;
	c->vector_on_workload = current_followed();
	c->vector_from_user = interrupts_user();
}

static __always_inline void vector_exit(__u32 which)
{
	struct prof_cpu *c = this_cpu();
	if (!c || !c->vector_start || c->vector_which != which)
		return;
	__u64 ns = bpf_ktime_get_ns() - c->vector_start;
	c->vector_start = 0;
	intr_add(&c->vector, ns, c->vector_on_workload);
	if (c->vector_from_user)
		run_length(PE_VECTOR, ns);
	if (which < PV_MAX)
		intr_add(&c->vec[which], ns, c->vector_on_workload);
}

#define VECTOR(tp, which)                                  \
	SEC("raw_tp/" #tp "_entry")                        \
	int BPF_PROG(oslens_prof_##tp##_entry, int vector) \
	{                                                  \
		vector_entry(which);                       \
		return 0;                                  \
	}                                                  \
	SEC("raw_tp/" #tp "_exit")                         \
	int BPF_PROG(oslens_prof_##tp##_exit, int vector)  \
	{                                                  \
		vector_exit(which);                        \
		return 0;                                  \
	}

VECTOR(local_timer, PV_LOCAL_TIMER)
VECTOR(reschedule, PV_RESCHEDULE)
VECTOR(call_function, PV_CALL_FUNCTION)
VECTOR(call_function_single, PV_CALL_FUNCTION_SINGLE)
VECTOR(irq_work, PV_IRQ_WORK)

/* ---- kernel lock contention ---- */

__u64 lock_stacks_lost; /* waits whose stack found no room in kstacks */

SEC("raw_tp/contention_begin")
int BPF_PROG(oslens_prof_lock_begin, void *lock, unsigned int flags)
{
	if (!current_followed())
		return 0;
	struct prof_inflight *t = current_inflight(1);
	if (!t)
		return 0;
	/* a waiter that spins, then sleeps, begins twice: one wait */
	if (t->lock_ns && t->lock == (__u64)lock)
		return 0;
	t->lock_ns = bpf_ktime_get_ns();
	t->lock = (__u64)lock;
	t->lock_flags = flags;
	if (kstack_take(ctx, &t->lock_stack) != 0)
		__sync_fetch_and_add(&lock_stacks_lost, 1);
	return 0;
}

SEC("raw_tp/contention_end")
int BPF_PROG(oslens_prof_lock_end, void *lock, int ret)
{
	struct prof_inflight *t = current_inflight(0);
	if (!t || !t->lock_ns || t->lock != (__u64)lock)
		return 0;
	__u64 ns = bpf_ktime_get_ns() - t->lock_ns;
	t->lock_ns = 0;
	struct prof_lock_key k = {.lock = t->lock, .stack = t->lock_stack, .flags = t->lock_flags};
	struct prof_lock *l = bpf_map_lookup_elem(&locks, &k);
	if (!l) {
		struct prof_lock fresh = {.named = lock_named(k.lock)};
		bpf_map_update_elem(&locks, &k, &fresh, BPF_NOEXIST);
		l = bpf_map_lookup_elem(&locks, &k);
		if (!l) {
			count_lost();
			return 0;
		}
	}
	__sync_fetch_and_add(&l->count, 1);
	__sync_fetch_and_add(&l->total_ns, ns);
	if (ns > l->max_ns)
		l->max_ns = ns;
	return 0;
}

/* ---- sampled kernel stacks (profile.h) ---- */

__u64 samples_lost; /* samples that found no room for their stack or count */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct prof_sample_key);
	__type(value, __u64);
} sampled SEC(".maps");

/* A CPU's clock ticked: the stack of the workload's thread it interrupted. */
SEC("perf_event")
int oslens_prof_sample(struct bpf_perf_event_data *ctx)
{
	if (!current_followed())
		return 0;
	__u64 stack;
	if (kstack_take(ctx, &stack) != 0) {
		__sync_fetch_and_add(&samples_lost, 1);
		return 0;
	}
	struct prof_sample_key k = {.kernel = stack != 0, .id = stack ? kstack_orig_ax() : -1, .stack = stack};
	if (kstack_count(&sampled, &k) != 0)
		__sync_fetch_and_add(&samples_lost, 1);
	return 0;
}
