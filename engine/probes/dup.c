/* OSMark dupbench: dup() and close() of a descriptor private to the worker.
 * In thread mode all workers share one descriptor table and its lock. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "../probe.h"

static int dup_setup(struct worker *w)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	w->data = (void *)(intptr_t)fd;
	return fd < 0 ? -1 : 0;
}

static void dup_teardown(struct worker *w)
{
	close((int)(intptr_t)w->data);
}

static inline int dup_op(struct worker *w)
{
	int fd = dup((int)(intptr_t)w->data);
	if (fd < 0)
		return -1;
	return close(fd);
}
PROBE_LOOP(dup_op)

OSLENS_PROBE(dup) = {
	.name = "dup",
	.summary = "dup() and close() of a private file descriptor (OSMark dupbench)",
	.subsystem = "vfs/fdtable",
	.syscalls = "dup,close",
	.variants = {{"default", "each worker duplicates its own descriptor"}},
	.setup = dup_setup,
	.teardown = dup_teardown,
	PROBE_OPS(dup_op),
};
