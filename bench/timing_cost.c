/* What timing one operation costs, split into its parts, with the engine's
 * own clock and histogram code: an empty loop, the serialised clock pair
 * around nothing, and the pair plus the histogram update. */
#include <stdio.h>
#include <stdlib.h>

#include "../engine/clock.h"
#include "../engine/hist.h"

#define N 20000000ul

static double per_op(uint64_t t0, uint64_t t1)
{
	return (double)(t1 - t0) / N;
}

int main(void)
{
	if (clock_init(CLOCK_WANT_AUTO) != 0)
		return 1;
	struct hist *h = hist_new();
	volatile uint64_t sink = 0;

	uint64_t a = mono_ns();
	for (uint64_t i = 0; i < N; i++)
		sink += i;
	uint64_t b = mono_ns();
	for (uint64_t i = 0; i < N; i++) {
		uint64_t t0 = ticks_begin(), t1 = ticks_end();
		sink += t1 - t0;
	}
	uint64_t c = mono_ns();
	for (uint64_t i = 0; i < N; i++) {
		uint64_t t0 = ticks_begin(), t1 = ticks_end();
		hist_record(h, t1 - t0);
	}
	uint64_t d = mono_ns();
	for (uint64_t i = 0; i < N; i++)
		hist_record(h, (i * 2654435761u) & 0xffff);
	uint64_t e = mono_ns();
	printf("{\"clock\":\"%s\",\"empty_ns\":%.3f,\"clock_pair_ns\":%.3f,\"timed_ns\":%.3f,\"record_only_ns\":%.3f}\n",
	       clock_info.source, per_op(a, b), per_op(b, c), per_op(c, d), per_op(d, e));
	free(h);
	return (int)(sink & 0);
}
