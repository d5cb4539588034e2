/* Calls that change a mapping without making or removing it (the
 * variability study's catalogue): madvise() on a private page, mremap()
 * growing a private mapping in place and shrinking it back. The mapping is
 * the worker's own; in thread mode all workers share one address space,
 * so its mmap_lock is theirs too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../probe.h"

#define PAGE 4096

struct vm_region {
	char *base;
	size_t len;   /* mapped now */
	int dontneed; /* madvise's variant, read once at set-up, not in the timed loop */
};

static int region_setup(struct worker *w, size_t reserve)
{
	struct vm_region *r = calloc(1, sizeof *r);
	if (!r)
		return -1;
	/* reserve room to grow into in place, then give back all but one page */
	r->base = mmap(NULL, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->base == MAP_FAILED) {
		free(r);
		return -1;
	}
	if (reserve > PAGE && munmap(r->base + PAGE, reserve - PAGE) != 0) {
		int e = errno;
		munmap(r->base, reserve);
		free(r);
		errno = e;
		return -1;
	}
	r->len = PAGE;
	memset(r->base, 1, PAGE); /* the page exists: madvise has something to act on */
	w->data = r;
	return 0;
}

static void region_teardown(struct worker *w)
{
	struct vm_region *r = w->data;
	munmap(r->base, r->len);
	free(r);
}

static int madvise_setup(struct worker *w)
{
	if (region_setup(w, PAGE) != 0)
		return -1;
	((struct vm_region *)w->data)->dontneed = probe_variant_is(w->env, "dontneed");
	return 0;
}

/* normal: the advice recorded on the mapping, no page touched; dontneed:
 * the page dropped, then touched again outside the timed call's return —
 * the next fault is part of the operation, as it is of a program that
 * frees memory this way. */
static inline int madvise_op(struct worker *w)
{
	struct vm_region *r = w->data;
	if (!r->dontneed)
		return madvise(r->base, PAGE, MADV_NORMAL);
	if (madvise(r->base, PAGE, MADV_DONTNEED) != 0)
		return -1;
	r->base[0] = 1;
	return 0;
}
PROBE_LOOP(madvise_op)

OSLENS_PROBE(madvise) = {
	.name = "madvise",
	.summary = "madvise() on one private page: MADV_NORMAL (advice only) or MADV_DONTNEED (drop it, fault it back)",
	.subsystem = "mm",
	.syscalls = "madvise",
	.variants = {{"normal", "MADV_NORMAL: the mapping's advice reset, no page work"},
		     {"dontneed", "MADV_DONTNEED, then a write that faults the page back in"}},
	.setup = madvise_setup,
	.teardown = region_teardown,
	PROBE_OPS(madvise_op),
};

static int mremap_setup(struct worker *w)
{
	/* room for the second page is reserved and given back, so growing in
	 * place is likely but not guaranteed: MREMAP_MAYMOVE lets it move */
	return region_setup(w, 2 * PAGE);
}

/* mremap() a one-page mapping to two pages, then back to one. */
static inline int mremap_op(struct worker *w)
{
	struct vm_region *r = w->data;
	char *grown = mremap(r->base, PAGE, 2 * PAGE, MREMAP_MAYMOVE);
	if (grown == MAP_FAILED)
		return -1;
	r->base = grown;
	r->len = 2 * PAGE;
	if (mremap(r->base, 2 * PAGE, PAGE, 0) == MAP_FAILED)
		return -1;
	r->len = PAGE;
	return 0;
}
PROBE_LOOP(mremap_op)

OSLENS_PROBE(mremap) = {
	.name = "mremap",
	.summary = "mremap() a private one-page mapping to two pages and back",
	.subsystem = "mm/vma",
	.syscalls = "mremap,mremap",
	.variants = {{"default", "grow (may move), then shrink in place"}},
	.setup = mremap_setup,
	.teardown = region_teardown,
	PROBE_OPS(mremap_op),
};
