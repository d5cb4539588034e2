/* The timerlat probe (cyclictest's method; the thread half of rtla
 * timerlat): a thread per CPU, at a real-time priority, sleeps on a periodic
 * absolute timer (clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME) and reads
 * the clock as soon as it runs again. Each wake-up's thread latency is that
 * read minus the expiry it asked for. Each wake-up is kept as (expiry, woke)
 * on CLOCK_MONOTONIC, the clock BPF events use, so that the timer interrupt
 * that woke it (its IRQ latency) and whatever held the thread back can be
 * matched to it from `run --trace`'s events. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../json.h"
#include "../mem.h"
#include "../probe.h"

struct timerlat {
	uint64_t (*wake)[2]; /* [expiry_ns, woke_ns] */
	uint64_t cap, n, overflow;
	uint64_t period_ns;
	uint64_t missed;
	struct hist *thread; /* every wake-up's thread latency, kept or not */
	int prio;	     /* 0: SCHED_OTHER */
	char why_other[96];  /* why a real-time priority asked for was not had */
};

/* The master's: the idle-state limit held for the repetition. A request on
 * /dev/cpu_dma_latency lasts while its file is open (the kernel drops it
 * when the process ends, however it ends). */
struct timerlat_global {
	int dma_fd;
	long dma_us; /* asked; -1: idle states left as they are */
	char why[96];
};

static int timerlat_global_setup(struct probe_env *env)
{
	struct timerlat_global *g = calloc(1, sizeof *g);
	if (!g)
		return -1;
	g->dma_fd = -1;
	g->dma_us = probe_opt(env, "dma_latency_us");
	if (g->dma_us >= 0) {
		int32_t us = (int32_t)g->dma_us;
		int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : write(fd, &us, sizeof us);
		if (n != (ssize_t)sizeof us) {
			snprintf(g->why, sizeof g->why, "/dev/cpu_dma_latency: %s",
				 n >= 0 ? "a short write" : strerror(errno));
			if (fd >= 0)
				close(fd);
		} else {
			g->dma_fd = fd;
		}
	}
	env->data = g;
	return 0;
}

static void timerlat_global_teardown(struct probe_env *env)
{
	struct timerlat_global *g = env->data;
	if (!g)
		return;
	if (g->dma_fd >= 0)
		close(g->dma_fd);
	free(g);
	env->data = NULL;
}

static struct timespec at(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
}

static int timerlat_setup(struct worker *w)
{
	struct timerlat *t = calloc(1, sizeof *t);
	if (!t)
		return -1;
	w->data = t;
	t->period_ns = (uint64_t)probe_opt(w->env, "period_us") * 1000;
	t->cap = (uint64_t)probe_opt(w->env, "max_wakeups");
	t->wake = calloc_touched(t->cap, sizeof *t->wake); /* never fault while recording */
	t->thread = hist_new();
	if (!t->wake || !t->thread)
		return -1;
	t->prio = (int)probe_opt(w->env, "prio");
	if (t->prio > 0) {
		/* this thread only: in thread mode the workers are threads of one process */
		struct sched_param sp = {.sched_priority = t->prio};
		if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
			snprintf(t->why_other, sizeof t->why_other, "SCHED_FIFO %d refused (%s): ran at SCHED_OTHER",
				 t->prio, strerror(errno));
			t->prio = 0;
		}
	}
	return 0;
}

static void timerlat_teardown(struct worker *w)
{
	struct timerlat *t = w->data;
	if (!t)
		return;
	free(t->wake);
	free(t->thread);
	free(t);
}

/* Sleeps until `expiry`: 0 with the time the thread ran again in *woke, or
 * clock_nanosleep's error. A signal's early return sleeps again for the same
 * expiry. The clock read is never before the expiry (the same clock), but a
 * clock of coarse resolution may read it equal. */
static int sleep_until(uint64_t expiry, uint64_t *woke)
{
	struct timespec ts = at(expiry);
	int rc;
	while ((rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
		;
	*woke = mono_ns();
	return rc;
}

/* Warm-up: a short sleep on the timer, untimed. Never a whole long period:
 * the harness calls it until the warm-up ends, and a 1 s sleep begun just
 * before that would eat into the measured window. The loop begins its own
 * grid of expiries. */
#define WARM_SLEEP_NS 1000000u

static int timerlat_op(struct worker *w)
{
	struct timerlat *t = w->data;
	uint64_t woke, ns = t->period_ns < WARM_SLEEP_NS ? t->period_ns : WARM_SLEEP_NS;
	int rc = sleep_until(mono_ns() + ns, &woke);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}

/* Not PROBE_LOOP: each operation is a wake-up, kept with its expiry. A
 * wake-up later than whole periods skips them (counted as missed, as
 * cyclictest's overruns) and keeps to the grid of absolute expiries. */
static uint64_t timerlat_loop(struct worker *w, const struct loop *l, int *err)
{
	struct timerlat *t = w->data;
	const volatile int *stop = l->stop;
	volatile uint64_t *ops = l->ops;
	uint64_t n = 0, period = t->period_ns, next = mono_ns();
	while (n < l->limit && !*stop) {
		next += period;
		uint64_t woke;
		int rc = sleep_until(next, &woke);
		if (rc) {
			*err = rc;
			break;
		}
		uint64_t lat = woke > next ? woke - next : 0;
		hist_record(t->thread, lat);
		if (t->n < t->cap) {
			t->wake[t->n][0] = next;
			t->wake[t->n][1] = woke;
			t->n++;
		} else {
			t->overflow++;
		}
		if (lat >= period) {
			uint64_t skipped = lat / period;
			t->missed += skipped;
			next += skipped * period;
		}
		*ops = ++n;
	}
	return n;
}

static int timerlat_emit(struct worker *w, struct json *j)
{
	const struct timerlat *t = w->data;
	json_uint(j, "period_ns", t->period_ns);
	json_str(j, "policy", t->prio > 0 ? "fifo" : "other");
	json_int(j, "prio", t->prio);
	if (t->why_other[0])
		json_str(j, "why_other", t->why_other);
	const struct timerlat_global *g = w->env->data;
	if (g->dma_fd >= 0)
		json_int(j, "dma_latency_us", g->dma_us);
	else
		json_null(j, "dma_latency_us");
	if (g->why[0])
		json_str(j, "dma_latency_why", g->why);
	json_uint(j, "wakeups", t->thread->count); /* every wake-up, kept or not */
	json_uint(j, "missed", t->missed);
	json_uint(j, "max_ns", t->thread->max);
	json_uint(j, "overflow", t->overflow);
	hist_emit(j, "thread", t->thread, 1.0);
	json_pairs(j, "wakes", t->wake, t->n);
	return 0;
}

OSLENS_PROBE(timerlat) = {
	.name = "timerlat",
	.summary = "sleep on a periodic absolute timer at a real-time priority; each wake-up's lateness",
	.subsystem = "timer",
	.syscalls = "clock_nanosleep",
	.variants = {{"default", "one sleeping thread per CPU"}},
	.opts = {{"period_us", 1000, 50, 1000000, "the timer's period (rtla and cyclictest: 1000)"},
		 {"prio", 95, 0, 99, "SCHED_FIFO priority of each thread (0: SCHED_OTHER; rtla's default: 95)"},
		 {"max_wakeups", 1 << 16, 16, 1 << 22, "wake-ups kept individually per CPU (the histogram counts all)"},
		 {"dma_latency_us", -1, -1, 2000000000,
		  "hold /dev/cpu_dma_latency at this many us (cyclictest: 0; -1: leave the idle states)"}},
	.global_setup = timerlat_global_setup,
	.global_teardown = timerlat_global_teardown,
	.setup = timerlat_setup,
	.teardown = timerlat_teardown,
	.op = timerlat_op,
	.loop = timerlat_loop,
	.emit = timerlat_emit,
	.emit_type = "timerlat",
};
