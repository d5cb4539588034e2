/* Noise attribution: noise.bpf.c (kernel side), noise.c (its loader and the
 * `trace` command) and this header, which both include. The first part is
 * what the BPF side sends through the ring buffer (vmlinux.h's __u64 & co.
 * there, <linux/types.h> here); the second, outside BPF, is the loader's
 * interface for the rest of the engine: every probed CPU's intervals during
 * which something other than the probed threads ran, as struct trace_event
 * with CLOCK_MONOTONIC timestamps. */
#ifndef OSLENS_NOISE_H
#define OSLENS_NOISE_H

#ifndef __bpf__
#include <linux/types.h> /* the BPF side has these from vmlinux.h */
#endif

/* What ran: enum trace_kind below names them for user space. */
#define NOISE_IRQ 1
#define NOISE_SOFTIRQ 2
#define NOISE_NMI 3
#define NOISE_VECTOR 4
#define NOISE_TASK 5
#define NOISE_FAULT 6
#define NOISE_TIMER_CALLBACK 7
#define NOISE_STEAL 8
#define NOISE_F_KTHREAD 1u
#define NOISE_F_MAJOR 2u

/* TRACE_VECTOR events: which x86 system vector, as `sub`; noise.c names it. */
enum noise_vector {
	NV_LOCAL_TIMER = 1,
	NV_RESCHEDULE,
	NV_CALL_FUNCTION,
	NV_CALL_FUNCTION_SINGLE,
	NV_IRQ_WORK,
	NV_THERMAL_APIC,
	NV_THRESHOLD_APIC,
	NV_DEFERRED_ERROR,
	NV_ERROR_APIC,
	NV_SPURIOUS_APIC,
	NV_X86_PLATFORM_IPI,
	NV_MAX
};

#define NOISE_NEST 4  /* per-CPU nesting depth kept per kind */
#define NOISE_NAME 32 /* = sizeof(struct trace_event.name) */

/* The value of the map of probed threads: the fault in progress, if any. */
struct tid_state {
	__u64 fault_ns;
	__u64 fault_addr;
	__u32 fault_cpu;
	__u32 pad;
};

struct noise_event {
	__u64 start_ns;
	__u64 end_ns;
	__s64 id;  /* irq number, softirq vector, system vector, pid, fault address, pid */
	__u64 aux; /* TRACE_NMI: the handler's address (noise.c looks it up) */
	__u32 cpu;
	__u16 kind;	       /* enum trace_kind */
	__u16 sub;	       /* TRACE_VECTOR: enum noise_vector */
	__u32 flags;	       /* TRACE_F_* */
	char name[NOISE_NAME]; /* TRACE_IRQ: handler name, TRACE_TASK: comm */
};

#ifndef __bpf__ /* ---- the loader's interface (noise.c, noise_none.c) */

#include <stddef.h>
#include <stdint.h>

enum trace_kind {
	TRACE_IRQ = NOISE_IRQ,			     /* hard interrupt: id = irq number, name = handler */
	TRACE_SOFTIRQ = NOISE_SOFTIRQ,		     /* id = vector (TIMER = 1, NET_RX = 3, ...), name = vector name */
	TRACE_NMI = NOISE_NMI,			     /* id = 0, name = handler */
	TRACE_VECTOR = NOISE_VECTOR,		     /* x86 system vectors: name = local_timer, reschedule,
			       * call_function, call_function_single, irq_work, ... */
	TRACE_TASK = NOISE_TASK,		     /* another task ran on the CPU while the probed thread
			       * was switched out: id = pid, name = comm */
	TRACE_FAULT = NOISE_FAULT,		     /* a page fault taken by a probed thread: id = address */
	TRACE_TIMER_CALLBACK = NOISE_TIMER_CALLBACK, /* not noise: a probed thread's sleep timer ran its
						      * callback: start = the timer's expiry, end = the
						      * callback's entry, id = pid */
	TRACE_STEAL = NOISE_STEAL,		     /* not an interval: the hypervisor did not run this vCPU
						      * for id ns, somewhere between start and end (two reads
						      * of its steal clock) */
};

#define TRACE_F_KTHREAD NOISE_F_KTHREAD /* TRACE_TASK: the task is a kernel thread */
#define TRACE_F_MAJOR NOISE_F_MAJOR	/* TRACE_FAULT: a major fault (it waited for I/O) */

struct trace_event {
	uint64_t start_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	uint64_t end_ns;
	uint32_t cpu;
	uint32_t kind; /* enum trace_kind */
	int64_t id;
	uint32_t flags;
	char name[NOISE_NAME];
};

/* Starts recording on `cpus`; `tids` are the probed threads (their switches
 * out and their page faults are recorded). Returns 0, or -1 with `why`
 * saying why attribution is unavailable (not root, no BTF, built without
 * BPF, a program rejected by the verifier, ...). */
int noise_bpf_start(const int *cpus, int ncpus, const int *tids, int ntids, char *why, size_t whylen);
/* Calls `cb` for each event recorded so far, waiting up to timeout_ms for
 * the first; returns the number delivered, or -1. */
int noise_bpf_poll(void (*cb)(const struct trace_event *e, void *arg), void *arg, int timeout_ms);
/* Events the kernel could not deliver (ring buffer full). */
uint64_t noise_bpf_lost(void);
/* Event sources this kernel lacks, comma-separated ("" when none). */
const char *noise_bpf_missing(void);
/* Detaches and unloads every program and map. Idempotent. */
void noise_bpf_stop(void);

#endif /* __bpf__ */

#endif
