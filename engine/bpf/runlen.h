/* OS entry run lengths (the co-design study's chapter 4), shared by explain
 * and profile: how long kernel entries of one kind ran on the CPU. Counts,
 * the time, the entries longer than 1 µs / 10 µs / 100 µs (exact, not read
 * off the histogram) and a histogram by floor(log2(ns)). */
#ifndef OSLENS_RUNLEN_H
#define OSLENS_RUNLEN_H

#ifndef __bpf__
#include <linux/types.h> /* the BPF side has these from vmlinux.h */
#endif

#define RUNLEN_BUCKETS 48 /* by floor(log2(ns)) */
#define RUNLEN_OVER 3	  /* longer than 1 µs, 10 µs, 100 µs */
#define RUNLEN_OVER_NS              \
	{                           \
		1000, 10000, 100000 \
	}

struct runlen {
	__u64 count, sum_ns;
	__u64 over_count[RUNLEN_OVER], over_ns[RUNLEN_OVER];
	__u64 hist[RUNLEN_BUCKETS];
};

#ifdef __bpf__
/* An entry that ran `ns` on the CPU has ended. Atomic: the map may be shared by every CPU. */
static __always_inline void runlen_add(struct runlen *r, __u64 ns)
{
	static const __u64 over_ns[RUNLEN_OVER] = RUNLEN_OVER_NS;
	__sync_fetch_and_add(&r->count, 1);
	__sync_fetch_and_add(&r->sum_ns, ns);
	for (int i = 0; i < RUNLEN_OVER; i++)
		if (ns > over_ns[i]) {
			__sync_fetch_and_add(&r->over_count[i], 1);
			__sync_fetch_and_add(&r->over_ns[i], ns);
		}
	__u32 b = log2_u64(ns);
	if (b < RUNLEN_BUCKETS)
		__sync_fetch_and_add(&r->hist[b], 1);
}
#endif

#endif
