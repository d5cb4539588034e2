/* The kernel side of blkio.h: counts where the target's I/Os are
 * submitted and completed, per CPU. */
#include "common.bpf.h"
#include "blkio.h"

/* The kernel's dev_t of the target and of its whole disk (equal for a
 * whole device), set before load. */
const volatile __u32 dev_part = 0, dev_disk = 0;
/* The window (CLOCK_MONOTONIC ns) whose submissions are followed; closed
 * (start never reached) until the loader sets it, as explain.bpf.c's. */
__u64 window_start = ~0ull, window_end = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BLKIO_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct blkio_cpu);
} cpus SEC(".maps");

#define MERGED_MAX 64 /* I/Os of one merged request followed to completion */

/* The I/Os in flight, by their struct bio, and the CPU that submitted each:
 * a bio is one I/O from queue to completion, and no two in flight share one
 * (two sharing a sector do). */
struct {
	/* not an LRU: its per-CPU free lists may evict an entry long before
	 * the map is full, and an I/O's completion would go uncounted */
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BLKIO_INFLIGHT);
	__type(key, __u64);   /* struct bio * */
	__type(value, __u32); /* the submitting CPU */
} inflight SEC(".maps");

#define CLAIMED 0xffffffffu /* an entry's CPU once its completion is counted */

static __always_inline int ours(__u32 dev)
{
	return dev && (dev == dev_part || dev == dev_disk);
}

/* The bdev's dev_t, as the block tracepoints report it (bio_dev()). */
static __always_inline __u32 bio_devt(struct bio *bio)
{
	return BPF_CORE_READ(bio, bi_bdev, bd_dev);
}

/* raw_tp, not tracepoint: a classic tracepoint's program is skipped when
 * any BPF program runs on the CPU at that moment; raw_tp only on its own
 * recursion (counted in the record's `missed`) */
SEC("raw_tp/block_bio_queue")
int BPF_PROG(oslens_blkio_queue, struct bio *bio)
{
	/* an I/O carries data: the empty bio of a flush (an fsync's) is not one */
	if (!ours(bio_devt(bio)) || !BPF_CORE_READ(bio, bi_iter.bi_size))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < window_start || (window_end && now >= window_end))
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 key = (__u64)bio;
	struct blkio_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	if (c)
		__sync_fetch_and_add(&c->submitted, 1);
	/* a bio is queued again only once it has completed: an entry still
	 * waiting is an I/O whose completion reached no program */
	__u32 *waiting = bpf_map_lookup_elem(&inflight, &key);
	if (waiting && *waiting != CLAIMED && c)
		__sync_fetch_and_add(&c->unseen, 1);
	bpf_map_update_elem(&inflight, &key, &cpu, BPF_ANY);
	return 0;
}

/* bio completed on this CPU: counted once, if it was followed. A bio's two
 * completion events (a request's, then its own) come one after the other
 * in one context, never at once: a plain write claims it. The map delete
 * is best effort: it is refused when this program interrupted another that
 * holds the bucket's lock, and the claimed entry then stays until the bio
 * is reused (a delete's success was taken as the claim, and a refused one
 * lost the I/O: 1 in 6000, now and then). */
static __always_inline void completed(struct bio *bio, __u32 cpu, struct blkio_cpu *c)
{
	__u64 key = (__u64)bio;
	__u32 *src = bpf_map_lookup_elem(&inflight, &key);
	if (!src || *src == CLAIMED)
		return; /* not followed, or counted already */
	__u32 from = *src;
	*src = CLAIMED;
	bpf_map_delete_elem(&inflight, &key);
	if (!c)
		return;
	__sync_fetch_and_add(&c->completed, 1);
	if (from == cpu)
		__sync_fetch_and_add(&c->local, 1);
}

SEC("raw_tp/block_rq_complete")
int BPF_PROG(oslens_blkio_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	/* the tracepoint's dev: the disk's first dev_t (disk_devt()) */
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	if (!disk)
		return 0;
	__u32 dev = BLKIO_MKDEV(BPF_CORE_READ(disk, major), BPF_CORE_READ(disk, first_minor));
	if (!ours(dev))
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	struct blkio_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	/* the request's bios, the I/Os merged into it, as far as nr_bytes
	 * completes them whole (a partial completion counts the rest later) */
	struct bio *bio = BPF_CORE_READ(rq, bio);
	for (int i = 0; i < MERGED_MAX && bio; i++) {
		unsigned int size = BPF_CORE_READ(bio, bi_iter.bi_size);
		if (size > nr_bytes)
			break;
		nr_bytes -= size;
		completed(bio, cpu, c);
		bio = BPF_CORE_READ(bio, bi_next);
	}
	return 0;
}

SEC("raw_tp/block_bio_complete")
int BPF_PROG(oslens_blkio_bio_complete, struct request_queue *q, struct bio *bio)
{
	if (!ours(bio_devt(bio)))
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	completed(bio, cpu, bpf_map_lookup_elem(&cpus, &cpu));
	return 0;
}
