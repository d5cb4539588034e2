/* The detour probe (selfish-detour / sysjitter method): a pinned thread spins
 * reading the clock, and every gap between two reads longer than a threshold
 * is time the OS (or the hypervisor, or the hardware) took from it. Each
 * detour is kept as (end on CLOCK_MONOTONIC, duration), the clock BPF
 * events use, so that it can be matched to what ran meanwhile. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../json.h"
#include "../mem.h"
#include "../probe.h"

struct detour {
	uint64_t (*rec)[2]; /* [end_mono_ns, duration_ns] */
	uint64_t cap, n, overflow;
	uint64_t count, total_ticks, max_ticks;
	uint64_t threshold_ticks, iterations, elapsed_ticks;
	uint64_t start_mono_ns; /* when the loop began, on CLOCK_MONOTONIC */
	uint64_t quantum_ticks; /* FTQ: 0, or the fixed time quantum */
	uint32_t *ftq;		/* FTQ: loop iterations completed in each quantum */
	uint64_t ftq_cap, ftq_n;
	double loop_ns; /* minimal loop time, calibrated */
	timer_t timer;
	int has_timer;
	/* self-test: each run of the signal handler, [start, end] on
	 * CLOCK_MONOTONIC by its own reads, so that a test can find each in a
	 * detour whatever else (a host not running the vCPU) lengthened it */
	uint64_t (*signals)[2];
	uint64_t signals_cap, signals_n, signals_overflow;
};

static inline uint64_t now_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (clock_use_tsc) {
		uint32_t lo, hi;
		__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
		return ((uint64_t)hi << 32) | lo;
	}
#endif
	return mono_ns();
}

/* The time of one loop iteration, from the fastest of many batches (two
 * back-to-back reads alone can overlap and say nothing): the resolution
 * of the probe. */
static double calibrate(void)
{
	enum { BATCH = 1000 };
	uint64_t best = UINT64_MAX;
	volatile uint64_t sink = 0;
	for (int round = 0; round < 200; round++) {
		uint64_t a = now_ticks(), prev = a;
		for (int i = 0; i < BATCH; i++) {
			uint64_t now = now_ticks();
			sink += now - prev;
			prev = now;
		}
		if (prev - a < best)
			best = prev - a;
	}
	return (double)best / BATCH * ticks_unit_ns();
}

static uint64_t signal_busy_ns;
static __thread struct detour *signalled; /* the thread's own: its timer signals only it */

/* Burns a known time, so that each signal is a detour of known length, and
 * keeps when it ran. */
static void on_timer_signal(int sig)
{
	(void)sig;
	uint64_t start = mono_ns(), until = start + signal_busy_ns, now;
	while ((now = mono_ns()) < until)
		;
	struct detour *d = signalled;
	if (!d) /* a signal still queued as the thread tears down */
		return;
	if (d->signals_n < d->signals_cap) {
		d->signals[d->signals_n][0] = start;
		d->signals[d->signals_n][1] = now;
		d->signals_n++;
	} else {
		d->signals_overflow++;
	}
}

/* signal_hz > 0: a POSIX timer signals this thread at a known rate, so that
 * the probe can be checked against interruptions it must find. */
static int arm_signal(struct detour *d, long hz)
{
	d->signals_cap = d->cap;
	d->signals = calloc_touched(d->signals_cap, sizeof *d->signals); /* never fault in the handler */
	if (!d->signals)
		return -1;
	signalled = d;
	struct sigaction sa = {.sa_handler = on_timer_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGRTMIN + 1, &sa, NULL) != 0)
		return -1;
	struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN + 1};
	ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &ev, &d->timer) != 0)
		return -1;
	d->has_timer = 1;
	long ns = 1000000000L / hz;
	struct itimerspec its = {.it_interval = {ns / 1000000000L, ns % 1000000000L},
				 .it_value = {ns / 1000000000L, ns % 1000000000L}};
	return timer_settime(d->timer, 0, &its, NULL);
}

/* The shortest threshold worth asking for, in loop times. The calibrated
 * loop time is the fastest batch's mean: single iterations beside a busy SMT
 * sibling, after a branch miss or a cache miss take a few times that, and
 * every such gap would count as a detour (at 10 ns on a 9.5 ns loop, nine
 * iterations in ten did). The cheapest interrupt takes far longer. oslens
 * refuses a threshold under this before measuring (min_threshold_ns). */
#define MIN_THRESHOLD_LOOPS 5

static int detour_setup(struct worker *w)
{
	struct detour *d = calloc(1, sizeof *d);
	if (!d)
		return -1;
	w->data = d;
	d->cap = (uint64_t)probe_opt(w->env, "max_detours");
	d->rec = calloc_touched(d->cap, sizeof *d->rec); /* never fault while recording */
	if (!d->rec)
		return -1;
	d->loop_ns = calibrate();
	long thr = probe_opt(w->env, "threshold_ns");
	/* Default: 20 loop times, but no less than 500 ns. Shorter gaps in a
	 * spin loop are cache, TLB or SMT-sibling effects: even the cheapest
	 * interrupt takes longer to enter and leave. */
	double ns = thr > 0 ? (double)thr : 20 * d->loop_ns < 500 ? 500 : 20 * d->loop_ns;
	d->threshold_ticks = (uint64_t)(ns / ticks_unit_ns());
	long quantum_us = probe_opt(w->env, "ftq_us");
	if (quantum_us > 0) {
		/* Sized for the longest run the harness allows (a week), capped. */
		d->quantum_ticks = (uint64_t)((double)quantum_us * 1000 / ticks_unit_ns());
		d->ftq_cap = (uint64_t)probe_opt(w->env, "ftq_max");
		d->ftq = calloc_touched(d->ftq_cap, sizeof *d->ftq);
		if (!d->ftq)
			return -1;
	}
	long hz = probe_opt(w->env, "signal_hz");
	signal_busy_ns = (uint64_t)probe_opt(w->env, "signal_busy_us") * 1000;
	return hz > 0 ? arm_signal(d, hz) : 0;
}

static void detour_teardown(struct worker *w)
{
	struct detour *d = w->data;
	if (!d)
		return;
	signalled = NULL;
	if (d->has_timer)
		timer_delete(d->timer);
	free(d->rec);
	free(d->ftq);
	free(d->signals);
	free(d);
}

/* Not PROBE_LOOP: the "operation" is one clock read, and the loop keeps its
 * own books. It publishes its iteration count like every loop does. */
static uint64_t detour_loop(struct worker *w, const struct loop *l, int *err)
{
	struct detour *d = w->data;
	const volatile int *stop = l->stop;
	volatile uint64_t *ops = l->ops;
	const uint64_t thr = d->threshold_ticks, limit = l->limit;
	d->start_mono_ns = mono_ns();
	uint64_t n = 0, start = now_ticks(), prev = start;
	/* FTQ: one compare per iteration; with FTQ off the boundary is never reached. */
	uint64_t boundary = d->quantum_ticks ? start + d->quantum_ticks : UINT64_MAX, in_quantum = n;
	(void)err;
	while (n < limit && !*stop) {
		uint64_t now = now_ticks();
		uint64_t gap = now - prev;
		if (__builtin_expect(now >= boundary, 0)) {
			/* Quanta the thread never saw (a long detour) count zero work. */
			while (now >= boundary) {
				if (d->ftq_n < d->ftq_cap)
					d->ftq[d->ftq_n++] = (uint32_t)(n - in_quantum);
				in_quantum = n;
				boundary += d->quantum_ticks;
			}
		}
		if (__builtin_expect(gap > thr, 0)) {
			d->count++;
			d->total_ticks += gap;
			if (gap > d->max_ticks)
				d->max_ticks = gap;
			if (d->n < d->cap) {
				d->rec[d->n][0] = mono_ns();
				d->rec[d->n][1] = gap;
				d->n++;
			} else {
				d->overflow++;
			}
			now = now_ticks(); /* the bookkeeping is not the OS's noise */
		}
		prev = now;
		*ops = ++n;
	}
	d->iterations = n;
	d->elapsed_ticks = prev - start;
	return n;
}

static int detour_op(struct worker *w)
{
	(void)w;
	(void)now_ticks();
	return 0;
}

static int detour_emit(struct worker *w, struct json *j)
{
	const struct detour *d = w->data;
	const double u = ticks_unit_ns();
	json_num(j, "loop_ns", d->loop_ns);
	json_num(j, "threshold_ns", (double)d->threshold_ticks * u);
	json_num(j, "min_threshold_ns", MIN_THRESHOLD_LOOPS * d->loop_ns);
	json_uint(j, "iterations", d->iterations);
	json_uint(j, "start_ns", d->start_mono_ns);
	json_num(j, "runtime_ns", (double)d->elapsed_ticks * u);
	json_uint(j, "count", d->count);
	json_num(j, "total_ns", (double)d->total_ticks * u);
	json_num(j, "max_ns", (double)d->max_ticks * u);
	json_uint(j, "overflow", d->overflow);
	if (d->quantum_ticks) {
		json_obj(j, "ftq");
		json_num(j, "quantum_ns", (double)d->quantum_ticks * u);
		json_arr(j, "counts");
		for (uint64_t i = 0; i < d->ftq_n; i++)
			json_uint(j, NULL, d->ftq[i]);
		json_end(j);
		json_end(j);
	}
	if (d->has_timer) {
		json_pairs(j, "signals", d->signals, d->signals_n);
		json_uint(j, "signals_overflow", d->signals_overflow);
	}
	json_arr(j, "detours");
	for (uint64_t i = 0; i < d->n; i++) {
		json_arr(j, NULL);
		json_uint(j, NULL, d->rec[i][0]);
		json_uint(j, NULL, (uint64_t)((double)d->rec[i][1] * u));
		json_end(j);
	}
	json_end(j);
	return 0;
}

OSLENS_PROBE(detour) = {
	.name = "detour",
	.summary = "spin reading the clock; every gap over the threshold is a detour the OS took",
	.subsystem = "noise",
	.syscalls = "",
	.variants = {{"default", "one spinning thread per CPU"}},
	.opts = {{"threshold_ns", 0, 0, 1000000000,
		  "shortest gap counted as a detour (0: 20 x the loop time, at least 500 ns)"},
		 {"max_detours", 65536, 16, 1 << 26, "detours kept individually per CPU (totals count all)"},
		 {"signal_hz", 0, 0, 100000, "self-test: a timer signals each probe thread at this rate"},
		 {"signal_busy_us", 0, 0, 1000000, "self-test: each signal's handler spins this long"},
		 {"ftq_us", 0, 0, 1000000, "FTQ: also count loop iterations per fixed quantum of this many us"},
		 {"ftq_max", 1 << 20, 16, 1 << 26, "FTQ: quanta kept per CPU"}},
	.setup = detour_setup,
	.teardown = detour_teardown,
	.op = detour_op,
	.loop = detour_loop,
	.emit = detour_emit,
	.emit_type = "detours",
};
