/* `run --explain` in an engine built without BPF (or the static engine):
 * every call says why, so oslens reports it instead of failing silently. */
#include "explain.h"

#include <stdio.h>

#ifndef OSLENS_NO_BPF_REASON
#define OSLENS_NO_BPF_REASON "engine built without BPF"
#endif

int explain_bpf_start(const int *tgids, int ntgids, const int *tids, const int *cpus, int ntids, int light,
		      uint64_t period_ns, char *why, size_t whylen)
{
	(void)tgids, (void)ntgids, (void)tids, (void)cpus, (void)ntids, (void)light, (void)period_ns;
	if (why && whylen)
		snprintf(why, whylen, "%s", OSLENS_NO_BPF_REASON);
	return -1;
}

void explain_bpf_window(uint64_t start_ns, uint64_t end_ns)
{
	(void)start_ns, (void)end_ns;
}

void explain_bpf_sampled(int first, int last)
{
	(void)first, (void)last;
}

void explain_bpf_emit(int rep)
{
	(void)rep;
}

void explain_bpf_stop(void)
{
}

int explain_bpf_helpers(const int *pids, const int *served, int n, const int *cpus, int ncpus, char *why, size_t whylen)
{
	(void)pids, (void)served, (void)n, (void)cpus, (void)ncpus, (void)why, (void)whylen;
	return 0;
}
