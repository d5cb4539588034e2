/* The clock of the engine: the TSC where it is invariant and the kernel
 * trusts it, else CLOCK_MONOTONIC. Every record says which was used. */
#ifndef OSLENS_CLOCK_H
#define OSLENS_CLOCK_H

#include <stdint.h>
#include <time.h>

enum clock_want { CLOCK_WANT_AUTO, CLOCK_WANT_TSC, CLOCK_WANT_MONOTONIC };

struct clock_info {
	const char *source;     /* "tsc" or "monotonic" */
	double tsc_hz;          /* 0 when the TSC is not used */
	double calib_ppm;       /* bound on the calibration error */
	char reason[160];       /* why this source was chosen */
};

extern struct clock_info clock_info;
extern double clock_ns_per_tick;
extern uint64_t clock_tsc0;
extern int clock_use_tsc;

/* Returns 0, or -1 with clock_info.reason saying why the request cannot be met. */
int clock_init(enum clock_want want);

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
