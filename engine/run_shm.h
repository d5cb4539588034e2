/* The protocol between `run`'s master (run.c) and its workers (worker.c):
 * one shared mapping, a control block and one slot per worker, the hot op
 * counter of each slot alone on its cache lines. A memfd, not an anonymous
 * mapping, so that a worker exec'd afresh maps it again. The master only
 * reads the slots and writes the control block; each worker writes its own
 * slot. Only the master prints. */
#ifndef OSLENS_RUN_SHM_H
#define OSLENS_RUN_SHM_H

#include "engine.h"

#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LINE 128 /* two cache lines: the adjacent-line prefetcher pairs them */

enum wstate { W_INIT, W_READY, W_RUNNING, W_DONE, W_FAILED };

struct slot {
	volatile uint64_t ops __attribute__((aligned(LINE)));
	struct {
		volatile int state;
		int pid, tid, cpu_start, cpu_end;
		int image_maps, image_anon_kb; /* the worker process's address space when it was ready; -1: unknown */
		int fresh_image;	       /* the worker process is a fresh exec (probe->fresh_image) */
		char program[32];	       /* of that exec: the worker image, or the engine itself */
		int planned_cpu;	       /* where the master planned it: a fresh image checks its own plan */
		uint64_t t_release, t_start, t_end, done_ops;
		struct rusage ru0, ru1;
		char msg[200];
		int partners[PROBE_PARTNERS_MAX]; /* pids watched by the master (partners.c) */
	} c __attribute__((aligned(LINE)));
};

struct control {
	volatile int go __attribute__((aligned(LINE)));
	volatile int stop;
	int rep;
	uint64_t t_go, warm_deadline;
	struct clock_state clock; /* the master's: the clock every worker reads */
	volatile int ready __attribute__((aligned(LINE)));
};

struct shm {
	struct control ctl;
	struct slot slot[];
};

static inline long futex(volatile int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

#endif
