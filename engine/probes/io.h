/* What the block I/O probes share (io.c: pread, pwrite and cached pread;
 * io_uring.c): the target's geometry, its checks, and the random
 * block-aligned offsets every worker draws. */
#ifndef OSLENS_PROBES_IO_H
#define OSLENS_PROBES_IO_H

#include <stdint.h>
#include <sys/types.h>

#include "../probe.h"

#define IO_BS_MIN 512
#define IO_BS_MAX (1L << 20)

/* The options every I/O probe takes. */
#define IO_OPTS_COMMON                                                                                       \
	{"bs", 4096, IO_BS_MIN, IO_BS_MAX, "bytes per I/O, a multiple of the logical block size"},           \
	{                                                                                                    \
		"span_mb", 0, 0, 1L << 40, "I/Os land in the first span_mb MiB of the target (0: all of it)" \
	}
#define IO_OPTS .opts = {IO_OPTS_COMMON}

/* Where the I/Os of one worker land: uniformly random blocks of `bs`
 * bytes over the first `blocks` blocks of the target (as fio's randread
 * with norandommap: a block may come twice, none is skipped on purpose). */
struct io_offsets {
	uint64_t state; /* xorshift64* */
	uint64_t blocks;
	uint64_t bs;
};

static inline off_t io_next_offset(struct io_offsets *o)
{
	uint64_t x = o->state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	o->state = x;
	/* xorshift64*'s output scaled to [0, blocks) by a 64x64->128 multiply-high:
	 * no modulo in the loop, and no overflow past 2^32 blocks */
	uint64_t r = x * 0x2545F4914F6CDD1Dull;
	return (off_t)((uint64_t)(((unsigned __int128)r * o->blocks) >> 64) * o->bs);
}

/* A generator for worker `index`: its own sequence, the same in every run. */
void io_offsets_init(struct io_offsets *o, int index, uint64_t target_bytes, uint64_t bs);

/* The target's size in bytes (a block device's or a regular file's), or -1
 * with errno; *logical: the device's logical block size (512 for a file). */
int64_t io_target_size(int fd, unsigned *logical);

/* The bytes the I/Os span: the option span_mb, at most the target. */
uint64_t io_span(const struct probe_env *env, uint64_t target_bytes);

/* Opens the target for a worker: read-only or read-write, direct or
 * through the page cache. */
int io_open(const struct probe_env *env, int writing, int direct);

/* The checks every I/O probe makes of its target before a run: a block
 * device or a regular file, large enough for one block, bs a multiple of
 * its logical block size, direct I/O accepted (one read of a block: reads
 * are harmless), and for writes, writable and, for a block device, not
 * held by anyone (mounted, swap, a device mapper: the kernel's O_EXCL). */
int io_check(const struct probe_env *env, int writing, int direct, char *why, size_t len);

/* A buffer of n bytes aligned for direct I/O, filled with bytes that do not
 * repeat, so that a compressing device (zram) stores what it is written
 * as it would real data, not as a same-filled page. NULL with errno. */
void *io_buffer(size_t n, int index);

#endif
