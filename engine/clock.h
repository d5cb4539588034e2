/* The clock of the engine: the TSC where it is invariant and the kernel
 * trusts it, else CLOCK_MONOTONIC. Every record says which was used. */
#ifndef OSLENS_CLOCK_H
#define OSLENS_CLOCK_H

#include <stdint.h>
#include <time.h>

enum clock_want { CLOCK_WANT_AUTO, CLOCK_WANT_TSC, CLOCK_WANT_MONOTONIC };

struct clock_info {
	const char *source; /* "tsc" or "monotonic" */
	double tsc_hz;	    /* 0 when the TSC is not used */
	double calib_ppm;   /* bound on the calibration error */
	char reason[160];   /* why this source was chosen */
};

extern struct clock_info clock_info;
extern double clock_ns_per_tick;
extern uint64_t clock_tsc0;
extern int clock_use_tsc;

/* Returns 0, or -1 with clock_info.reason saying why the request cannot be met. */
int clock_init(enum clock_want want);
/* The calibration another process of the run made: a worker exec'd afresh
 * takes its master's, so that both read one clock with one zero (deadlines,
 * start offsets) and one unit (histograms merge). */
struct clock_state {
	double ns_per_tick, tsc_hz;
	uint64_t tsc0;
	int use_tsc;
};
void clock_save(struct clock_state *out);
void clock_adopt(const struct clock_state *in);

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t rdtscp(void)
{
	uint32_t lo, hi, aux;
	__asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	return ((uint64_t)hi << 32) | lo;
}
#endif

/* Raw clock units around one timed operation: TSC ticks (lfence keeps the
 * operation from starting before the first read; rdtscp then lfence keep
 * it from finishing after the second), or ns from CLOCK_MONOTONIC. */
static inline uint64_t ticks_begin(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (clock_use_tsc) {
		uint32_t lo, hi;
		__asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
		return ((uint64_t)hi << 32) | lo;
	}
#endif
	return mono_ns();
}

static inline uint64_t ticks_end(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (clock_use_tsc) {
		uint32_t lo, hi, aux;
		__asm__ __volatile__("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
		return ((uint64_t)hi << 32) | lo;
	}
#endif
	return mono_ns();
}

/* How many ns one unit of ticks_begin/ticks_end is. */
static inline double ticks_unit_ns(void)
{
	return clock_use_tsc ? clock_ns_per_tick : 1.0;
}

/* Nanoseconds since clock_init on the chosen clock. */
static inline uint64_t clock_ns(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (clock_use_tsc)
		return (uint64_t)((double)(rdtscp() - clock_tsc0) * clock_ns_per_tick);
#endif
	return mono_ns() - clock_tsc0;
}

#endif
