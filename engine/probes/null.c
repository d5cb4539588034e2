/* No operation: what timing and recording one operation costs by itself.
 * Every latency result is reported next to this floor, never minus it. */
#include "../probe.h"

static inline int null_op(struct worker *w)
{
	(void)w;
	__asm__ __volatile__("" ::: "memory");
	return 0;
}
PROBE_LOOP(null_op)

OSLENS_PROBE(null) = {
	.name = "null",
	.summary = "no operation: the cost of the harness (and, timed, of timing and recording)",
	.subsystem = "harness",
	.syscalls = "",
	.variants = {{"default", "an empty operation"}},
	PROBE_OPS(null_op),
};
