/* The kernel's own accounting of CPU time (/proc/stat), for `run`'s
 * `cpustat` record: read at the start and the end of the measured window
 * (fixed time: after warm-up; fixed work: the whole repetition), it shows
 * irq, softirq and steal time (the hypervisor running something else) that
 * no guest-side event can show. */
#ifndef OSLENS_CPUSTAT_H
#define OSLENS_CPUSTAT_H

#include "engine.h"

struct cpustat {
	uint64_t v[8]; /* user nice system idle iowait irq softirq steal, in USER_HZ */
	int seen;      /* filled from /proc/stat (with a target, a CPU offline is not) */
};

/* The two reads of one repetition's window. */
struct cpustat_window {
	/* one entry per worker, or with a target one per CPU (an I/O's cost
	 * lands on any CPU), counted once (sysconf) when the window is made */
	int n;
	struct cpustat *at[2]; /* the start, the end */
	uint64_t mono[2];      /* CLOCK_MONOTONIC of each read */
};

/* 0, or -1 out of memory (nothing to free then). */
int cpustat_window_init(struct cpustat_window *w, const struct run_config *cfg);
void cpustat_window_free(struct cpustat_window *w);
/* Reads /proc/stat now, as the window's start (end 0) or its end (1); an
 * entry it does not list stays unseen. */
void cpustat_take(struct cpustat_window *w, const struct run_config *cfg, int end);
/* The `cpustat` record of repetition rep: the deltas over the window. */
void cpustat_emit(const struct cpustat_window *w, const struct run_config *cfg, int rep);

#endif
