/* The null system call: the floor every other probe is read against. */
#include <errno.h>
#include <unistd.h>

#include "../probe.h"

static inline int getppid_op(struct worker *w)
{
	(void)w;
	getppid();
	return 0;
}
PROBE_LOOP(getppid_op)

OSLENS_PROBE(getppid) = {
	.name = "getppid",
	.summary = "getppid(): the null system call, the cost of entering and leaving the kernel",
	.subsystem = "syscall",
	.syscalls = "getppid",
	.variants = {{"default", "one call per operation"}},
	PROBE_OPS(getppid_op),
};
