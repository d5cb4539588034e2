/* OSMark forkbench: fork(), the child _exit()s at once, the parent reaps it.
 * fork-static runs the same loop in the statically linked engine: without
 * ld.so and shared libc mappings there is less address space to copy, which
 * OSMark found to matter for scalability. */
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../probe.h"

static inline int fork_op(struct worker *w)
{
	(void)w;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		_exit(0);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}
PROBE_LOOP(fork_op)

#define FORK_COMMON                                                            \
	.subsystem = "process/mm", .syscalls = "clone,exit_group,wait4",       \
	.variants = {{"default", "the parent is the whole engine worker"}},    \
	.processes_per_worker = 1, PROBE_OPS(fork_op)

OSLENS_PROBE(fork) = {
	.name = "fork",
	.summary = "fork(), child _exit(), parent waits (OSMark forkbench, dynamically linked)",
	FORK_COMMON,
};

OSLENS_PROBE(fork_static) = {
	.name = "fork-static",
	.summary = "fork(), child _exit(), parent waits, from a statically linked engine",
	.needs_static = 1,
	FORK_COMMON,
};
