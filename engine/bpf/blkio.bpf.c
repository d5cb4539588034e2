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

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, BLKIO_INFLIGHT);
	__type(key, __u64);   /* sector */
	__type(value, __u32); /* submitting CPU */
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
	bpf_map_update_elem(&inflight, &sector, &cpu, BPF_ANY);
	return 0;
}

static __always_inline void completed(__u32 dev, __u64 sector)
{
	if (!ours(dev))
		return;
	__u32 *from = bpf_map_lookup_elem(&inflight, &sector);
	if (!from)
		return; /* not followed, or already counted (a request's bios) */
	__u32 cpu = bpf_get_smp_processor_id(), src = *from;
	bpf_map_delete_elem(&inflight, &sector);
	struct blkio_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
	if (!c)
		return;
	__sync_fetch_and_add(&c->completed, 1);
	if (src == cpu)
		__sync_fetch_and_add(&c->local, 1);
}

SEC("tracepoint/block/block_rq_complete")
int oslens_blkio_rq_complete(struct trace_event_raw_block_rq_completion *ctx)
{
	completed(ctx->dev, ctx->sector);
	return 0;
}

SEC("tracepoint/block/block_bio_complete")
int oslens_blkio_bio_complete(struct trace_event_raw_block_bio_complete *ctx)
{
	completed(ctx->dev, ctx->sector);
	return 0;
}
