/* `run --completions` in an engine built without BPF (or the static
 * engine): every call says why, so oslens reports it instead of guessing. */
#include "blkio.h"

#include <stdio.h>

#ifndef OSLENS_NO_BPF_REASON
#define OSLENS_NO_BPF_REASON "engine built without BPF"
#endif

int blkio_bpf_start(uint64_t dev, char *why, size_t whylen)
{
	(void)dev;
	if (why && whylen)
		snprintf(why, whylen, "%s", OSLENS_NO_BPF_REASON);
	return -1;
}

void blkio_bpf_window(uint64_t start_ns, uint64_t end_ns)
{
	(void)start_ns, (void)end_ns;
}

void blkio_bpf_emit(int rep)
{
	(void)rep;
}

void blkio_bpf_stop(void)
{
}
