/* kstack.h's stacks on the BPF side, for each program that keeps kernel
 * stacks (included after common.bpf.h): kstack_take() stores the current
 * kernel stack — the one a perf event interrupted, or a tracepoint's caller —
 * in the kstacks map, keyed by its hash: hashed here, not by a stack map's
 * bucket, whose collisions lose a stack when two share one (a lock wait's
 * stack lost that way left its lock named by its address alone). */
#ifndef OSLENS_KSTACK_BPF_H
#define OSLENS_KSTACK_BPF_H

#include "kstack.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct kstack);
} kstacks SEC(".maps");

/* Room to take a stack before it is hashed, one per context that can
 * interrupt another on a CPU — a task, a softirq, a hard interrupt (the
 * sampling clock), an NMI — so that a clock's sample taken while a
 * tracepoint's program is between taking and hashing its stack does not
 * write over it. kstack_depth: the slots in use on this CPU. */
#define KSTACK_NEST 4

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KSTACK_NEST);
	__type(key, __u32);
	__type(value, struct kstack);
} kstack_buf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} kstack_depth SEC(".maps");

/* s's hash, never 0 (no stack): FNV-1a over its n frames (the rest are
 * zeros, where a longer stack has a frame: hashing them tells nothing),
 * then murmur3's finaliser, so that addresses differing in their low bits
 * spread. */
static __always_inline __u64 kstack_hash(const struct kstack *s, __u32 n)
{
	__u64 h = 0xcbf29ce484222325ull;
	for (int i = 0; i < KSTACK_DEPTH; i++) { /* a bounded loop: the verifier takes it as is */
		if (i >= n)
			break;
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

/* buf's stack kept in kstacks: *stack its hash, left 0 for none (user space). */
static __always_inline int kstack_keep(void *ctx, struct kstack *buf, __u64 *stack)
{
	/* the rest of buf is zeroed; user space has no kernel frame */
	long len = bpf_get_stack(ctx, buf, sizeof *buf, 0);
	if (len < 0)
		return -1;
	if (!len)
		return 0;
	__u64 h = kstack_hash(buf, len / sizeof buf->ip[0]);
	if (!bpf_map_lookup_elem(&kstacks, &h) && bpf_map_update_elem(&kstacks, &h, buf, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&kstacks, &h)) /* not put there by another CPU meanwhile */
		return -1;
	*stack = h;
	return 0;
}

/* The current kernel stack (of what a perf event interrupted, or of a
 * tracepoint's caller), kept in kstacks: *stack its hash, 0 for none (user
 * space). -1: no room, or no stack to be had (*stack 0). An interrupting program
 * takes the next slot and gives it back before the interrupted one
 * resumes, so a plain per-CPU count is enough. */
static __always_inline int kstack_take(void *ctx, __u64 *stack)
{
	__u32 zero = 0;
	*stack = 0;
	__u32 *depth = bpf_map_lookup_elem(&kstack_depth, &zero);
	if (!depth)
		return -1;
	__u32 d = *depth;
	struct kstack *buf = d < KSTACK_NEST ? bpf_map_lookup_elem(&kstack_buf, &d) : NULL;
	if (!buf)
		return -1;
	*(volatile __u32 *)depth = d + 1;
	int err = kstack_keep(ctx, buf, stack);
	*(volatile __u32 *)depth = d;
	return err;
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
