/* The profiler's kernel side (profile.bpf.c), for profile.c: load and
 * attach, follow a process tree, and emit what the maps aggregated. */
#ifndef OSLENS_PROFILE_BPF_H
#define OSLENS_PROFILE_BPF_H

#include <stddef.h>
#include <sys/types.h>

/* Loads and attaches everything this kernel can take but the parts named in
 * `skip` (comma-separated, e.g. "syscalls"); 0, or -1 with `why` (not root,
 * no BTF, engine built without BPF, verifier refusal, ...). */
int profile_bpf_start(const char *skip, char *why, size_t whylen);
/* Follows process `tgid` and, from now on, every child it forks. */
int profile_bpf_follow(pid_t tgid);
/* Times the page faults of these threads and of what they create; -1 (and
 * page_faults missing) if the kernel refuses. */
int profile_bpf_time_faults(const pid_t *tids, int ntids);
/* The processes followed now (at most max); their number. */
int profile_bpf_followed(pid_t *out, int max);
/* Parts this kernel lacks, comma-separated ("" when none). */
const char *profile_bpf_missing(void);
/* Emits the aggregates as JSON records: thread (exits), cpu_time, switches,
 * faults, irqs, syscalls, locks, bpf_stats. */
void profile_bpf_emit(void);
/* Detaches and unloads. Idempotent. */
void profile_bpf_stop(void);

#endif
