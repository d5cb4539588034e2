/* The kernel side of blkio.h: counts where the target's I/Os are
 * submitted and completed, per CPU. */
#include "common.bpf.h"
#include "blkio.h"

/* The kernel's dev_t of the target and of its whole disk (equal for a
 * whole device), set before load. */
const volatile __u32 dev_part = 0, dev_disk = 0;
/* The window (CLOCK_MONOTONIC ns) whose submissions are followed. */
__u64 window_start = 0, window_end = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BLKIO_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct blkio_cpu);
} cpus SEC(".maps");

/* I/Os in flight at a sector: how many, and the CPU that submitted the
 * last (two workers may meet at one sector: the count stays exact, the
 * CPU of such a pair is the later one's). */
struct pending {
	__u32 cpu;
	__u32 n;
	__u32 nr_sector; /* the I/O's length: where a merged neighbour starts */
};

#define MERGED_MAX 32 /* I/Os of one merged request followed to completion */

struct {
	/* not an LRU: its per-CPU free lists may evict an entry long before
	 * the map is full, and an I/O's completion would go uncounted */
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BLKIO_INFLIGHT);
	__type(key, __u64); /* sector */
	__type(value, struct pending);
} inflight SEC(".maps");

static __always_inline int ours(__u32 dev)
{
	return dev && (dev == dev_part || dev == dev_disk);
}

SEC("tracepoint/block/block_bio_queue")
int oslens_blkio_queue(struct trace_event_raw_block_bio *ctx)
{
	if (!ours(ctx->dev))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now < window_start || (window_end && now >= window_end))
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 sector = ctx->sector;
	struct blkio_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	if (c)
		__sync_fetch_and_add(&c->submitted, 1);
	struct pending first = {.cpu = cpu, .n = 1, .nr_sector = ctx->nr_sector};
	if (bpf_map_update_elem(&inflight, &sector, &first, BPF_NOEXIST) != 0) {
		struct pending *p = bpf_map_lookup_elem(&inflight, &sector);
		if (p) {
			p->cpu = cpu;
			__sync_fetch_and_add(&p->n, 1);
		}
	}
	return 0;
}

/* A completion covers [sector, sector + nr_sector): one I/O, or several
 * that the block layer merged into one request (each I/O's length leads to
 * the next one's sector). */
static __always_inline void completed(__u32 dev, __u64 sector, __u32 nr_sector)
{
	if (!ours(dev))
		return;
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 end = sector + nr_sector;
	struct blkio_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	for (int i = 0; i < MERGED_MAX && sector < end; i++) {
		struct pending *p = bpf_map_lookup_elem(&inflight, &sector);
		if (!p)
			return; /* not followed, or already counted (a request's bios) */
		__u32 src = p->cpu, len = p->nr_sector;
		/* not atomic (an atomic fetch needs BPF v3): two completions of one
		 * sector on two CPUs at the same instant could miscount, no more */
		if (p->n <= 1)
			bpf_map_delete_elem(&inflight, &sector);
		else
			p->n--;
		if (c) {
			__sync_fetch_and_add(&c->completed, 1);
			if (src == cpu)
				__sync_fetch_and_add(&c->local, 1);
		}
		if (!len)
			return;
		sector += len;
	}
}

SEC("tracepoint/block/block_rq_complete")
int oslens_blkio_rq_complete(struct trace_event_raw_block_rq_completion *ctx)
{
	completed(ctx->dev, ctx->sector, ctx->nr_sector);
	return 0;
}

SEC("tracepoint/block/block_bio_complete")
int oslens_blkio_bio_complete(struct trace_event_raw_block_bio_complete *ctx)
{
	completed(ctx->dev, ctx->sector, ctx->nr_sector);
	return 0;
}
