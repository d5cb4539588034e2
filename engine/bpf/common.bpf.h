/* What both BPF programs (noise.bpf.c, profile.bpf.c) need: the kernel's
 * types, libbpf's helpers, the licence the tracing helpers require, and the
 * CO-RE reads that differ between kernel versions. Included first, once. */
#ifndef OSLENS_COMMON_BPF_H
#define OSLENS_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define PF_KTHREAD 0x00200000 /* task_struct.flags: a kernel thread */
#define TASK_DEAD 0x80	      /* task_struct.__state of a task that has exited */

/* task_struct.state became __state in 5.14 */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

/* The scheduler state of t (TASK_RUNNING = 0, ...) on any kernel. */
static __always_inline unsigned int task_sched_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return (unsigned int)BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* floor(log2(v)) for v > 0 (0 for 0), without a loop the verifier must walk. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0, shift;
	shift = (v > 0xFFFFFFFFULL) << 5;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFFFF) << 4;
	v >>= shift;
	r |= shift;
	shift = (v > 0xFF) << 3;
	v >>= shift;
	r |= shift;
	shift = (v > 0xF) << 2;
	v >>= shift;
	r |= shift;
	shift = (v > 0x3) << 1;
	v >>= shift;
	r |= shift;
	r |= (v >> 1);
	return r;
}

#endif
