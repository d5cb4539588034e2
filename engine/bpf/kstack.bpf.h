/* kstack.h's stacks on the BPF side, for each program that samples (included
 * after common.bpf.h): kstack_take() stores the kernel stack a perf event
 * interrupted in the kstacks map, keyed by its hash — hashed here, not by a
 * stack map's bucket, whose collisions lose a stack when two share one. */
#ifndef OSLENS_KSTACK_BPF_H
#define OSLENS_KSTACK_BPF_H

#include "kstack.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct kstack);
} kstacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kstack);
} kstack_buf SEC(".maps");

/* s's hash, never 0 (no stack): FNV-1a over its words, then murmur3's
 * finaliser, so that addresses differing in their low bits spread. */
static __always_inline __u64 kstack_hash(const struct kstack *s)
{
	__u64 h = 0xcbf29ce484222325ull;
#pragma unroll
	for (int i = 0; i < KSTACK_DEPTH; i++) {
		h ^= s->ip[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h ? h : 1;
}

/* The kernel stack of what the sample interrupted, kept in kstacks: *stack
 * its hash, 0 for none (user space). -1: it found no room. */
static __always_inline int kstack_take(struct bpf_perf_event_data *ctx, __u64 *stack)
{
	__u32 zero = 0;
	struct kstack *buf = bpf_map_lookup_elem(&kstack_buf, &zero);
	if (!buf)
		return -1;
	/* the rest of buf is zeroed; user space has no kernel frame */
	long len = bpf_get_stack(ctx, buf, sizeof *buf, 0);
	if (len < 0)
		return -1;
	*stack = 0;
	if (!len)
		return 0;
	__u64 h = kstack_hash(buf);
	if (!bpf_map_lookup_elem(&kstacks, &h) && bpf_map_update_elem(&kstacks, &h, buf, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&kstacks, &h)) /* not put there by another CPU meanwhile */
		return -1;
	*stack = h;
	return 0;
}

/* Adds one to the count of `key` in `counts` (a hash of __u64 counts, each
 * keyed by a sample's cause and stack); -1 when the map has no room. */
static __always_inline int kstack_count(void *counts, const void *key)
{
	__u64 *n = bpf_map_lookup_elem(counts, key);
	if (!n) {
		__u64 one = 1;
		if (bpf_map_update_elem(counts, key, &one, BPF_NOEXIST) == 0)
			return 0;
		n = bpf_map_lookup_elem(counts, key); /* another CPU made it meanwhile */
		if (!n)
			return -1;
	}
	__sync_fetch_and_add(n, 1);
	return 0;
}

/* The current thread's orig_ax, as its kernel entry saved it: the number
 * of the system call it is in, a user page fault's error code, or -1 (an
 * interrupt). x86 only; elsewhere -1. */
static __always_inline __s64 kstack_orig_ax(void)
{
#if defined(__TARGET_ARCH_x86)
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return regs ? BPF_CORE_READ(regs, orig_ax) : -1;
#else
	return -1;
#endif
}

#endif
