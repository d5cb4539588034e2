/* What noise.bpf.c sends to trace.c through the ring buffer. Shared by the
 * BPF side (which has vmlinux.h's __u64 & co.) and the loader (which gets
 * them from <linux/types.h>); trace.c turns each into a struct trace_event. */
#ifndef OSLENS_NOISE_H
#define OSLENS_NOISE_H

/* = enum trace_kind and TRACE_F_* in trace.h (trace.c checks), which the BPF
 * side cannot include. */
#define NOISE_IRQ 1
#define NOISE_SOFTIRQ 2
#define NOISE_NMI 3
#define NOISE_VECTOR 4
#define NOISE_TASK 5
#define NOISE_FAULT 6
#define NOISE_F_KTHREAD 1u
#define NOISE_F_MAJOR 2u

/* TRACE_VECTOR events: which x86 system vector, as `sub`; trace.c names it. */
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

#define NOISE_NEST 4    /* per-CPU nesting depth kept per kind */
#define NOISE_NAME 32   /* = sizeof(struct trace_event.name) */

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
	__s64 id;       /* irq number, softirq vector, system vector, pid, fault address */
	__u64 aux;      /* TRACE_NMI: the handler's address (trace.c looks it up) */
	__u32 cpu;
	__u16 kind;     /* enum trace_kind */
	__u16 sub;      /* TRACE_VECTOR: enum noise_vector */
	__u32 flags;    /* TRACE_F_* */
	char name[NOISE_NAME]; /* TRACE_IRQ: handler name, TRACE_TASK: comm */
};

#endif
