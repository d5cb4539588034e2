#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct clock_info clock_info;
double clock_ns_per_tick;
uint64_t clock_tsc0;
int clock_use_tsc;

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static int tsc_invariant(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000007, &a, &b, &c, &d))
		return 0;
	return (d >> 8) & 1;
}

/* A (monotonic, tsc) pair read as close together as this CPU allows; the
 * width of the tightest bracket bounds the pairing error. */
static void paired_read(uint64_t *ns, uint64_t *tsc, uint64_t *width)
{
	*width = UINT64_MAX;
	for (int i = 0; i < 64; i++) {
		uint64_t a = mono_ns(), t = rdtscp(), b = mono_ns();
		if (b - a < *width) {
			*width = b - a;
			*ns = a + (b - a) / 2;
			*tsc = t;
		}
	}
}

static int tsc_calibrate(void)
{
	uint64_t ns0, t0, w0, ns1, t1, w1;
	paired_read(&ns0, &t0, &w0);
	while (mono_ns() - ns0 < 50000000ull)
		;
	paired_read(&ns1, &t1, &w1);
	if (t1 <= t0 || ns1 <= ns0)
		return -1;
	clock_info.tsc_hz = (double)(t1 - t0) * 1e9 / (double)(ns1 - ns0);
	clock_info.calib_ppm = (double)(w0 + w1) * 1e6 / (double)(ns1 - ns0);
	clock_ns_per_tick = 1e9 / clock_info.tsc_hz;
	clock_tsc0 = rdtscp();
	return 0;
}
#endif

/* The kernel's clocksource: it demotes a TSC it finds unstable (drifting
 * across CPUs, stopping in idle states) to another. $OSLENS_CLOCKSOURCE_FILE
 * reads it from elsewhere: a test's model of a kernel that did. */
static void kernel_clocksource(char *buf, size_t len)
{
	const char *path = getenv("OSLENS_CLOCKSOURCE_FILE");
	FILE *f = fopen(path && *path ? path : "/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	buf[0] = 0;
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
}

static void use_monotonic(const char *why)
{
	clock_use_tsc = 0;
	clock_info.source = "monotonic";
	clock_info.tsc_hz = 0;
	clock_tsc0 = mono_ns();
	snprintf(clock_info.reason, sizeof clock_info.reason, "%s", why);
}

int clock_init(enum clock_want want)
{
	if (want == CLOCK_WANT_MONOTONIC) {
		use_monotonic("requested");
		return 0;
	}
#if defined(__x86_64__) || defined(__i386__)
	char cs[64];
	kernel_clocksource(cs, sizeof cs);
	if (!tsc_invariant()) {
		use_monotonic("TSC is not invariant on this CPU");
		return want == CLOCK_WANT_TSC ? -1 : 0;
	}
	/* The kernel demotes a TSC it has seen drift across CPUs; follow it,
	 * and refuse a TSC asked for that the kernel does not trust. */
	if (strcmp(cs, "tsc") != 0) {
		char why[128];
		snprintf(why, sizeof why, "kernel clocksource is '%s', not tsc: the kernel does not trust the TSC here",
			 cs[0] ? cs : "unknown");
		use_monotonic(why);
		return want == CLOCK_WANT_TSC ? -1 : 0;
	}
	if (tsc_calibrate() != 0) {
		use_monotonic("TSC calibration failed");
		return want == CLOCK_WANT_TSC ? -1 : 0;
	}
	clock_use_tsc = 1;
	clock_info.source = "tsc";
	snprintf(clock_info.reason, sizeof clock_info.reason,
		 "invariant TSC, kernel clocksource '%s', calibrated against CLOCK_MONOTONIC", cs);
	return 0;
#else
	use_monotonic("no TSC on this architecture");
	return want == CLOCK_WANT_TSC ? -1 : 0;
#endif
}

void clock_save(struct clock_state *out)
{
	*out = (struct clock_state){clock_ns_per_tick, clock_info.tsc_hz, clock_tsc0, clock_use_tsc};
}

void clock_adopt(const struct clock_state *in)
{
	clock_ns_per_tick = in->ns_per_tick;
	clock_info.tsc_hz = in->tsc_hz;
	clock_tsc0 = in->tsc0;
	clock_use_tsc = in->use_tsc;
}
