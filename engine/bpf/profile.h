/* The profiler's BPF side: profile.bpf.c (kernel side), profile.c (its
 * loader) and this header, which both include. The first part is what
 * profile.bpf.c aggregates in its maps and the loader reads (vmlinux.h types
 * there, <linux/types.h> here); the second, outside BPF, is the loader's
 * interface for the `profile` command: load and attach, follow a process
 * tree, and emit what the maps aggregated. */
#ifndef OSLENS_PROFILE_H
#define OSLENS_PROFILE_H

#ifndef __bpf__
#include <linux/types.h> /* the BPF side has these from vmlinux.h */
#endif

#include "kstack.h"
#include "runlen.h"

/* Log-linear latency histogram, the engine's layout (hist.h) with 2 sub-bucket
 * bits: a bucket is at most 25 % of its lower bound wide, which is what a
 * distribution of kernel latencies needs, and 160 buckets (values up to
 * 2^40 ns, about 18 minutes; larger ones go in the last) keep a per-CPU copy
 * per system call small on machines with hundreds of CPUs. */
#define PROF_HIST_SUB_BITS 2
#define PROF_HIST_BUCKETS 160

struct prof_hist {
	__u64 count;
	__u64 sum;
	__u64 min_plus1; /* 0: empty */
	__u64 max;
	__u32 bucket[PROF_HIST_BUCKETS];
};

struct prof_syscall {
	__u64 errors;
	struct prof_hist h;
};

/* Per CPU: interrupt-like work done there. */
struct prof_intr {
	__u64 count;
	__u64 ns;
	__u64 workload_count; /* while a thread of the workload was current */
	__u64 workload_ns;
};

#define PROF_COMM 16

struct prof_irq {
	struct prof_intr s;
	char name[PROF_COMM];
};

#define PROF_SOFTIRQS 10

/* x86 system vectors (irq_vectors:*) */
enum prof_vector { PV_LOCAL_TIMER, PV_RESCHEDULE, PV_CALL_FUNCTION, PV_CALL_FUNCTION_SINGLE, PV_IRQ_WORK, PV_MAX };

struct prof_cpu {
	__u64 ran_ns; /* the workload's threads on CPU here */
	struct prof_intr hardirq, softirq, vector;
	struct prof_intr softirq_vec[PROF_SOFTIRQS];
	struct prof_intr vec[PV_MAX];
	/* open intervals on this CPU */
	__u64 hardirq_start, softirq_start, vector_start;
	__u32 hardirq_on_workload, softirq_on_workload, vector_on_workload;
	__u32 vector_which;
	__u32 hardirq_from_user, softirq_from_user,
		vector_from_user; /* a followed thread in user space was interrupted */
	__u64 voluntary, involuntary, switch_ins, migrated_switch_ins, migrations, wakeups;
	__u64 minor_faults, major_faults;
	__u64 lost;	  /* a map was full */
	__u64 exits_lost; /* threads whose exit the exits map had no room for */
	struct prof_hist offcpu_voluntary, offcpu_involuntary, runq, fault, major_fault;
	__u16 rq_known; /* this CPU's run queue lock is in rq_locks (locknames.bpf.h) */
	__u16 pad16;
	__u32 pad32;
};

/* Followed processes: a bitmap over every possible pid (PID_MAX_LIMIT is
 * 2^22 on 64-bit kernels), 512 KiB. */
#define PROF_PID_WORDS ((1u << 22) / 64)

/* Scheduling state of a thread of the workload, while it lives. */
struct prof_task {
	__u64 on_ns;	/* switched in */
	__u64 off_ns;	/* switched out */
	__u64 ready_ns; /* runnable since (woken, or preempted) */
	__u32 last_cpu; /* +1; 0: not seen on a CPU yet */
	__u32 off_involuntary;
};

/* OS entry run lengths (runlen.h), on the CPU: a system call or a page fault
 * from user space with everything nested in it (faults, lock spinning,
 * interrupts; not the time asleep), and the interrupts (device, softirq,
 * system vector) that a thread of the workload took in user space, each
 * handler apart (a softirq run on the way out of a device interrupt counts
 * as a second entry). Interrupts taken inside a system call or fault belong
 * to that entry, so the kinds add up without counting any time twice. */
enum prof_entry { PE_SYSCALL = 1, PE_FAULT, PE_HARDIRQ, PE_SOFTIRQ, PE_VECTOR, PE_MAX };

/* What a thread of the workload is in the middle of. */
struct prof_inflight {
	__u64 entry_run_ns;	/* on the CPU in the current entry (before entry_resumed_ns) */
	__u64 entry_resumed_ns; /* back on the CPU in the entry since; 0: switched out, or not yet seen back */
	__u32 entry;		/* PE_SYSCALL, PE_FAULT, 0: in user space (or not seen entering) */
	__u64 sys_ns;		/* in a system call since */
	__u64 fault_ns;		/* in a page fault since */
	__u64 lock_ns;		/* waiting for a contended lock since */
	__u64 lock;
	__s64 sys_nr;
	__u64 lock_stack; /* in kstacks; 0: none */
	__u32 lock_flags;
};

/* One thread lifetime: a tid is given again once its thread is gone (a fork
 * loop longer than pid_max), and each lifetime has its own exit record. */
struct prof_exit_key {
	__u32 tid;
	__u32 pad;
	__u64 start_ns; /* task_struct.start_time */
};

/* A thread's accounting when it exited. */
struct prof_exit {
	__u32 tid, tgid;
	__u64 utime_ns, stime_ns, runtime_ns;
	__u64 nvcsw, nivcsw, min_flt, maj_flt;
	__u32 cpu;
	char comm[PROF_COMM];
};

struct prof_preempt_key {
	char comm[PROF_COMM];
	__u32 kind; /* PROF_BY_* */
};
#define PROF_BY_OTHER 0
#define PROF_BY_KTHREAD 1
#define PROF_BY_WORKLOAD 2

struct prof_lock_key {
	__u64 lock;
	__u64 stack; /* the waiter's kernel stack, in kstacks (kstack.h); 0: lost */
	__u32 flags; /* LCB_F_* of contention_begin */
	__u32 pad;
};

struct prof_lock {
	__u64 count, total_ns, max_ns;
	__u32 named; /* enum lock_name (locknames.h) */
	__u32 pad;
};

/* Kernel stacks sampled on a clock on every CPU, while a thread of the
 * workload is current there (kstack.h), counted per stack and per what the
 * thread was in: user space (no stack) or the kernel, with the thread's
 * saved orig_ax — its system call's number, or a user page fault's error
 * code, which the stack tells apart. */
#define PROF_SAMPLE_PERIOD_NS 1000000 /* 1 kHz per CPU, as full explain's clocks */

struct prof_sample_key {
	__u32 kernel; /* 1: in the kernel (id is orig_ax) */
	__u32 pad;
	__s64 id;
	__u64 stack; /* in kstacks; 0: user space */
};

#ifndef __bpf__ /* ---- the loader's interface (profile.c, profile_none.c) */

#include <stddef.h>
#include <sys/types.h>

/* Loads and attaches everything this kernel can take but the parts named in
 * `skip` (comma-separated, e.g. "syscalls"); 0, or -1 with `why` (not root,
 * no BTF, engine built without BPF, verifier refusal, ...). */
int profile_bpf_start(const char *skip, char *why, size_t whylen);
/* Follows process `tgid` and, from now on, every child it forks. */
int profile_bpf_follow(pid_t tgid);
/* Times the page faults of these threads and of what they create; -1 (and
 * page_faults missing) if the kernel refuses. */
int profile_bpf_time_faults(const pid_t *tids, int ntids);
/* The processes followed now (at most max); their number. */
int profile_bpf_followed(pid_t *out, int max);
/* Parts this kernel lacks, comma-separated ("" when none). */
const char *profile_bpf_missing(void);
/* Emits the aggregates as JSON records: thread (exits), cpu_time, switches,
 * faults, irqs, syscalls, locks, samples, bpf_stats. */
void profile_bpf_emit(void);
/* Detaches and unloads. Idempotent. */
void profile_bpf_stop(void);

#endif /* __bpf__ */

#endif
