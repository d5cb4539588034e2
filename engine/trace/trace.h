/* Kernel-side attribution of OS noise: BPF programs (libbpf, CO-RE) record,
 * on the probed CPUs only, every interval during which something other than
 * the probed threads ran there, with CLOCK_MONOTONIC timestamps. */
#ifndef OSLENS_TRACE_H
#define OSLENS_TRACE_H

#include <stddef.h>
#include <stdint.h>

enum trace_kind {
	TRACE_IRQ = 1,        /* hard interrupt: id = irq number, name = handler */
	TRACE_SOFTIRQ = 2,    /* id = vector (TIMER = 1, NET_RX = 3, ...), name = vector name */
	TRACE_NMI = 3,        /* id = 0, name = handler */
	TRACE_VECTOR = 4,     /* x86 system vectors: name = local_timer, reschedule,
			       * call_function, call_function_single, irq_work, ... */
	TRACE_TASK = 5,       /* another task ran on the CPU while the probed thread
			       * was switched out: id = pid, name = comm */
	TRACE_FAULT = 6,      /* a page fault taken by a probed thread: id = address */
};

#define TRACE_F_KTHREAD 1u    /* TRACE_TASK: the task is a kernel thread */
#define TRACE_F_MAJOR 2u      /* TRACE_FAULT: a major fault (it waited for I/O) */

struct trace_event {
	uint64_t start_ns;    /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	uint64_t end_ns;
	uint32_t cpu;
	uint32_t kind;        /* enum trace_kind */
	int64_t id;
	uint32_t flags;
	char name[32];
};

/* Starts recording on `cpus`; `tids` are the probed threads (their switches
 * out and their page faults are recorded). Returns 0, or -1 with `why`
 * saying why attribution is unavailable (not root, no BTF, built without
 * BPF, a program rejected by the verifier, ...). */
int trace_start(const int *cpus, int ncpus, const int *tids, int ntids, char *why, size_t whylen);
/* Calls `cb` for each event recorded so far, waiting up to timeout_ms for
 * the first; returns the number delivered, or -1. */
int trace_poll(void (*cb)(const struct trace_event *e, void *arg), void *arg, int timeout_ms);
/* Events the kernel could not deliver (ring buffer full). */
uint64_t trace_lost(void);
/* Event sources this kernel lacks, comma-separated ("" when none). */
const char *trace_missing(void);
/* Detaches and unloads every program and map. Idempotent. */
void trace_stop(void);
/* `oslens-engine trace --cpus LIST --duration S [--tids LIST]`: events as JSON lines. */
int cmd_trace(int argc, char **argv);

#endif
