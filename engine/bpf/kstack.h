/* A sampled kernel stack, as the programs that sample keep it and their
 * loaders read it (kstack.bpf.h on the BPF side): the stack of what a tick
 * of a software clock interrupted, stored once under its hash, so that a
 * sample count can be keyed by the hash. */
#ifndef OSLENS_KSTACK_H
#define OSLENS_KSTACK_H

#ifndef __bpf__
#include <linux/types.h> /* the BPF side has these from vmlinux.h */
#endif

#define KSTACK_DEPTH 64 /* frames kept, innermost first */

struct kstack {
	__u64 ip[KSTACK_DEPTH]; /* innermost first, 0 after the last */
};

#endif
