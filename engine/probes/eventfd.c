/* write() then read() of a non-blocking eventfd private to the worker: a
 * counter in the kernel behind the file interface, with no data copy or
 * wake-up, so the cost is mostly the VFS read/write paths. */
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../probe.h"

static int eventfd_setup(struct worker *w)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->data = (void *)(intptr_t)fd;
	return fd < 0 ? -1 : 0;
}

static void eventfd_teardown(struct worker *w)
{
	close((int)(intptr_t)w->data);
}

static inline int eventfd_op(struct worker *w)
{
	int fd = (int)(intptr_t)w->data;
	uint64_t v = 1;
	if (write(fd, &v, sizeof v) != sizeof v || read(fd, &v, sizeof v) != sizeof v)
		return -1;
	return 0;
}
PROBE_LOOP(eventfd_op)

OSLENS_PROBE(eventfd) = {
	.name = "eventfd",
	.summary = "write() 1 then read() on a private non-blocking eventfd",
	.subsystem = "vfs/eventfd",
	.syscalls = "write,read",
	.variants = {{"default", "each worker has its own eventfd"}},
	.setup = eventfd_setup,
	.teardown = eventfd_teardown,
	PROBE_OPS(eventfd_op),
};
