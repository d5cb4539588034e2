/* OSMark mmapbench: map a file MAP_SHARED, touch every page, unmap.
 * shared: every worker maps the same file, so all contend on one address
 * space mapping tree (i_mmap) and one page cache; own-file: a file each,
 * still MAP_SHARED (it was called "private", which read as MAP_PRIVATE;
 * oslens still takes mmap:private and says it is deprecated). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../probe.h"

struct mmap_worker {
	int fd;
	size_t len, page;
	int prot, write;
};

static int mmap_global_setup(struct probe_env *env)
{
	size_t bytes = (size_t)probe_opt(env, "pages") * (size_t)sysconf(_SC_PAGESIZE);
	int files = probe_variant_is(env, "shared") ? 1 : env->nworkers;
	return probe_make_files(env, "mmap", files, bytes);
}

static int mmap_setup(struct worker *w)
{
	struct mmap_worker *m = calloc(1, sizeof *m);
	if (!m)
		return -1;
	char path[PATH_MAX];
	probe_file_path(w->env, "mmap", probe_variant_is(w->env, "shared") ? 0 : w->index, path, sizeof path);
	m->write = probe_opt(w->env, "write") != 0;
	m->fd = open(path, m->write ? O_RDWR : O_RDONLY);
	if (m->fd < 0) {
		free(m);
		return -1;
	}
	m->page = (size_t)sysconf(_SC_PAGESIZE);
	m->len = (size_t)probe_opt(w->env, "pages") * m->page;
	m->prot = PROT_READ | (m->write ? PROT_WRITE : 0);
	w->data = m;
	return 0;
}

static void mmap_teardown(struct worker *w)
{
	struct mmap_worker *m = w->data;
	close(m->fd);
	free(m);
}

static inline int mmap_op(struct worker *w)
{
	const struct mmap_worker *m = w->data;
	char *p = mmap(NULL, m->len, m->prot, MAP_SHARED, m->fd, 0);
	if (p == MAP_FAILED)
		return -1;
	if (m->write)
		for (size_t off = 0; off < m->len; off += m->page)
			((volatile char *)p)[off] = 1;
	else
		for (size_t off = 0; off < m->len; off += m->page)
			(void)((volatile char *)p)[off];
	return munmap(p, m->len);
}
PROBE_LOOP(mmap_op)

OSLENS_PROBE(mmap) = {
	.name = "mmap",
	.summary = "mmap() a file MAP_SHARED, touch every page, munmap() (OSMark mmapbench)",
	.subsystem = "mm",
	.syscalls = "mmap,munmap",
	.variants = {{"shared", "every worker maps the same file, MAP_SHARED"},
		     {"own-file", "each worker maps a file of its own, MAP_SHARED too (not MAP_PRIVATE)"}},
	.opts = {{"pages", 1024, 1, 1 << 24, "pages mapped and touched per operation (OSMark: 125000)"},
		 {"write", 0, 0, 1, "touch pages by writing (1) instead of reading (0)"}},
	.global_setup = mmap_global_setup,
	.setup = mmap_setup,
	.teardown = mmap_teardown,
	PROBE_OPS(mmap_op),
};
