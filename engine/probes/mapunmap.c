/* LEBench mmap/munmap: map a region and unmap it without touching it, so the
 * cost is the VMA bookkeeping (and in thread mode the shared mmap_lock), not
 * faults. An anonymous mapping may merge with a neighbouring one and munmap
 * split it again, as in any process. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../probe.h"

#define FILE_BYTES (1 << 20)

struct mapunmap {
	int fd, flags;
	size_t len;
};

static int mu_is_file(const struct probe_env *env)
{
	return !strncmp(env->probe->variants[env->variant].name, "file", 4);
}

static int mu_global_setup(struct probe_env *env)
{
	if (!mu_is_file(env))
		return 0;
	return probe_make_files(env, "mapunmap", env->nworkers, FILE_BYTES);
}

static int mu_setup(struct worker *w)
{
	struct mapunmap *m = calloc(1, sizeof *m);
	if (!m)
		return -1;
	m->len = strstr(w->env->probe->variants[w->env->variant].name, "1m") ? 1 << 20 : 4096;
	m->fd = -1;
	m->flags = MAP_PRIVATE | MAP_ANONYMOUS;
	if (mu_is_file(w->env)) {
		char path[PATH_MAX];
		probe_file_path(w->env, "mapunmap", w->index, path, sizeof path);
		if ((m->fd = open(path, O_RDWR | O_CLOEXEC)) < 0) {
			free(m);
			return -1;
		}
		m->flags = MAP_SHARED;
	}
	w->data = m;
	return 0;
}

static void mu_teardown(struct worker *w)
{
	struct mapunmap *m = w->data;
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}

static inline int mu_op(struct worker *w)
{
	const struct mapunmap *m = w->data;
	void *p = mmap(NULL, m->len, PROT_READ | PROT_WRITE, m->flags, m->fd, 0);
	if (p == MAP_FAILED)
		return -1;
	return munmap(p, m->len);
}
PROBE_LOOP(mu_op)

OSLENS_PROBE(mapunmap) = {
	.name = "mmap-munmap",
	.summary = "mmap() then munmap() of an untouched region, anonymous or of a private file (LEBench)",
	.subsystem = "mm/vma",
	.syscalls = "mmap,munmap",
	.variants = {{"anon-4k", "4 KiB, MAP_PRIVATE|MAP_ANONYMOUS"},
		     {"anon-1m", "1 MiB, MAP_PRIVATE|MAP_ANONYMOUS"},
		     {"file-4k", "the first 4 KiB of a 1 MiB file private to the worker, MAP_SHARED"},
		     {"file-1m", "the whole 1 MiB file private to the worker, MAP_SHARED"}},
	.global_setup = mu_global_setup,
	.setup = mu_setup,
	.teardown = mu_teardown,
	PROBE_OPS(mu_op),
};
