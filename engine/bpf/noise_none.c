/* Attribution for an engine built without BPF (no clang, bpftool, kernel
 * BTF or libbpf on the build host, or the static engine): every call says
 * why, so oslens can report it instead of failing silently. */
#include "noise.h"

#include <stdio.h>

#ifndef OSLENS_NO_BPF_REASON
#define OSLENS_NO_BPF_REASON "engine built without BPF"
#endif

int noise_bpf_start(const int *cpus, int ncpus, const int *tids, int ntids, char *why, size_t whylen)
{
	(void)cpus, (void)ncpus, (void)tids, (void)ntids;
	if (why && whylen)
		snprintf(why, whylen, "%s", OSLENS_NO_BPF_REASON);
	return -1;
}

int noise_bpf_poll(void (*cb)(const struct trace_event *e, void *arg), void *arg, int timeout_ms)
{
	(void)cb, (void)arg, (void)timeout_ms;
	return -1;
}

uint64_t noise_bpf_lost(void)
{
	return 0;
}

const char *noise_bpf_missing(void)
{
	return "";
}

void noise_bpf_stop(void)
{
}
