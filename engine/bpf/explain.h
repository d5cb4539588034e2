/* Why a probe stops scaling: explain.bpf.c (kernel side), explain.c (its
 * loader) and this header, which both include.
 *
 * Every instant of a probed thread's life inside the measured window is
 * charged to exactly one cause — the innermost thing it was in: a lock wait
 * inside a system call is the lock's, an interrupt taken while it ran is
 * the interrupt's, a wait for a CPU is the run queue's — so that the causes
 * of a point add up to its time, and what they do not cover is said. */
#ifndef OSLENS_EXPLAIN_H
#define OSLENS_EXPLAIN_H

#ifndef __bpf__
#include <linux/types.h> /* the BPF side has these from vmlinux.h */
#endif

#include "kstack.h"
#include "runlen.h"

/* What an instant is charged to. */
enum explain_kind {
	EX_USER = 1,  /* running in user space */
	EX_SYSCALL,   /* in a system call (id = its number), not in anything below */
	EX_FAULT,     /* handling a page fault (id 0 minor, 1 major, 2 not known yet) */
	EX_LOCK,      /* waiting for a kernel lock (id = its address), spinning or asleep */
	EX_IRQ,	      /* a hard interrupt on the thread's CPU (id = irq) */
	EX_SOFTIRQ,   /* a softirq on the thread's CPU (id = vector) */
	EX_VECTOR,    /* an x86 system vector (id = enum explain_vector): IPIs, timer */
	EX_RUNQ,      /* runnable, waiting for a CPU (id = the system call it was in, or -1) */
	EX_BLOCKED,   /* asleep (id = the system call it slept in, or -1) */
	EX_IPI_SENT,  /* counts only: IPIs the thread sent (id = the function they run) */
	EX_TLB_FLUSH, /* counts only: TLB flushes by reason (id = enum tlb_flush_reason) */
	/* Light mode, samples only: in the kernel, in none of the causes it
	 * times exactly (id = the thread's orig_ax: its system call's number,
	 * a user page fault's error code, -1 for an interrupt). */
	EX_KERNEL,
	EX_KIND_MAX
};

enum explain_vector {
	EV_LOCAL_TIMER = 1,
	EV_RESCHEDULE,
	EV_CALL_FUNCTION,
	EV_CALL_FUNCTION_SINGLE,
	EV_IRQ_WORK,
	EV_MAX
};

#define EXPLAIN_NEST 8 /* system call, fault, lock, ... kept per thread (a power of 2) */

struct explain_key {
	__u32 tid;
	__u16 kind;  /* enum explain_kind */
	__u16 flags; /* EX_LOCK: LCB_F_* of contention_begin */
	__u32 named; /* EX_LOCK: enum lock_name (locknames.h) */
	__u32 pad;
	__u64 stack; /* EX_LOCK: the waiter's kernel stack, in kstacks (kstack.h); 0 none */
	__s64 id;
};

/* In explain_key.flags and explain_sample_key.flags: the time of a task a
 * worker waits on — a child it forked (fork's, which it waits for in
 * wait4) or its partner process — keyed by the tid of that worker. */
#define EXF_HELPER 0x8000
/* In explain_sample_key.flags, light mode: a worker sampled off its CPU —
 * asleep or waiting for it — by the clock of the CPU it is pinned to. */
#define EXF_OFF_CPU 0x4000
/* In explain_key.flags, light mode: a lock wait whose stack was not taken
 * (EXPLAIN_LIGHT_LOCK_STACKS_PER_S). */
#define EXF_UNSTACKED 0x2000
/* The marks: what remains of flags is a lock's LCB_F_*. */
#define EXF_MARKS (EXF_HELPER | EXF_OFF_CPU | EXF_UNSTACKED)

struct explain_val {
	__u64 ns;    /* time charged within the window */
	__u64 count; /* entries within the window */
};

struct explain_frame {
	__u16 kind;
	__u16 flags;
	__u32 named;
	__u64 stack; /* EX_LOCK: in kstacks; 0 none */
	__s64 id;
};

/* Who had the CPU a runnable worker waited for: a worker waiting is kept
 * in its CPU's slot of runq_waits from its wakeup or preemption to its
 * switch in (a migration moves it), and every stretch of that wait — from
 * one switch on that CPU to the next, or to and from an interrupt there —
 * is charged to the task that ran, or to the interrupt. One waiter per
 * CPU: a second one waiting on the same CPU takes the slot. A task of a
 * followed process is RQ_WORKER (in thread mode a probe's partner thread
 * too: the taker's tid tells them apart); a process a worker forked (a
 * two-task probe's partner, fork's child) is RQ_CHILD. */
enum runq_who { RQ_WORKER = 1, RQ_MASTER, RQ_KTHREAD, RQ_OTHER, RQ_INTERRUPT, RQ_CHILD };

struct runq_wait {
	__u32 tid; /* 0: none */
	__u32 pad;
	__u64 since_ns; /* the last instant charged */
};

struct runq_taker_key {
	__u32 tid;   /* the waiting worker */
	__u32 taker; /* RQ_WORKER: the thread that ran (else 0: takers by name) */
	__u16 who;   /* enum runq_who */
	__u16 kind;  /* RQ_INTERRUPT: EX_IRQ, EX_SOFTIRQ or EX_VECTOR */
	__u32 pad;
	__s64 id; /* RQ_INTERRUPT: as in explain_key */
	char comm[16];
};

/* Kernel stacks sampled on a clock that runs while a probed thread runs
 * (a software perf event per thread: no PMU needed), each counted under
 * the cause the thread was in at that instant. Aggregated in the kernel: a
 * count per key, nothing streamed. */

struct explain_sample_key {
	__u32 tid;
	__u16 kind;  /* enum explain_kind, as charged */
	__u16 flags; /* EX_LOCK: LCB_F_* */
	__u32 named; /* EX_LOCK: enum lock_name */
	__u32 pad;
	__s64 id;
	/* The kernel stack: its hash, its key in kstacks (kstack.h); 0 none
	 * (user space). */
	__u64 stack;
};

/* Light mode: the workers pinned to each CPU, whose clock samples them
 * while they are off it (asleep, or runnable and waiting for it) as well
 * as while they run. A CPU with more workers than this samples the first
 * ones off it; the loader says so (`off_cpu_samples` in `missing`). */
#define EXPLAIN_MAX_CPUS 1024
#define EXPLAIN_WORKERS_PER_CPU 8

struct explain_cpu_workers {
	__u32 tid[EXPLAIN_WORKERS_PER_CPU]; /* 0: no more */
};

/* Light mode: the lock-contention events a CPU saw until the window
 * opened, by kind (the map lock_events). The lock programs run on every
 * contended acquisition, spinning or not, but in light mode they time only
 * the waits that sleep (a spinning waiter is on its CPU, where the clock
 * samples it). When, over the warm-up, the tracepoints fired more than
 * EXPLAIN_LIGHT_LOCK_EVENTS_PER_S times per second of each worker's CPU
 * and fewer than 1 in EXPLAIN_LIGHT_SLEEP_SHARE of the waits slept, the
 * window runs without them: dup's file_lock at two threads fired 1.05 M
 * times a second per CPU, and the two programs' 47 ns a run each took
 * 9.9 % of the workers' CPU (bench/light_cost.py) to time nothing. At the
 * bound they would take about 1 %. Its sleeping waits then count as asleep
 * in their system call. */
enum explain_lock_event { EL_SPIN, EL_SLEEP, EL_MAX };
#define EXPLAIN_LIGHT_LOCK_EVENTS_PER_S 100000
#define EXPLAIN_LIGHT_SLEEP_SHARE 100
/* Light mode: a sleeping wait's stack, which names who waited, is most of
 * its begin program's time (6.4 us of mmap's waits here: 1.4 % of the
 * workers' CPU at 1,300 waits a second per CPU). Where the warm-up's waits
 * that sleep came more often than this per second of a worker's CPU, each
 * takes its stack with the chance that keeps them to it: every wait is
 * still timed, and the analysis shares out the unstacked waits of a lock
 * as its stacked ones fell among their callers. */
#define EXPLAIN_LIGHT_LOCK_STACKS_PER_S 200

/* OS entry run lengths (runlen.h): a system call or a page fault from user
 * space with everything nested in it (faults, lock spinning, interrupts;
 * not the time asleep), an interrupt taken in user space — counted where
 * it ends inside the window. */
enum explain_entry { EE_SYSCALL, EE_FAULT, EE_INTERRUPT, EE_MAX };

/* A probed thread: what it is in, and since when it has been charged. */
struct explain_task {
	__u64 last_ns;
	__u64 entry_ns; /* on-CPU time of the kernel entry under way */
	__u32 depth;	/* frames in use; 0: user space */
	__u32 off_cpu;	/* 0 on a CPU, else EX_RUNQ or EX_BLOCKED */
	__s64 off_id;	/* light mode: orig_ax when it left its CPU (the call it waits in) */
	__u32 served;	/* a helper (EXF_HELPER): the worker it serves; 0 for a worker */
	__u32 pad;
	struct explain_frame f[EXPLAIN_NEST];
};

/* An interrupt under way on a CPU, charged to the thread it interrupted. */
struct explain_cpu {
	__u64 start_ns;
	__u32 depth;
	__u32 tid; /* 0: no probed thread was running */
	__u16 kind;
	__u16 rq_known; /* this CPU's run queue lock is in rq_locks */
	__u32 waiter;	/* the interrupt under way is charged to the worker waiting for this CPU */
	__s64 id;
};

#ifndef __bpf__ /* ---- the loader's interface (explain.c, explain_none.c) */

#include <stddef.h>
#include <stdint.h>

/* The default sampling period (`run --sample-period`), ns of the clock
 * that samples a thread: 1 kHz. A sample is a timer interrupt and a stack
 * walk, which in a VM costs some 15-20 µs: at 10 kHz that took 15-22 % of
 * an explained getppid's or dup's throughput (and `perf record -e
 * cpu-clock` at 10 kHz 18 % of a plain getppid's), at 1 kHz 2-3 %
 * (engine/README.md). A run may ask for 0: no sample taken, to measure
 * their cost against. */
#define EXPLAIN_SAMPLE_PERIOD_NS 1000000

/* Light mode's default period: 500 Hz. Light mode splits the time on a CPU
 * by these samples instead of timing each call, so its clock is most of
 * what it costs: on mmap (thread mode, 2 workers) the sample's program took
 * 14 µs on mmap's deep stacks, beside the interrupt's own 13 µs, and light
 * mode cost +4.5 % [+1.3, +6.9] of the throughput at 1 kHz against
 * +3.8 % [+1.7, +5.0] at 500 Hz (bench/explain.py, 60 rounds). Half the
 * samples widen each sampled share's error by √2; the analysis states it. */
#define EXPLAIN_LIGHT_SAMPLE_PERIOD_NS 2000000

/* Loads and attaches for the threads of the processes `tgids` (and
 * nothing else); their page faults are timed through perf events on
 * `tids` (worker i pinned to cpus[i]), whose kernel stacks are sampled on
 * a clock of their own. Nothing is charged or sampled until a window is
 * set. 0, or -1 with `why`.
 *
 * light: no program runs per system call, page fault or context switch,
 * so the cost grows with none of their rates — only lock waits and
 * interrupts are timed. The rest of each worker's time is sampled by the
 * clock of the CPU it is pinned to (explain_bpf_helpers attaches those):
 * running (EX_USER in user space, EX_KERNEL with the thread's orig_ax in
 * the kernel), runnable and waiting for it (EX_RUNQ, who had the CPU
 * counted in runq_takers at one period each), or asleep (EX_BLOCKED with
 * the system call it sleeps in), these two marked EXF_OFF_CPU, every
 * period_ns (0: never, and the samples are said to be missing). Not a clock
 * per thread: the kernel stops and restarts its timer at every switch of
 * the thread, which sem's worker makes twice an operation. */
int explain_bpf_start(const int *tgids, int ntgids, const int *tids, const int *cpus, int ntids, int light,
		      uint64_t period_ns, char *why, size_t whylen);
/* Before explain_bpf_window: processes that already serve a worker (its
 * partner, forked before the start), each with the tid of the worker it
 * serves; their time is charged as the worker's helpers' (EXF_HELPER). The
 * children the workers fork from now on are followed the same way without
 * being named. The helpers are sampled by a clock on each of `cpus`, the
 * CPUs the run pins its tasks to (a child runs where its parent is
 * pinned). 0, or -1 with why. */
int explain_bpf_helpers(const int *pids, const int *served, int n, const int *cpus, int ncpus, char *why,
			size_t whylen);
/* Charges from now on what falls in [start_ns, end_ns] of CLOCK_MONOTONIC. */
void explain_bpf_window(uint64_t start_ns, uint64_t end_ns);
/* The master took one of the window's samples, the first as the window
 * opens: in light mode, the warm-up's lock events are weighed then
 * (EXPLAIN_LIGHT_LOCK_EVENTS_PER_S), and the lock programs left out of
 * the window if they cost more than they time; at the first and the last,
 * its programs' run time is taken (the record's program_time). */
void explain_bpf_sampled(int first, int last);
/* The `explain` record of repetition rep (engine/README.md). */
void explain_bpf_emit(int rep);
/* Detaches and unloads. Idempotent. */
void explain_bpf_stop(void);

#endif /* __bpf__ */

#endif
