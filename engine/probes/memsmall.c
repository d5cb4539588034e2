/* Small address-space changes (LEBench, the OS/hardware co-design study's
 * per-syscall table): moving the heap break, and changing one page's
 * protection. Both take the mm's mmap lock for writing, which threads of one
 * process share. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../probe.h"

struct brk_worker {
	char *base, *top;
	intptr_t page;
	int threaded;
};

/* The break is per process. A worker process moves it with sbrk(), one page
 * up and back relative to wherever it is, so that whatever else the worker
 * runs (other probes under --mix) may allocate from the heap between
 * operations. Threads cannot: sbrk() keeps the break in a variable they would
 * race on, and interleaved relative moves could take it below where it
 * started, into the heap. Worker threads instead set it to the same two
 * absolute addresses, base + one page and base: interleaved, it stays within
 * that page and ends at base. This relies on no thread moving the break
 * meanwhile, which holds because worker threads allocate from malloc arenas
 * of their own, never from the main (brk) heap, unless MALLOC_ARENA_MAX
 * forces them to share it. */
static int brk_setup(struct worker *w)
{
	struct brk_worker *b = malloc(sizeof *b);
	if (!b)
		return -1;
	b->base = sbrk(0); /* after the malloc, which may itself move the break */
	if (b->base == (void *)-1) {
		free(b);
		return -1;
	}
	b->page = sysconf(_SC_PAGESIZE);
	b->top = b->base + b->page;
	b->threaded = w->env->threaded;
	w->data = b;
	return 0;
}

static void brk_teardown(struct worker *w)
{
	free(w->data);
}

static inline int brk_op(struct worker *w)
{
	const struct brk_worker *b = w->data;
	if (b->threaded)
		return brk(b->top) != 0 ? -1 : brk(b->base);
	if (sbrk(b->page) == (void *)-1)
		return -1;
	return sbrk(-b->page) == (void *)-1 ? -1 : 0;
}
PROBE_LOOP(brk_op)

OSLENS_PROBE(brk) = {
	.name = "brk",
	.summary = "brk() one page up and back down: grow and shrink the heap (threads share one break)",
	.subsystem = "mm",
	.syscalls = "brk,brk",
	.variants = {{"default", "processes: sbrk(+page), sbrk(-page); threads: brk() to fixed addresses, "
				 "so one thread's grow may find another's page already there"}},
	.setup = brk_setup,
	.teardown = brk_teardown,
	PROBE_OPS(brk_op),
};

struct mprotect_worker {
	char *map, *page;
	size_t size; /* of a page */
};

/* The page sits between two PROT_NONE guard pages of its own, so that
 * toggling its protection never splits or merges it with a neighbouring
 * mapping: each call changes one whole VMA and one present PTE. */
static int mprotect_setup(struct worker *w)
{
	struct mprotect_worker *m = malloc(sizeof *m);
	if (!m)
		return -1;
	m->size = (size_t)sysconf(_SC_PAGESIZE);
	m->map = mmap(NULL, 3 * m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	m->page = m->map + m->size;
	if (m->map == MAP_FAILED || mprotect(m->page, m->size, PROT_READ | PROT_WRITE) != 0) {
		int e = errno;
		if (m->map != MAP_FAILED)
			munmap(m->map, 3 * m->size);
		free(m);
		errno = e;
		return -1;
	}
	*(volatile char *)m->page = 1;
	w->data = m;
	return 0;
}

static void mprotect_teardown(struct worker *w)
{
	struct mprotect_worker *m = w->data;
	munmap(m->map, 3 * m->size);
	free(m);
}

static inline int mprotect_op(struct worker *w)
{
	const struct mprotect_worker *m = w->data;
	if (mprotect(m->page, m->size, PROT_READ) != 0)
		return -1;
	return mprotect(m->page, m->size, PROT_READ | PROT_WRITE);
}
PROBE_LOOP(mprotect_op)

OSLENS_PROBE(mprotect) = {
	.name = "mprotect",
	.summary = "mprotect() one touched private page read-only, then read-write again",
	.subsystem = "mm",
	.syscalls = "mprotect,mprotect",
	.variants = {{"default", "a private page per worker; in thread mode the read-only step flushes "
				 "the TLB of every CPU running a sibling worker"}},
	.setup = mprotect_setup,
	.teardown = mprotect_teardown,
	PROBE_OPS(mprotect_op),
};
