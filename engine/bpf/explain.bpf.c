// SPDX-License-Identifier: GPL-2.0
/* Why a probe stops scaling, kernel side (see explain.h): each probed
 * thread is a small state machine — user space, a system call, a page
 * fault, a lock wait, nested in that order as the kernel nests them, and on
 * or off a CPU — and every transition charges the time since the previous
 * one to the innermost state, clipped to the measured window. Interrupts
 * taken while a probed thread runs are charged to the interrupt. Raw
 * tracepoints throughout, and a clock per thread whose ticks sample its
 * kernel stack under the cause it is in; aggregated in maps: nothing is
 * streamed. */
#include "common.bpf.h"

#include "explain.h"
#include "kstack.bpf.h"
#include "locknames.bpf.h"

/* The processes whose threads are charged, one bit per tgid. */
#define EXPLAIN_PID_WORDS ((1u << 22) / 64)
__u64 followed[EXPLAIN_PID_WORDS];
/* The processes that serve a worker (explain.h, EXF_HELPER), one bit per
 * tgid: its children, its partner; helper_of says which worker. */
__u64 helpers[EXPLAIN_PID_WORDS];
/* The oslens master's processes (the engine and its parent), one bit per
 * tgid: a runnable worker's CPU taken by them is the master's. */
__u64 masters[EXPLAIN_PID_WORDS];

/* Light mode (explain.h): set before loading, so the verifier drops what
 * full mode alone needs; the period of the CPU clocks that sample it, what
 * one sample of a wait for a CPU stands for. */
const volatile __u32 light_mode = 0;
const volatile __u64 light_period_ns = 0;

/* The measured window, CLOCK_MONOTONIC, set by the loader once it is
 * known; until then nothing is charged. */
__u64 window_start_ns = ~0ull;
__u64 window_end_ns = ~0ull;
__u64 lost;	      /* updates that found no room */
__u64 samples_lost;   /* samples that found no room for their stack or count */
__u64 off_cpu_unseen; /* light: a worker off its CPU not yet seen on it (its task unknown) */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct explain_task);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct explain_key);
	__type(value, struct explain_val);
} charged SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct explain_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); /* a line per CPU, not one every CPU writes */
	__uint(max_entries, EE_MAX);
	__type(key, __u32);
	__type(value, struct runlen);
} runlens SEC(".maps");

/* Sampled kernel stacks: a count per cause and stack (explain.h), the
 * stacks by their hash, and room to take one before it is hashed. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct explain_sample_key);
	__type(value, __u64);
} sampled SEC(".maps");

/* A runnable worker waiting on each CPU, and who had that CPU meanwhile
 * (explain.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EXPLAIN_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct runq_wait);
} runq_waits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct runq_taker_key);
	__type(value, struct explain_val);
} runq_takers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);   /* a helper's tgid */
	__type(value, __u32); /* the worker it serves */
} helper_of SEC(".maps");

/* The threads with a clock of their own (the workers): the CPU clocks leave
 * them to it, and sample every other probed thread (a helper, or a
 * partner thread in thread mode, which is of a worker's process). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} clocked SEC(".maps");

/* Light mode: the workers pinned to each CPU (explain.h), and each
 * worker's task and saved registers, taken when its CPU's clock first
 * finds it running: read while it is off the CPU, they say whether it is
 * runnable and which system call it sleeps in. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EXPLAIN_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct explain_cpu_workers);
} cpu_workers SEC(".maps");

struct explain_watched {
	__u64 task; /* its struct task_struct, read with probe reads only */
	__u64 regs; /* its struct pt_regs at the top of its kernel stack; 0 not known */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct explain_watched);
} watched SEC(".maps");

/* ---- helpers ---- */

/* Bit tgid of a set of EXPLAIN_PID_WORDS words. Masked, not compared: a
 * pid is below PID_MAX_LIMIT (2^22), and a bound the compiler can prove
 * it drops, indexing with a copy the verifier then finds unbounded. */
static __always_inline int bit_set(const __u64 *set, __u32 tgid)
{
	__u32 w = (tgid / 64) & (EXPLAIN_PID_WORDS - 1);
	return (set[w] >> (tgid % 64)) & 1;
}

static __always_inline int followed_tgid(__u32 tgid)
{
	return bit_set(followed, tgid);
}

/* Whether tgid's threads are probed: a worker's process (*served 0), or a
 * helper of the worker *served. */
static __always_inline int probed(__u32 tgid, __u32 *served)
{
	*served = 0;
	if (followed_tgid(tgid))
		return 1;
	if (!bit_set(helpers, tgid))
		return 0;
	__u32 *w = bpf_map_lookup_elem(&helper_of, &tgid);
	if (!w)
		return 0;
	*served = *w;
	return 1;
}

/* A helper's charges and samples are its worker's, marked as a helper's. */
static __always_inline void as_served(const struct explain_task *t, __u32 *tid, __u16 *flags)
{
	if (t && t->served) {
		*tid = t->served;
		*flags |= EXF_HELPER;
	}
}

static __always_inline __u64 clip(__u64 t)
{
	if (t < window_start_ns)
		return window_start_ns;
	if (t > window_end_ns)
		return window_end_ns;
	return t;
}

static __always_inline int in_window(__u64 t)
{
	return t >= window_start_ns && t <= window_end_ns;
}

static __always_inline void add(const struct explain_key *k, __u64 ns, __u64 count)
{
	struct explain_val *v = bpf_map_lookup_elem(&charged, k);
	if (!v) {
		struct explain_val zero = {};
		bpf_map_update_elem(&charged, k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&charged, k);
		if (!v) {
			__sync_fetch_and_add(&lost, 1);
			return;
		}
	}
	__sync_fetch_and_add(&v->ns, ns);
	__sync_fetch_and_add(&v->count, count);
}

/* Frame i of t, or NULL: masked so that the verifier sees the bound. */
static __always_inline struct explain_frame *frame_at(struct explain_task *t, __u32 i)
{
	if (i >= EXPLAIN_NEST)
		return NULL;
	return &t->f[i & (EXPLAIN_NEST - 1)];
}

static __always_inline struct explain_frame *top_frame(struct explain_task *t)
{
	__u32 d = t->depth;
	return d ? frame_at(t, d - 1) : NULL;
}

/* The state probed thread t is charged to now, as if it were not a helper. */
static __always_inline void own_key(struct explain_task *t, __u32 tid, struct explain_key *k)
{
	__builtin_memset(k, 0, sizeof *k);
	k->tid = tid;
	__u32 d = t->depth;
	const struct explain_frame *top = top_frame(t);
	if (top && top->kind == EX_LOCK) { /* a lock wait is the lock's, asleep or not */
		k->kind = EX_LOCK;
		k->flags = top->flags;
		k->stack = top->stack;
		k->named = top->named;
		k->id = top->id;
		return;
	}
	if (t->off_cpu) {
		k->kind = t->off_cpu;
		k->id = light_mode ? t->off_id : -1;
		/* the system call it waits in, which says why it waits */
		for (int i = EXPLAIN_NEST - 1; i >= 0; i--) {
			struct explain_frame *f = frame_at(t, i);
			if (f && i < d && f->kind == EX_SYSCALL) {
				k->id = f->id;
				break;
			}
		}
		return;
	}
	if (!top) {
		k->kind = EX_USER;
		return;
	}
	k->kind = top->kind;
	k->id = top->id;
}

/* The state probed thread t is charged to now. */
static __always_inline void current_key(struct explain_task *t, __u32 tid, struct explain_key *k)
{
	own_key(t, tid, k);
	as_served(t, &k->tid, &k->flags);
}

/* Charges t's time since its last transition to what it was in; on a CPU
 * inside a kernel entry, that time is also the entry's. Never backwards:
 * an interrupt can come between a program's clock read and its charge,
 * and the interrupt's exit has charged up to a later instant already —
 * going back to `now` would charge that stretch twice. */
static __always_inline void charge(struct explain_task *t, __u32 tid, __u64 now)
{
	if (now <= t->last_ns)
		return;
	__u64 lo = clip(t->last_ns), hi = clip(now);
	if (t->depth && !t->off_cpu)
		t->entry_ns += now - t->last_ns;
	t->last_ns = now;
	if (hi <= lo)
		return;
	struct explain_key k;
	current_key(t, tid, &k);
	/* light: between its lock waits and interrupts, nothing times a
	 * thread; that time is the samples' to split */
	if (light_mode && k.kind != EX_LOCK)
		return;
	add(&k, hi - lo, 0);
}

/* A kernel entry of `entry` kind that ran `ns` on the CPU has ended. */
static __always_inline void run_length(__u32 entry, __u64 ns, __u64 now)
{
	if (!in_window(now))
		return;
	struct runlen *r = bpf_map_lookup_elem(&runlens, &entry);
	if (r)
		runlen_add(r, ns);
}

static __always_inline struct explain_task *task_of(__u32 tid, int create, __u32 served)
{
	struct explain_task *t = bpf_map_lookup_elem(&tasks, &tid);
	if (t || !create)
		return t;
	struct explain_task fresh = {.last_ns = bpf_ktime_get_ns(), .served = served};
	bpf_map_update_elem(&tasks, &tid, &fresh, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&tasks, &tid);
	if (!t)
		__sync_fetch_and_add(&lost, 1);
	return t;
}

/* The current thread's state, if it is probed. */
static __always_inline struct explain_task *current_task(__u32 *tid)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 served;
	if (!probed(id >> 32, &served))
		return NULL;
	*tid = (__u32)id;
	return task_of(*tid, 1, served);
}

static __always_inline void count_entry(const struct explain_task *t, __u32 tid, __u16 kind, __s64 id, __u64 now)
{
	if (!in_window(now))
		return;
	struct explain_key k = {.tid = tid, .kind = kind, .id = id};
	as_served(t, &k.tid, &k.flags);
	add(&k, 0, 1);
}

/* Enters a frame; counted now, or by its end where only the end knows
 * what it was (a fault: minor or major). */
static __always_inline void push(struct explain_task *t, __u32 tid, __u16 kind, __s64 id, __u64 now, int count)
{
	charge(t, tid, now);
	__u32 d = t->depth;
	struct explain_frame *f = frame_at(t, d);
	if (!f) {
		__sync_fetch_and_add(&lost, 1);
		return;
	}
	f->kind = kind;
	f->id = id;
	f->flags = 0;
	f->stack = 0;
	f->named = 0;
	t->depth = d + 1;
	if (count)
		count_entry(t, tid, kind, id, now);
}

/* Leaves the innermost frame of `kind`, and any frame above it (a fault
 * whose end was not seen, say). */
static __always_inline void pop(struct explain_task *t, __u32 tid, __u16 kind, __u64 now)
{
	charge(t, tid, now);
	for (int i = EXPLAIN_NEST - 1; i >= 0; i--) {
		struct explain_frame *f = frame_at(t, i);
		if (f && i < t->depth && f->kind == kind) {
			t->depth = i;
			return;
		}
	}
}

/* ---- system calls ---- */

SEC("raw_tp/sys_enter")
int BPF_PROG(oslens_ex_sys_enter, struct pt_regs *regs, long id)
{
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	charge(t, tid, now);
	t->depth = 0; /* from user space, whatever was left open */
	t->off_cpu = 0;
	t->entry_ns = 0;
	push(t, tid, EX_SYSCALL, id, now, 1);
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(oslens_ex_sys_exit, struct pt_regs *regs, long ret)
{
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	charge(t, tid, now);
	if (t->depth) {
		struct explain_frame *outer = frame_at(t, 0);
		if (outer && outer->kind == EX_SYSCALL && !t->served)
			run_length(EE_SYSCALL, t->entry_ns, now);
	}
	t->depth = 0; /* back to user space */
	t->entry_ns = 0;
	return 0;
}

/* ---- page faults: from the exceptions tracepoint to the perf software
 * fault event that handle_mm_fault() raises when it is done ---- */

static __always_inline int fault_start(void)
{
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (!t->depth) { /* a fault from user space: an entry of its own */
		charge(t, tid, now);
		t->entry_ns = 0;
	}
	push(t, tid, EX_FAULT, 2, now, 0);
	return 0;
}

static __always_inline int fault_end(int major)
{
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct explain_frame *top = top_frame(t);
	if (top && top->kind == EX_FAULT)
		top->id = major; /* charged as minor or major from the start */
	pop(t, tid, EX_FAULT, now);
	count_entry(t, tid, EX_FAULT, major, now);
	if (!t->depth) { /* the entry from user space ends here */
		if (!t->served)
			run_length(EE_FAULT, t->entry_ns, now);
		t->entry_ns = 0;
	}
	return 0;
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(oslens_ex_fault_user, unsigned long address)
{
	return fault_start();
}

SEC("raw_tp/page_fault_kernel")
int BPF_PROG(oslens_ex_fault_kernel, unsigned long address)
{
	return fault_start();
}

SEC("perf_event")
int oslens_ex_fault_min(struct bpf_perf_event_data *ctx)
{
	return fault_end(0);
}

SEC("perf_event")
int oslens_ex_fault_maj(struct bpf_perf_event_data *ctx)
{
	return fault_end(1);
}

/* ---- kernel locks ---- */

#define LCB_F_SPIN 1 /* include/trace/events/lock.h: the waiter spins */

/* Light mode: the lock waits that sleep, open now on any task. A
 * spinner's contention_end runs with the lock held, so a task lookup there
 * lengthens the critical section every other waiter queues on; with no
 * sleeping wait open, an end has nothing to close and returns at once. A
 * wait whose frame goes another way than its end leaves the count high:
 * the lookups come back, the figures stay right. */
__u64 sleeping_lock_waits = 0;

/* Light mode: a sleeping wait takes its stack when a random u32 is at most
 * this; the loader lowers it as the window opens (explain.h,
 * EXPLAIN_LIGHT_LOCK_STACKS_PER_S). */
__u32 lock_stacks_below = ~0u;

__u64 lock_stacks_lost; /* waits whose stack found no room in kstacks */

/* Light mode: the contention events each CPU sees, by kind (explain.h:
 * the loader weighs them when the window opens). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EL_MAX);
	__type(key, __u32);
	__type(value, __u64);
} lock_events SEC(".maps");

SEC("raw_tp/contention_begin")
int BPF_PROG(oslens_ex_lock_begin, void *lock, unsigned int flags)
{
	/* light: a spinning waiter is on its CPU, where the clock samples it
	 * with its stack (the slow path, and who called it); only a waiter
	 * that sleeps is timed here, at a rate its switches bound. Timing
	 * every spin cost 42 % of dup's throughput at 2 threads: its end runs
	 * inside the critical section every other waiter queues on. */
	if (light_mode) {
		__u32 kind = flags & LCB_F_SPIN ? EL_SPIN : EL_SLEEP;
		__u64 *seen = bpf_map_lookup_elem(&lock_events, &kind);
		if (seen)
			*seen += 1;
		if (kind == EL_SPIN)
			return 0;
	}
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t)
		return 0;
	struct explain_frame *top = top_frame(t);
	/* a waiter that spins, then sleeps, begins twice: one wait */
	if (top && top->kind == EX_LOCK && top->id == (__s64)lock)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	charge(t, tid, now);
	__u32 d = t->depth;
	struct explain_frame *f = frame_at(t, d);
	if (!f) {
		__sync_fetch_and_add(&lost, 1);
		return 0;
	}
	f->kind = EX_LOCK;
	f->id = (__s64)lock;
	f->flags = (__u16)flags;
	if (light_mode && bpf_get_prandom_u32() > *(volatile __u32 *)&lock_stacks_below) {
		f->flags |= EXF_UNSTACKED;
		f->stack = 0;
	} else if (kstack_take(ctx, &f->stack) != 0) {
		__sync_fetch_and_add(&lock_stacks_lost, 1);
	}
	f->named = lock_named((__u64)lock);
	t->depth = d + 1;
	if (light_mode)
		__sync_fetch_and_add(&sleeping_lock_waits, 1);
	if (in_window(now)) {
		struct explain_key k = {.tid = tid,
					.kind = EX_LOCK,
					.flags = f->flags,
					.stack = f->stack,
					.named = f->named,
					.id = f->id};
		add(&k, 0, 1);
	}
	return 0;
}

SEC("raw_tp/contention_end")
int BPF_PROG(oslens_ex_lock_end, void *lock, int ret)
{
	if (light_mode && !*(volatile __u64 *)&sleeping_lock_waits)
		return 0;
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t)
		return 0;
	struct explain_frame *top = top_frame(t);
	if (top && top->kind == EX_LOCK && top->id == (__s64)lock) {
		pop(t, tid, EX_LOCK, bpf_ktime_get_ns());
		if (light_mode)
			__sync_fetch_and_add(&sleeping_lock_waits, -1);
	}
	return 0;
}

/* ---- on and off the CPU ---- */

/* ---- who takes the CPU a runnable worker waits for ---- */

static __always_inline int master_tgid(__u32 tgid)
{
	return bit_set(masters, tgid);
}

static __always_inline void add_taker(const struct runq_taker_key *k, __u64 ns, __u64 count)
{
	struct explain_val *v = bpf_map_lookup_elem(&runq_takers, k);
	if (!v) {
		struct explain_val zero = {};
		bpf_map_update_elem(&runq_takers, k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&runq_takers, k);
		if (!v) {
			__sync_fetch_and_add(&lost, 1);
			return;
		}
	}
	__sync_fetch_and_add(&v->ns, ns);
	__sync_fetch_and_add(&v->count, count);
}

/* Who task p, which had the CPU a worker waited for, is: k's who, taker
 * and comm. */
static __always_inline void taker_of(struct task_struct *p, struct runq_taker_key *k)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (BPF_CORE_READ(p, flags) & PF_KTHREAD)
		k->who = RQ_KTHREAD;
	/* in thread mode the workers are threads of the engine: its main
	 * thread (tid = its pid) is the master, its other threads workers */
	else if (master_tgid(BPF_CORE_READ(p, pid)) || (master_tgid(tgid) && !followed_tgid(tgid)))
		k->who = RQ_MASTER;
	else if (followed_tgid(tgid)) {
		k->who = RQ_WORKER;
		k->taker = BPF_CORE_READ(p, pid);
	} else if (followed_tgid(BPF_CORE_READ(p, real_parent, tgid)))
		k->who = RQ_CHILD;
	else
		k->who = RQ_OTHER;
	BPF_CORE_READ_STR_INTO(&k->comm, p, comm);
}

/* Charges w's wait since its last charge, up to now, to task p that had
 * the CPU; the wait goes on from now. */
static __always_inline void charge_taker(struct runq_wait *w, struct task_struct *p, __u64 now)
{
	__u64 lo = clip(w->since_ns), hi = clip(now);
	w->since_ns = now;
	if (hi <= lo || !p)
		return;
	struct runq_taker_key k = {.tid = w->tid};
	taker_of(p, &k);
	add_taker(&k, hi - lo, 1);
}

static __always_inline struct runq_wait *wait_on(__u32 cpu)
{
	return bpf_map_lookup_elem(&runq_waits, &cpu);
}

/* Worker tid is runnable on cpu from now. */
static __always_inline void wait_begins(__u32 tid, __u32 cpu, __u64 now)
{
	struct runq_wait *w = wait_on(cpu);
	if (w) {
		w->tid = tid;
		w->since_ns = now;
	}
}

/* This CPU's run queue lock, for lock_named() (locknames.bpf.h). */
static __always_inline void learn_this_rq_lock(struct task_struct *p)
{
	__u32 zero = 0;
	struct explain_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (c)
		learn_rq_lock(p, &c->rq_known);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(oslens_ex_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 cpu = bpf_get_smp_processor_id();
	learn_this_rq_lock(prev);
	/* a worker waits for this CPU: prev had it */
	struct runq_wait *w = wait_on(cpu);
	if (w && w->tid) {
		if (w->tid != BPF_CORE_READ(prev, pid))
			charge_taker(w, prev, now);
		if (w->tid == BPF_CORE_READ(next, pid))
			w->tid = 0;
	}
	__u32 served;
	if (probed(BPF_CORE_READ(prev, tgid), &served)) {
		__u32 tid = BPF_CORE_READ(prev, pid);
		struct explain_task *t = task_of(tid, 1, served);
		if (t) {
			charge(t, tid, now);
			/* preempted, or still runnable: it waits for a CPU */
			t->off_cpu = preempt || task_sched_state(prev) == 0 ? EX_RUNQ : EX_BLOCKED;
			if (light_mode) /* prev is the current thread */
				t->off_id = kstack_orig_ax();
			/* who takes the CPU is followed for workers only (one waiter per CPU) */
			if (t->off_cpu == EX_RUNQ && prev != next && !t->served)
				wait_begins(tid, cpu, now);
		}
	}
	if (probed(BPF_CORE_READ(next, tgid), &served)) {
		__u32 tid = BPF_CORE_READ(next, pid);
		struct explain_task *t = task_of(tid, 1, served);
		if (t) {
			charge(t, tid, now);
			t->off_cpu = 0;
		}
	}
	return 0;
}

static __always_inline int woken(struct task_struct *p)
{
	__u32 served;
	if (!probed(BPF_CORE_READ(p, tgid), &served))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	struct explain_task *t = task_of(tid, 0, 0);
	if (t && t->off_cpu == EX_BLOCKED) {
		__u64 now = bpf_ktime_get_ns();
		charge(t, tid, now);
		t->off_cpu = EX_RUNQ;
		if (!t->served)
			wait_begins(tid, BPF_CORE_READ(p, thread_info.cpu), now);
	}
	return 0;
}

/* A waiting worker moved to another CPU's run queue: its wait goes on
 * there. The stretch on the old CPU since its last switch is not charged
 * to a taker (what runs there is not known here). */
SEC("raw_tp/sched_migrate_task")
int BPF_PROG(oslens_ex_migrate, struct task_struct *p, int dest_cpu)
{
	if (!followed_tgid(BPF_CORE_READ(p, tgid)))
		return 0;
	__u32 tid = BPF_CORE_READ(p, pid);
	struct explain_task *t = task_of(tid, 0, 0);
	if (!t || t->off_cpu != EX_RUNQ)
		return 0;
	struct runq_wait *old = wait_on(BPF_CORE_READ(p, thread_info.cpu));
	if (old && old->tid == tid)
		old->tid = 0;
	wait_begins(tid, dest_cpu, bpf_ktime_get_ns());
	return 0;
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(oslens_ex_wakeup, struct task_struct *p)
{
	return woken(p);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(oslens_ex_wakeup_new, struct task_struct *p)
{
	return woken(p);
}

/* A worker forks: the child (a new process, not a thread of the worker's)
 * is its helper — fork's child, which it waits for in wait4 — followed
 * until it is freed. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(oslens_ex_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 tgid = BPF_CORE_READ(child, tgid);
	if (!followed_tgid(BPF_CORE_READ(parent, tgid)) || followed_tgid(tgid))
		return 0;
	__u32 worker = BPF_CORE_READ(parent, pid), w = tgid / 64;
	if (w >= EXPLAIN_PID_WORDS || bpf_map_update_elem(&helper_of, &tgid, &worker, BPF_ANY))
		return 0;
	__sync_fetch_and_or(&helpers[w], 1ull << (tgid % 64));
	return 0;
}

SEC("raw_tp/sched_process_free")
int BPF_PROG(oslens_ex_free, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid), tgid = BPF_CORE_READ(p, tgid);
	bpf_map_delete_elem(&tasks, &tid);
	if (tid == tgid && bit_set(helpers, tgid)) {
		__sync_fetch_and_and(&helpers[tgid / 64 % EXPLAIN_PID_WORDS], ~(1ull << (tgid % 64)));
		bpf_map_delete_elem(&helper_of, &tgid);
	}
	return 0;
}

/* ---- interrupts taken while a probed thread runs ---- */

static __always_inline void intr_enter(__u16 kind, __s64 id)
{
	__u32 zero = 0;
	struct explain_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (!c)
		return;
	if (c->depth++)
		return; /* nested: the outermost takes it all */
	c->tid = 0;
	c->waiter = 0;
	c->kind = kind; /* whoever it interrupts: a sampled wait for this CPU reads it */
	c->id = id;
	__u32 tid;
	struct explain_task *t = current_task(&tid);
	if (!t) {
		/* a worker waits for this CPU: the interrupt takes it from
		 * the task that had it */
		struct runq_wait *w = wait_on(bpf_get_smp_processor_id());
		if (w && w->tid) {
			__u64 now = bpf_ktime_get_ns();
			charge_taker(w, (struct task_struct *)bpf_get_current_task(), now);
			c->waiter = 1;
			c->kind = kind;
			c->id = id;
		}
		return;
	}
	__u64 now = bpf_ktime_get_ns();
	charge(t, tid, now);
	c->start_ns = now;
	c->tid = tid;
	c->kind = kind;
	c->id = id;
}

static __always_inline void intr_exit(void)
{
	__u32 zero = 0;
	struct explain_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (!c || !c->depth)
		return;
	if (--c->depth)
		return;
	if (c->waiter) {
		c->waiter = 0;
		struct runq_wait *w = wait_on(bpf_get_smp_processor_id());
		if (!w || !w->tid)
			return;
		__u64 now = bpf_ktime_get_ns();
		__u64 lo = clip(w->since_ns), hi = clip(now);
		w->since_ns = now;
		if (hi > lo) {
			struct runq_taker_key k = {.tid = w->tid, .who = RQ_INTERRUPT, .kind = c->kind, .id = c->id};
			add_taker(&k, hi - lo, 1);
		}
		return;
	}
	if (!c->tid)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u64 lo = clip(c->start_ns), hi = clip(now);
	struct explain_key k = {.tid = c->tid, .kind = c->kind, .id = c->id};
	struct explain_task *t = task_of(c->tid, 0, 0);
	as_served(t, &k.tid, &k.flags);
	if (hi > lo || in_window(c->start_ns))
		add(&k, hi > lo ? hi - lo : 0, in_window(c->start_ns));
	if (t) {
		t->last_ns = now; /* the interrupt's time is charged */
		if (t->depth)
			t->entry_ns += now - c->start_ns; /* part of the kernel entry it interrupted */
		else if (!t->served)
			run_length(EE_INTERRUPT, now - c->start_ns, now);
	}
	c->tid = 0;
}

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(oslens_ex_irq_entry, int irq, struct irqaction *action)
{
	intr_enter(EX_IRQ, irq);
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(oslens_ex_irq_exit, int irq, struct irqaction *action, int ret)
{
	intr_exit();
	return 0;
}

SEC("raw_tp/softirq_entry")
int BPF_PROG(oslens_ex_softirq_entry, unsigned int vec)
{
	intr_enter(EX_SOFTIRQ, vec);
	return 0;
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(oslens_ex_softirq_exit, unsigned int vec)
{
	intr_exit();
	return 0;
}

#define VECTOR(tp, which)                                \
	SEC("raw_tp/" #tp "_entry")                      \
	int BPF_PROG(oslens_ex_##tp##_entry, int vector) \
	{                                                \
		intr_enter(EX_VECTOR, which);            \
		return 0;                                \
	}                                                \
	SEC("raw_tp/" #tp "_exit")                       \
	int BPF_PROG(oslens_ex_##tp##_exit, int vector)  \
	{                                                \
		intr_exit();                             \
		return 0;                                \
	}

VECTOR(local_timer, EV_LOCAL_TIMER)
VECTOR(reschedule, EV_RESCHEDULE)
VECTOR(call_function, EV_CALL_FUNCTION)
VECTOR(call_function_single, EV_CALL_FUNCTION_SINGLE)
VECTOR(irq_work, EV_IRQ_WORK)

/* ---- cross-CPU work the probed threads cause ---- */

static __always_inline void count_current(__u16 kind, __s64 id)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 served, tid = (__u32)pid_tgid;
	if (!probed(pid_tgid >> 32, &served))
		return;
	count_entry(task_of(tid, 0, 0), tid, kind, id, bpf_ktime_get_ns());
}

SEC("raw_tp/ipi_send_cpu")
int BPF_PROG(oslens_ex_ipi_send_cpu, unsigned int cpu, unsigned long callsite, void *callback)
{
	count_current(EX_IPI_SENT, (__s64)callback);
	return 0;
}

SEC("raw_tp/ipi_send_cpumask")
int BPF_PROG(oslens_ex_ipi_send_cpumask, struct cpumask *mask, unsigned long callsite, void *callback)
{
	count_current(EX_IPI_SENT, (__s64)callback);
	return 0;
}

SEC("raw_tp/tlb_flush")
int BPF_PROG(oslens_ex_tlb_flush, int reason, unsigned long pages)
{
	count_current(EX_TLB_FLUSH, reason);
	return 0;
}

/* ---- sampled kernel stacks ---- */

/* A probed thread runs under a clock's tick (a software perf event, on the
 * thread in full mode: it runs only while the thread does; on its CPU in
 * light mode). The sample is the cause the thread is in, as charge() would
 * charge it now, and the stack of what the tick interrupted. The tick
 * comes in a hard interrupt (an hrtimer), and hard interrupts do not nest:
 * an interrupt under way on this CPU is that tick's own (counted as such
 * in `charges`), unless it is a softirq, which runs with interrupts on —
 * then the sample is the softirq's. served: the worker a helper serves. */
static __always_inline void sample_running(struct bpf_perf_event_data *ctx, __u32 tid, __u32 served)
{
	struct explain_key cause = {.tid = tid, .kind = EX_USER};
	struct explain_task *t = task_of(tid, 0, 0);
	if (t)
		own_key(t, tid, &cause);
	__u32 zero = 0;
	struct explain_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (c && c->depth && c->tid == tid && c->kind == EX_SOFTIRQ) {
		cause.kind = EX_SOFTIRQ;
		cause.id = c->id;
		cause.flags = 0;
		cause.named = 0;
	}
	__u64 stack;
	if (kstack_take(ctx, &stack) != 0) {
		__sync_fetch_and_add(&samples_lost, 1);
		return;
	}
	if (light_mode && cause.kind == EX_USER && stack) { /* in the kernel: which entry, the stack says */
		cause.kind = EX_KERNEL;
		cause.id = kstack_orig_ax();
	}
	if (served) { /* a helper's sample is its worker's, marked */
		cause.tid = served;
		cause.flags |= EXF_HELPER;
	}
	struct explain_sample_key k = {
		.tid = tid,
		.kind = cause.kind,
		.flags = cause.flags,
		.named = cause.named,
		.id = cause.id,
		.stack = stack,
	};
	if (kstack_count(&sampled, &k) != 0)
		__sync_fetch_and_add(&samples_lost, 1);
}

/* Light mode, where no program sees a fork: the current task is a child a
 * worker forked (fork's, which it waits for in wait4) — *served that
 * worker's thread, the one that forked it. */
static __always_inline int worker_child(__u32 *served)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	struct task_struct *parent = BPF_CORE_READ(cur, real_parent);
	if (!parent || !followed_tgid(BPF_CORE_READ(parent, tgid)))
		return 0;
	*served = BPF_CORE_READ(parent, pid);
	return 1;
}

/* Light mode: worker tid runs on this CPU; its task and saved registers
 * are kept the first time, for the ticks that find it off the CPU. */
static __always_inline void remember_running(__u32 tid)
{
	if (bpf_map_lookup_elem(&watched, &tid))
		return;
	struct explain_watched fresh = {.task = bpf_get_current_task()};
#if defined(__TARGET_ARCH_x86)
	fresh.regs = (__u64)bpf_task_pt_regs(bpf_get_current_task_btf());
#endif
	bpf_map_update_elem(&watched, &tid, &fresh, BPF_NOEXIST);
}

/* Light mode: who has this CPU while a worker waits for it — a softirq
 * under way here, or the task the tick interrupted — for one period. */
static __always_inline void sample_taker(__u32 wtid)
{
	struct runq_taker_key k = {.tid = wtid};
	__u32 zero = 0;
	struct explain_cpu *c = bpf_map_lookup_elem(&cpus, &zero);
	if (c && c->depth && c->kind == EX_SOFTIRQ) {
		k.who = RQ_INTERRUPT;
		k.kind = EX_SOFTIRQ;
		k.id = c->id;
	} else {
		taker_of((struct task_struct *)bpf_get_current_task(), &k);
	}
	add_taker(&k, light_period_ns, 1);
}

/* Light mode: worker wtid, pinned to this CPU, is not what runs here. The
 * tick samples it where it is: runnable and waiting for the CPU (EX_RUNQ,
 * with who has it), or asleep (EX_BLOCKED) — in the system call its saved
 * registers name — or in a lock wait its contention began (EX_LOCK, which
 * is also timed exactly). No stack: a sleeping task's would need a helper
 * that the tick's program cannot call on it. */
static __always_inline void sample_off_cpu(__u32 wtid, __u32 cpu)
{
	struct explain_watched *w = bpf_map_lookup_elem(&watched, &wtid);
	if (!w) {
		__sync_fetch_and_add(&off_cpu_unseen, 1);
		return;
	}
	struct task_struct *p = (struct task_struct *)w->task;
	if (BPF_CORE_READ(p, thread_info.cpu) != cpu)
		return; /* moved off the CPU it was pinned to: not this clock's */
	int queued = BPF_CORE_READ(p, on_rq);
	struct explain_sample_key k = {
		.tid = wtid, .kind = queued ? EX_RUNQ : EX_BLOCKED, .flags = EXF_OFF_CPU, .id = -1};
#if defined(__TARGET_ARCH_x86)
	/* in a system call, its entry saved -ENOSYS as ax until it returns;
	 * anything else is a fault's error code or an interrupt's vector */
	struct pt_regs *regs = (struct pt_regs *)w->regs;
	if (regs && BPF_CORE_READ(regs, ax) == (unsigned long)-38)
		k.id = BPF_CORE_READ(regs, orig_ax);
#endif
	struct explain_task *t = bpf_map_lookup_elem(&tasks, &wtid);
	struct explain_frame *top = t ? top_frame(t) : NULL;
	if (top && top->kind == EX_LOCK) {
		k.kind = EX_LOCK;
		k.flags |= top->flags & ~EXF_UNSTACKED; /* a sample has no lock stack either way */
		k.named = top->named;
		k.id = top->id;
	}
	if (kstack_count(&sampled, &k) != 0)
		__sync_fetch_and_add(&samples_lost, 1);
	if (queued)
		sample_taker(wtid);
}

/* Light mode: each worker pinned to this CPU, at this tick. */
static __always_inline void sample_pinned(__u32 cur_tid)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct explain_cpu_workers *cw = bpf_map_lookup_elem(&cpu_workers, &cpu);
	if (!cw)
		return;
	for (int i = 0; i < EXPLAIN_WORKERS_PER_CPU; i++) {
		__u32 wtid = cw->tid[i];
		if (!wtid)
			break;
		if (wtid == cur_tid)
			remember_running(wtid);
		else
			sample_off_cpu(wtid, cpu);
	}
}

static __always_inline int sample(struct bpf_perf_event_data *ctx, int helpers_only)
{
	__u64 now = bpf_ktime_get_ns();
	if (!in_window(now))
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 served, tid = (__u32)pid_tgid;
	if (light_mode) {
		learn_this_rq_lock((struct task_struct *)bpf_get_current_task()); /* no switch program learns it */
		sample_pinned(tid);
	}
	if (!probed(pid_tgid >> 32, &served) && !(light_mode && worker_child(&served)))
		return 0;
	if (helpers_only && !served && bpf_map_lookup_elem(&clocked, &tid))
		return 0; /* a worker: its own clock samples it */
	sample_running(ctx, tid, served);
	return 0;
}

SEC("perf_event")
int oslens_ex_sample(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 0);
}

/* A clock on a CPU the run's tasks are pinned to: the helpers (a worker's
 * children, which a thread clock cannot follow, and its partner, a process
 * or a thread) sampled there, every period of the CPU's time — the same
 * weight. In full mode the workers have their own clocks and are left to
 * them; in light mode this clock samples them too, on their CPU or off. */
SEC("perf_event")
int oslens_ex_sample_cpu(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 1);
}
