/* OSMark forkbench: fork(), the child _exit()s at once, the parent reaps it.
 * fork-static runs the same loop in the statically linked engine: without
 * ld.so and shared libc mappings there is less address space to copy, which
 * OSMark found to matter for scalability. The `mapped` variant (LEBench's big
 * fork) gives the parent a large touched private region, so fork copies its
 * page tables and exit tears the child's copy down again. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../probe.h"

/* One region per process: each worker process has its own, while worker
 * threads share their process's, as they share its page tables. It is a
 * static, so every worker process gets a copy of its own at fork. */
static struct {
	pthread_mutex_t lock;
	int users;
	char *p;
	size_t len;
} region = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Touching more than the memory available would wake the OOM killer. */
static int fork_global_setup(struct probe_env *env)
{
	if (!probe_variant_is(env, "mapped"))
		return 0;
	long avail_kb = 0;
	FILE *f = fopen("/proc/meminfo", "r");
	if (f) {
		char line[128];
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "MemAvailable: %ld kB", &avail_kb) == 1)
				break;
		fclose(f);
	}
	long need_kb = probe_opt(env, "mapped_mb") * 1024 * (env->threaded ? 1 : env->nworkers);
	if (avail_kb && need_kb > avail_kb / 10 * 9) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

static int fork_setup(struct worker *w)
{
	if (!probe_variant_is(w->env, "mapped"))
		return 0;
	int rc = 0;
	pthread_mutex_lock(&region.lock);
	if (region.users == 0) {
		region.len = (size_t)probe_opt(w->env, "mapped_mb") << 20;
		region.p = mmap(NULL, region.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (region.p == MAP_FAILED) {
			rc = -1;
		} else {
			/* 4 KiB pages whatever the THP setting: one PTE per page to copy. */
			madvise(region.p, region.len, MADV_NOHUGEPAGE);
			size_t page = (size_t)sysconf(_SC_PAGESIZE);
			for (size_t off = 0; off < region.len; off += page)
				((volatile char *)region.p)[off] = 1;
		}
	}
	if (rc == 0)
		region.users++;
	pthread_mutex_unlock(&region.lock);
	return rc;
}

static void fork_teardown(struct worker *w)
{
	if (!probe_variant_is(w->env, "mapped"))
		return;
	pthread_mutex_lock(&region.lock);
	if (--region.users == 0)
		munmap(region.p, region.len);
	pthread_mutex_unlock(&region.lock);
}

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

#define FORK_COMMON                                                                                                   \
	.subsystem = "process/mm", .syscalls = "clone,exit_group,wait4", .processes_per_worker = 1, .fresh_image = 1, \
	PROBE_OPS(fork_op)

OSLENS_PROBE(fork) = {
	.name = "fork",
	.summary = "fork(), child _exit(), parent waits (OSMark forkbench, dynamically linked)",
	.variants = {{"default", "the parent is a worker exec'd afresh, as lean as a small program"},
		     {"mapped",
		      "the parent process also has mapped_mb MiB of private anonymous memory, "
		      "every page touched (in thread mode one region for all workers)",
		      NULL, 1}},
	.opts = {{"mapped_mb", 1024, 1, 1 << 20, "MiB the parent maps and touches (variant mapped)"}},
	.global_setup = fork_global_setup,
	.setup = fork_setup,
	.teardown = fork_teardown,
	FORK_COMMON,
};

OSLENS_PROBE(fork_static) = {
	.name = "fork-static",
	.summary = "fork(), child _exit(), parent waits, from a statically linked engine",
	.variants = {{"default", "the parent is a static worker exec'd afresh, as lean as a small program"}},
	.needs_static = 1,
	FORK_COMMON,
};
