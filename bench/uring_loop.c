/* The reference for the io-uring probe: random 4 KiB direct reads kept QD
 * deep on one io_uring, pinned to one CPU, counted for SECONDS, as a plain
 * program with nothing around the loop. Two ways to keep the queue full:
 *
 *   wait   every pass fills the free slots, then submits them and waits for
 *          one completion in the same io_uring_enter (the engine's loop);
 *   reap   each free slot is submitted on its own enter, which also runs
 *          the completions the kernel deferred, then the ring is reaped,
 *          and only a full queue with nothing reaped waits (fio's
 *          io_uring engine: commit, then getevents).
 *
 * FLAGS are io_uring_setup's (0x3100: COOP_TASKRUN | SINGLE_ISSUER |
 * DEFER_TASKRUN, as fio 3.33 sets them where the kernel has them).
 * bench/io.py runs it beside the engine and fio. Prints IOPS, enters per
 * I/O and CPU µs per I/O.
 *
 * INDEX seeds the offsets, one sequence per index as the engine seeds one
 * per worker: loops started with the same seed read the same blocks in
 * step, each finding in the cache what the other just read: two such
 * loops on zram made 1.04-1.15 times the IOPS of two seeded apart (medians
 * of alternated rounds), and were the reference an engine of two workers
 * was found at 0.78 of.
 *
 * Usage: uring_loop DEVICE wait|reap QD SECONDS CPU [FLAGS [INDEX]] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/io_uring.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef BLKGETSIZE64
#define BLKGETSIZE64 _IOR(0x12, 114, size_t)
#endif

#define BS 4096

static unsigned *sq_tail, *sq_head, *sq_array, sq_mask, *cq_head, *cq_tail, cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;
static long enters;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int enter(int ring, unsigned submit, unsigned wait)
{
	enters++;
	return (int)syscall(__NR_io_uring_enter, ring, submit, wait, IORING_ENTER_GETEVENTS, NULL, 0);
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: uring_loop DEVICE wait|reap QD SECONDS CPU [FLAGS [INDEX]]\n");
		return 2;
	}
	int reap_mode = !strcmp(argv[2], "reap");
	unsigned qd = (unsigned)atoi(argv[3]);
	double secs = atof(argv[4]);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[5]), &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		return perror("sched_setaffinity"), 1;
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	uint64_t bytes = 0;
	if (fd < 0 || ioctl(fd, BLKGETSIZE64, &bytes) != 0)
		return perror(argv[1]), 1;
	uint64_t blocks = bytes / BS;

	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	p.flags = argc > 6 ? (unsigned)strtoul(argv[6], NULL, 0) : 0;
	int ring = (int)syscall(__NR_io_uring_setup, qd, &p);
	if (ring < 0)
		return perror("io_uring_setup"), 1;
	size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	size_t len = sq_len > cq_len ? sq_len : cq_len; /* IORING_FEAT_SINGLE_MMAP: 5.4 and later */
	char *sq = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
	sqes = mmap(NULL, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
		    IORING_OFF_SQES);
	if (sq == MAP_FAILED || sqes == MAP_FAILED)
		return perror("mmap"), 1;
	sq_head = (unsigned *)(sq + p.sq_off.head);
	sq_tail = (unsigned *)(sq + p.sq_off.tail);
	sq_mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	sq_array = (unsigned *)(sq + p.sq_off.array);
	cq_head = (unsigned *)(sq + p.cq_off.head);
	cq_tail = (unsigned *)(sq + p.cq_off.tail);
	cq_mask = *(unsigned *)(sq + p.cq_off.ring_mask);
	cqes = (struct io_uring_cqe *)(sq + p.cq_off.cqes);
	for (unsigned i = 0; i < p.sq_entries; i++)
		sq_array[i] = i;

	char *bufs;
	if (posix_memalign((void **)&bufs, BS, (size_t)qd * BS))
		return 1;
	memset(bufs, 1, (size_t)qd * BS);
	unsigned *free_slot = malloc(qd * sizeof *free_slot), nfree = 0;
	for (unsigned i = 0; i < qd; i++)
		free_slot[nfree++] = i;
	uint64_t index = argc > 7 ? strtoull(argv[7], NULL, 0) : 0;
	uint64_t x = 0x9E3779B97F4A7C15ull * (index + 1) | 1, done = 0;

	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0); /* the submitting thread: not io-wq's, as the engine and fio count */
	double t0 = now_s(), end = t0 + secs;
	while (now_s() < end) {
		unsigned n = 0;
		while (nfree) {
			unsigned slot = free_slot[--nfree], tail = *sq_tail;
			struct io_uring_sqe *e = &sqes[tail & sq_mask];
			memset(e, 0, sizeof *e);
			e->opcode = IORING_OP_READ;
			e->fd = fd;
			e->addr = (unsigned long)(bufs + (size_t)slot * BS);
			e->len = BS;
			e->off = (unsigned long long)((unsigned __int128)rnd(&x) * blocks >> 64) * BS;
			e->user_data = slot;
			__atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
			n++;
			if (reap_mode) { /* one enter per I/O, never waiting */
				enter(ring, 1, 0);
				n = 0;
			}
		}
		if (!reap_mode)
			enter(ring, n, 1);
		unsigned head = *cq_head, ctail = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);
		if (reap_mode && head == ctail && nfree == 0) { /* full and nothing done: wait */
			enter(ring, 0, 1);
			ctail = __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE);
		}
		for (; head != ctail; head++) {
			if (cqes[head & cq_mask].res != BS)
				return fprintf(stderr, "I/O failed: %d\n", cqes[head & cq_mask].res), 1;
			free_slot[nfree++] = (unsigned)cqes[head & cq_mask].user_data;
			done++;
		}
		__atomic_store_n(cq_head, head, __ATOMIC_RELEASE);
	}
	double t = now_s() - t0;
	getrusage(RUSAGE_THREAD, &r1);
	double cpu =
		(double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		(double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	printf("{\"iops\": %.0f, \"enters_per_io\": %.3f, \"cpu_us_per_io\": %.3f, \"switches\": %ld}\n", done / t,
	       (double)enters / done, cpu / done * 1e6, (r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw));
	return 0;
}
