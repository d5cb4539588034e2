/* First-touch page faults: an exception, not a system call.
 * anon: a write to the next untouched page of a private anonymous region,
 * with MADV_NOHUGEPAGE so that every fault allocates and zeroes one 4 KiB page
 * whatever the THP setting.
 * file: a read of the next page of a MAP_SHARED mapping of a file whose pages
 * sit in the page cache (a minor fault). Fault-around (fault_around_bytes,
 * 64 KiB by default) would also map the cached neighbours of the page, and
 * MADV_RANDOM does not stop it (checked on 6.18: 1 fault per 16 pages either
 * way), so the file holds one cached page every stride_kb, holes between, and
 * each fault maps that page alone. MADV_RANDOM is still set, so that a fault
 * that ever misses the cache reads no neighbours in.
 * huge: a write to the next untouched 2 MiB (the PMD size) of a private
 * anonymous region with MADV_HUGEPAGE, aligned to it: each fault allocates
 * and zeroes one transparent huge page where THP allows it (enabled is
 * "always" or "madvise"), the long kernel entry that the co-design study's
 * run lengths single out.
 * A fresh region allocates its page tables on the first fault in each 2 MiB,
 * as first touches do. Regions are per worker; prep maps a fresh one when the
 * current one is used up. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../probe.h"

struct fault {
	char *base, *next, *end;
	size_t len, stride;
	char *map; /* what mmap gave: base rounded up to the stride for huge */
	size_t maplen;
	int fd; /* -1 for anon */
	int huge;
};

/* The PMD size: what one transparent huge page covers. */
static size_t huge_page_size(void)
{
	size_t size = 2u << 20;
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
	if (f) {
		unsigned long v;
		if (fscanf(f, "%lu", &v) == 1 && v)
			size = v;
		fclose(f);
	}
	return size;
}

static void fault_geometry(const struct probe_env *env, size_t *len, size_t *stride)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	*len = (size_t)probe_opt(env, "region_mb") << 20;
	*stride = page;
	if (probe_variant_is(env, "file")) {
		*stride = (((size_t)probe_opt(env, "stride_kb") << 10) + page - 1) & ~(page - 1);
		if (*stride > *len)
			*stride = *len;
	}
	if (probe_variant_is(env, "huge")) {
		*stride = huge_page_size();
		*len = (*len + *stride - 1) / *stride * *stride;
	}
}

static int fault_global_setup(struct probe_env *env)
{
	if (!probe_variant_is(env, "file"))
		return 0;
	size_t len, stride;
	fault_geometry(env, &len, &stride);
	for (int i = 0; i < env->nworkers; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/fault.%d", env->tmpdir, i);
		int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0)
			return -1;
		int rc = ftruncate(fd, (off_t)len);
		for (size_t off = 0; !rc && off < len; off += stride) {
			ssize_t n = pwrite(fd, "", 1, (off_t)off); /* caches its whole page */
			if (n != 1) {
				errno = n < 0 ? errno : ENOSPC;
				rc = -1;
			}
		}
		int e = errno;
		close(fd);
		errno = e;
		if (rc)
			return -1;
	}
	return 0;
}

static int fault_map(struct fault *f)
{
	if (f->map && munmap(f->map, f->maplen) != 0)
		return -1;
	f->map = f->base = NULL;
	f->maplen = f->len + (f->huge ? f->stride : 0); /* room to align to a huge page */
	void *p = f->fd < 0 ? mmap(NULL, f->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
			    : mmap(NULL, f->maplen, PROT_READ, MAP_SHARED, f->fd, 0);
	if (p == MAP_FAILED)
		return -1;
	f->map = p;
	f->base = f->huge ? (char *)(((uintptr_t)p + f->stride - 1) & ~(uintptr_t)(f->stride - 1)) : p;
	f->next = f->base;
	f->end = f->base + f->len;
	if (f->fd >= 0)
		return madvise(p, f->len, MADV_RANDOM);
	if (f->huge)
		return madvise(f->base, f->len, MADV_HUGEPAGE); /* EINVAL: a kernel without THP */
	if (madvise(p, f->len, MADV_NOHUGEPAGE) != 0 && errno != EINVAL)
		return -1; /* EINVAL: a kernel without THP, whose pages are 4 KiB anyway */
	return 0;
}

static void fault_teardown(struct worker *w)
{
	struct fault *f = w->data;
	if (f->map)
		munmap(f->map, f->maplen);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

static int fault_setup(struct worker *w)
{
	struct fault *f = calloc(1, sizeof *f);
	if (!f)
		return -1;
	w->data = f;
	f->fd = -1;
	f->huge = probe_variant_is(w->env, "huge");
	fault_geometry(w->env, &f->len, &f->stride);
	if (probe_variant_is(w->env, "file")) {
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s/fault.%d", w->env->tmpdir, w->index);
		f->fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if ((probe_variant_is(w->env, "file") && f->fd < 0) || fault_map(f) != 0) {
		int e = errno;
		fault_teardown(w);
		errno = e;
		return -1;
	}
	return 0;
}

static int fault_prep(struct worker *w)
{
	struct fault *f = w->data;
	return f->next < f->end ? 0 : fault_map(f);
}

static inline int fault_op(struct worker *w)
{
	struct fault *f = w->data;
	if (f->fd < 0)
		*(volatile char *)f->next = 1;
	else
		(void)*(volatile char *)f->next;
	f->next += f->stride;
	return 0;
}
PROBE_LOOP_PREP(fault_op, fault_prep)

OSLENS_PROBE(fault) = {
	.name = "fault",
	.summary = "page fault on the first touch of a page: anon write (4 KiB, no THP), read of a "
		   "cached file page through MAP_SHARED (minor, one page mapped per fault), or a 2 MiB THP",
	.subsystem = "mm/fault",
	.syscalls = "",
	.variants = {{"anon", "write one byte to the next untouched page of a private anonymous region"},
		     {"file", "read the next cached page of a private file mapped MAP_SHARED|MADV_RANDOM"},
		     {"huge",
		      "write one byte to the next untouched 2 MiB of a MADV_HUGEPAGE region: one THP per fault"}},
	.opts = {{"region_mb", 64, 1, 1 << 20,
		  "region mapped at a time (and file size); prep maps a fresh one when used up"},
		 {"stride_kb", 64, 64, 2048,
		  "file: distance between cached pages, >= fault_around_bytes (debugfs, 64 KiB by default) so that each fault maps one page"}},
	.global_setup = fault_global_setup,
	.setup = fault_setup,
	.teardown = fault_teardown,
	PROBE_OPS(fault_op),
};
