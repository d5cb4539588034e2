/* Where a target's I/Os complete: blkio.bpf.c (kernel side), blkio.c (its
 * loader) and this header, which both include.
 *
 * Each I/O is seen entering the block layer (block_bio_queue, on the CPU
 * that submitted it) and completing (block_rq_complete for a blk-mq
 * device, block_bio_complete for a bio-based one such as zram, on the CPU
 * that ran the completion), matched by its struct bio; a merged request's
 * completion completes each bio it holds. Per CPU: the I/Os submitted there, those completed
 * there, and of these the ones submitted there too. Only I/Os submitted
 * inside the window are followed, so that completions never count an I/O
 * twice nor one the run did not issue. */
#ifndef OSLENS_BLKIO_H
#define OSLENS_BLKIO_H

#ifndef __bpf__
#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>
#endif

#define BLKIO_MAX_CPUS 8192
#define BLKIO_INFLIGHT 65536 /* I/Os followed at once */

/* The kernel's dev_t (MKDEV): major in the high 12 bits, minor in the low
 * 20; the loader's and the programs' encoding must agree. */
#define BLKIO_MKDEV(maj, min) (((__u32)(maj) << 20) | (__u32)(min))

struct blkio_cpu {
	__u64 submitted; /* I/Os that entered the block layer on this CPU */
	__u64 completed; /* of the followed I/Os, those completed on this CPU */
	__u64 local;	 /* of those, the ones submitted on this CPU too */
	/* I/Os followed whose completion no event reported: their struct bio
	 * was queued again (reused) while still waiting for one. Seen on a loop
	 * device, about one write in 100,000 under load; said, not lost. */
	__u64 unseen;
};

#ifndef __bpf__
/* Follows the I/Os of the block device dev (st_rdev) or, for a regular
 * file, of the device its filesystem is on; a partition's whole disk too.
 * 0, or -1 with why. */
int blkio_bpf_start(uint64_t dev, char *why, size_t whylen);
/* Follows only I/Os submitted in [start, end) (CLOCK_MONOTONIC ns); end 0: open. */
void blkio_bpf_window(uint64_t start_ns, uint64_t end_ns);
/* One `completions` record for repetition rep. */
void blkio_bpf_emit(int rep);
void blkio_bpf_stop(void);
#endif

#endif
