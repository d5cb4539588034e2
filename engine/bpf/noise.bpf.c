// SPDX-License-Identifier: GPL-2.0
/* Noise attribution, kernel side: on the probed CPUs only, one record per
 * interval during which something other than the probed threads ran there —
 * hard IRQs, softirqs, x86 system vectors, NMIs, other tasks while a probed
 * thread was switched out, page faults of the probed threads. Timestamps are
 * bpf_ktime_get_ns() (CLOCK_MONOTONIC). Nesting is not resolved here: every
 * interval is reported as it happened and user space sorts it out.
 *
 * Interrupt-like events use raw tracepoints (no tracefs, no trace record to
 * fill), tasks use the raw sched_switch with CO-RE reads of task_struct, and
 * faults are timed as described below. One event is not noise: a probed
 * thread's sleep timer running its callback, the end of timerlat's IRQ
 * latency as rtla's. Every program is named oslens_* so that a leak shows
 * in `bpftool prog show`. */
#include "common.bpf.h"

#include "noise.h"

#define RINGBUF_BYTES (4u << 20)

/* CPU -> 1 for the probed CPUs; sized to the possible CPUs by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8);
} cpus SEC(".maps");

/* The probed threads; the value holds the fault in progress, if any. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tid_state);
} tids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} events SEC(".maps");

/* One open interval of some kind on this CPU. */
struct level {
	__u64 ns;
	__s64 id;
	__u16 sub;
	char name[NOISE_NAME];
};

/* Interrupts of one kind nest only through odd paths, but a depth counter
 * keeps a stray exit (attached in the middle of a handler) harmless. */
struct stack {
	__u32 depth;
	struct level lv[NOISE_NEST];
};

struct cpu_state {
	struct stack irq, softirq, vec;
	__u64 task_ns;	      /* start of the current task's interval */
	__u32 out;	      /* a probed thread is switched out of this CPU */
	__u64 steal_ns;	      /* the run queue's steal at its last update seen */
	__u64 steal_clock;    /* the run queue's clock then */
	__u64 steal_since_ns; /* that update came after this (the read before it was seen) */
	__u64 steal_read_ns;  /* the last read */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} state SEC(".maps");

__u64 lost = 0; /* records the ring buffer had no room for */

static __always_inline int probed_cpu(__u32 cpu)
{
	__u8 *on = bpf_map_lookup_elem(&cpus, &cpu);
	return on && *on;
}

static __always_inline struct cpu_state *cpu_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&state, &zero);
}

/* The consumer polls on a timer: waking it from here would raise an
 * irq_work on the probed CPU, which is noise of our own making. Only a
 * filling ring (a stalled consumer) is worth that, and then at most every
 * 10 ms: each wakeup is itself an interrupt. */
__u64 last_wakeup_ns = 0;

static __always_inline __u64 wakeup_flags(void)
{
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) <= RINGBUF_BYTES / 2)
		return BPF_RB_NO_WAKEUP;
	__u64 now = bpf_ktime_get_ns();
	if (now - last_wakeup_ns < 10000000)
		return BPF_RB_NO_WAKEUP;
	last_wakeup_ns = now;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline struct noise_event *reserve(void)
{
	struct noise_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		__sync_fetch_and_add(&lost, 1);
	return e;
}

/* An event with what every kind has, its name empty, other fields 0: the
 * caller fills in the rest and sends it (send), or NULL (no room). */
static __always_inline struct noise_event *event(__u32 cpu, __u16 kind, __u64 start, __u64 end, __s64 id)
{
	struct noise_event *e = reserve();
	if (!e)
		return NULL;
	e->start_ns = start;
	e->end_ns = end;
	e->id = id;
	e->aux = 0;
	e->cpu = cpu;
	e->kind = kind;
	e->sub = 0;
	e->flags = 0;
	__builtin_memset(e->name, 0, NOISE_NAME);
	return e;
}

static __always_inline void send(struct noise_event *e)
{
	bpf_ringbuf_submit(e, wakeup_flags());
}

static __always_inline void emit_level(__u32 cpu, __u16 kind, const struct level *l, __u64 end)
{
	struct noise_event *e = event(cpu, kind, l->ns, end, l->id);
	if (!e)
		return;
	e->sub = l->sub;
	__builtin_memcpy(e->name, l->name, NOISE_NAME);
	send(e);
}

/* Opens an interval: returns the level to fill in, or NULL (too deep). */
static __always_inline struct level *push(struct stack *s, __u64 now)
{
	__u32 d = s->depth;
	s->depth = d + 1;
	if (d >= NOISE_NEST)
		return NULL;
	s->lv[d].ns = now;
	return &s->lv[d];
}

/* Closes the innermost interval: returns it, or NULL if its start was not
 * seen (attached mid-way) or was too deep to keep. */
static __always_inline struct level *pop(struct stack *s)
{
	__u32 d = s->depth;
	if (d == 0)
		return NULL;
	s->depth = --d;
	if (d >= NOISE_NEST)
		return NULL;
	return &s->lv[d];
}

/* ---- time the hypervisor did not run this vCPU ----
 *
 * A guest's host adds to each vCPU's paravirtual steal clock the time the
 * vCPU was ready to run but not run, before it next enters the guest.
 * Nothing in the guest runs meanwhile, so no event shows it: a detour no
 * event covers is "unexplained". The scheduler copies that clock into the
 * run queue (prev_steal_time_rq) when it updates the queue's clock
 * (rq->clock), at switches, ticks and wake-ups — not at every event, so a
 * value read may be older than the read. Read with the queue's clock at
 * each event's start and end on a probed CPU: a new clock value means an
 * update since the previous read, and so after it; a rise of steal between
 * two updates is time stolen after the first (the vCPU ran then) and
 * before the read that saw the second. The event gives those bounds — from
 * the read before the first update was seen to now — and the ns stolen;
 * the analysis charges them only to time nothing else explains. (The
 * scheduler adds no more steal per update than its clock advanced; the
 * rest comes at the next one.) No such events without paravirtual steal
 * accounting (not a guest, a host that keeps no steal clock, the
 * no-steal-acc boot option, a kernel without PARAVIRT_TIME_ACCOUNTING)
 * or without FAIR_GROUP_SCHED (the run queue is reached through the
 * current task's cfs_rq: the per-CPU `runqueues` is not in kallsyms unless
 * every data symbol is). */
struct rq___steal {
	__u64 clock;
	__u64 prev_steal_time_rq;
} __attribute__((preserve_access_index));
struct cfs_rq___steal {
	struct rq___steal *rq;
} __attribute__((preserve_access_index));
struct sched_entity___steal {
	struct cfs_rq___steal *cfs_rq;
} __attribute__((preserve_access_index));
struct task_struct___steal {
	struct sched_entity___steal se;
} __attribute__((preserve_access_index));

static __always_inline void note_steal(__u32 cpu, struct cpu_state *s, __u64 now)
{
	struct task_struct___steal *cur = (struct task_struct___steal *)bpf_get_current_task();
	if (!s || !bpf_core_field_exists(cur->se.cfs_rq) ||
	    !bpf_core_field_exists(struct rq___steal, prev_steal_time_rq))
		return;
	struct rq___steal *rq = BPF_CORE_READ(cur, se.cfs_rq, rq);
	if (!rq)
		return;
	__u64 clock = BPF_CORE_READ(rq, clock), stolen = BPF_CORE_READ(rq, prev_steal_time_rq);
	if (clock != s->steal_clock) { /* updated after the previous read */
		if (s->steal_since_ns && stolen > s->steal_ns) {
			struct noise_event *e = event(cpu, NOISE_STEAL, s->steal_since_ns, now, stolen - s->steal_ns);
			if (e)
				send(e);
		}
		s->steal_ns = stolen;
		s->steal_clock = clock;
		s->steal_since_ns = s->steal_read_ns; /* 0 at the first read: when its value was made is unknown */
	}
	s->steal_read_ns = now;
}

/* The interval stack of one kind on this CPU, or NULL where the CPU is not probed. */
static __always_inline struct stack *stack_of(__u16 kind)
{
	if (!probed_cpu(bpf_get_smp_processor_id()))
		return NULL;
	struct cpu_state *s = cpu_state();
	if (!s)
		return NULL;
	return kind == NOISE_IRQ ? &s->irq : kind == NOISE_SOFTIRQ ? &s->softirq : &s->vec;
}

/* Opens an interval of `kind`: the level to name further, or NULL. */
static __always_inline struct level *enter(__u16 kind, __s64 id, __u16 sub)
{
	struct stack *st = stack_of(kind);
	if (!st)
		return NULL;
	__u64 now = bpf_ktime_get_ns();
	note_steal(bpf_get_smp_processor_id(), cpu_state(), now);
	struct level *l = push(st, now);
	if (l) {
		l->id = id;
		l->sub = sub;
		l->name[0] = 0;
	}
	return l;
}

/* Closes the innermost interval of `kind` and sends it. */
static __always_inline int leave(__u16 kind)
{
	__u64 now = bpf_ktime_get_ns();
	struct stack *st = stack_of(kind);
	struct level *l = st ? pop(st) : NULL;
	if (!l)
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	emit_level(cpu, kind, l, now);
	note_steal(cpu, cpu_state(), now);
	return 0;
}

/* ---- hard IRQs ---- */

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(oslens_irq_entry, int irq, struct irqaction *action)
{
	struct level *l = enter(NOISE_IRQ, irq, 0);
	if (l && bpf_probe_read_kernel_str(l->name, sizeof(l->name), BPF_CORE_READ(action, name)) < 0)
		l->name[0] = 0;
	return 0;
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(oslens_irq_exit, int irq)
{
	return leave(NOISE_IRQ);
}

/* ---- softirqs (named in user space from the vector) ---- */

SEC("raw_tp/softirq_entry")
int BPF_PROG(oslens_softirq_entry, unsigned int vec)
{
	enter(NOISE_SOFTIRQ, vec, 0);
	return 0;
}

SEC("raw_tp/softirq_exit")
int BPF_PROG(oslens_softirq_exit, unsigned int vec)
{
	return leave(NOISE_SOFTIRQ);
}

/* ---- x86 system vectors (irq_vectors:*), named in user space ---- */

#define VECTOR(tp, which)                             \
	SEC("raw_tp/" #tp "_entry")                   \
	int BPF_PROG(oslens_##tp##_entry, int vector) \
	{                                             \
		enter(NOISE_VECTOR, vector, which);   \
		return 0;                             \
	}                                             \
	SEC("raw_tp/" #tp "_exit")                    \
	int BPF_PROG(oslens_##tp##_exit, int vector)  \
	{                                             \
		return leave(NOISE_VECTOR);           \
	}

VECTOR(local_timer, NV_LOCAL_TIMER)
VECTOR(reschedule, NV_RESCHEDULE)
VECTOR(call_function, NV_CALL_FUNCTION)
VECTOR(call_function_single, NV_CALL_FUNCTION_SINGLE)
VECTOR(irq_work, NV_IRQ_WORK)
VECTOR(thermal_apic, NV_THERMAL_APIC)
VECTOR(threshold_apic, NV_THRESHOLD_APIC)
VECTOR(deferred_error, NV_DEFERRED_ERROR)
VECTOR(error_apic, NV_ERROR_APIC)
VECTOR(spurious_apic, NV_SPURIOUS_APIC)
VECTOR(x86_platform_ipi, NV_X86_PLATFORM_IPI)

/* ---- NMIs: the tracepoint fires after each handler with its duration ---- */

SEC("raw_tp/nmi_handler")
int BPF_PROG(oslens_nmi, void *handler, s64 delta_ns)
{
	__u32 cpu = bpf_get_smp_processor_id();
	if (!probed_cpu(cpu))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct noise_event *e =
		event(cpu, NOISE_NMI, delta_ns > 0 && (__u64)delta_ns < now ? now - delta_ns : now, now, 0);
	if (!e)
		return 0;
	e->aux = (__u64)handler;
	send(e);
	return 0;
}

/* ---- other tasks while a probed thread is switched out ---- */

static __always_inline int probed_tid(__u32 tid)
{
	return bpf_map_lookup_elem(&tids, &tid) != NULL;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(oslens_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 cpu = bpf_get_smp_processor_id();
	if (!probed_cpu(cpu))
		return 0;
	struct cpu_state *s = cpu_state();
	if (!s)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	note_steal(cpu, s, now);
	__u32 prev_pid = BPF_CORE_READ(prev, pid);
	__u32 next_pid = BPF_CORE_READ(next, pid);
	int prev_probed = probed_tid(prev_pid);

	if (s->out && !prev_probed) {
		/* prev ran while the probed thread was away: its interval ends now */
		struct noise_event *e = event(cpu, NOISE_TASK, s->task_ns, now, prev_pid);
		if (e) {
			e->flags = BPF_CORE_READ(prev, flags) & PF_KTHREAD ? NOISE_F_KTHREAD : 0;
			if (BPF_CORE_READ_STR_INTO(&e->name, prev, comm) < 0)
				e->name[0] = 0;
			send(e);
		}
	}
	if (probed_tid(next_pid) || (prev_probed && task_sched_state(prev) & TASK_DEAD)) {
		s->out = 0; /* back, or gone for good: nothing to wait for */
	} else if (prev_probed || s->out) {
		s->out = 1;
		s->task_ns = now;
	}
	return 0;
}

/* ---- a probed thread's sleep timer firing ----
 *
 * rtla timerlat ends a wake-up's IRQ latency in its timer's callback. A
 * thread asleep in clock_nanosleep is woken by an hrtimer whose callback is
 * hrtimer_wakeup, its task in the hrtimer_sleeper around it: at the entry
 * of that callback, the timer's expiry (the soft one: the time the thread
 * asked for) and the clock now, on whichever CPU it fired (a timer may be
 * moved off a nohz_full CPU). The loader gives hrtimer_wakeup's address
 * from kallsyms; without it there are no such events. */
const volatile __u64 hrtimer_wakeup_fn = 0;

SEC("raw_tp/hrtimer_expire_entry")
int BPF_PROG(oslens_timer_callback, struct hrtimer *timer, ktime_t *now)
{
	if (!hrtimer_wakeup_fn)
		return 0;
	if ((__u64)BPF_CORE_READ(timer, function) != hrtimer_wakeup_fn)
		return 0;
	__u64 at = bpf_ktime_get_ns();
	struct hrtimer_sleeper *sl =
		(struct hrtimer_sleeper *)((void *)timer - bpf_core_field_offset(struct hrtimer_sleeper, timer));
	__u32 pid = BPF_CORE_READ(sl, task, pid);
	if (!probed_tid(pid))
		return 0;
	struct noise_event *e = event(bpf_get_smp_processor_id(), NOISE_TIMER_CALLBACK,
				      (__u64)BPF_CORE_READ(timer, _softexpires), at, pid);
	if (e)
		send(e);
	return 0;
}

/* ---- page faults of the probed threads ----
 *
 * x86: the fault starts at exceptions:page_fault_user/kernel (the exception
 * handler, before the VMA lookup) and ends where handle_mm_fault accounts it
 * as a minor or major fault, which is a perf software event: the loader opens
 * PAGE_FAULTS_MIN and _MAJ events with period 1 on each probed CPU and
 * attaches oslens_fault_min/maj to them. A fault that fails or is retried
 * gives no end of its own; the next start replaces it. Elsewhere (no
 * exceptions tracepoints), fentry/fexit on handle_mm_fault if the kernel
 * takes them. */

static __always_inline void fault_start(unsigned long address)
{
	__u32 cpu = bpf_get_smp_processor_id();
	if (!probed_cpu(cpu))
		return;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tid_state *t = bpf_map_lookup_elem(&tids, &tid);
	if (!t)
		return;
	t->fault_ns = bpf_ktime_get_ns();
	t->fault_addr = address;
	t->fault_cpu = cpu;
}

static __always_inline void fault_end(__u32 flags)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tid_state *t = bpf_map_lookup_elem(&tids, &tid);
	if (!t || !t->fault_ns)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct noise_event *e = event(t->fault_cpu, NOISE_FAULT, t->fault_ns, now, t->fault_addr);
	if (e) {
		e->flags = flags;
		send(e);
	}
	t->fault_ns = 0;
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(oslens_fault_user, unsigned long address)
{
	fault_start(address);
	return 0;
}

SEC("raw_tp/page_fault_kernel")
int BPF_PROG(oslens_fault_kernel, unsigned long address)
{
	fault_start(address);
	return 0;
}

/* Return 0: the perf event itself records nothing. */
SEC("perf_event")
int oslens_fault_min(struct bpf_perf_event_data *ctx)
{
	fault_end(0);
	return 0;
}

SEC("perf_event")
int oslens_fault_maj(struct bpf_perf_event_data *ctx)
{
	fault_end(NOISE_F_MAJOR);
	return 0;
}

SEC("fentry/handle_mm_fault")
int BPF_PROG(oslens_fault_entry, struct vm_area_struct *vma, unsigned long address)
{
	fault_start(address);
	return 0;
}

SEC("fexit/handle_mm_fault")
int BPF_PROG(oslens_fault_exit, struct vm_area_struct *vma, unsigned long address, unsigned int flags,
	     struct pt_regs *regs, vm_fault_t ret)
{
	fault_end(ret & VM_FAULT_MAJOR ? NOISE_F_MAJOR : 0);
	return 0;
}
