/* The profiler without its kernel side (an engine built without BPF): the
 * procfs and perf parts still run, and the report says why the rest is
 * missing. */
#include "profile.h"

#include <stdio.h>

#ifndef OSLENS_NO_BPF_REASON
#define OSLENS_NO_BPF_REASON "engine built without BPF"
#endif

int profile_bpf_start(const char *skip, char *why, size_t whylen)
{
	(void)skip;
	snprintf(why, whylen, "%s", OSLENS_NO_BPF_REASON);
	return -1;
}

int profile_bpf_follow(pid_t tgid)
{
	(void)tgid;
	return -1;
}

int profile_bpf_time_faults(const pid_t *tids, int ntids)
{
	(void)tids, (void)ntids;
	return -1;
}

int profile_bpf_followed(pid_t *out, int max)
{
	(void)out, (void)max;
	return 0;
}

const char *profile_bpf_missing(void)
{
	return "";
}

void profile_bpf_emit(void)
{
}

void profile_bpf_stop(void)
{
}
