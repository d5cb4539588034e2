/* locknames.h's naming on the BPF side, for each program that sees lock
 * contention (included after common.bpf.h): lock_named() names a lock the
 * current task waits for, from the fields of the task and the run queue
 * locks that learn_rq_lock() saw on sched_switch. */
#ifndef OSLENS_LOCKNAMES_BPF_H
#define OSLENS_LOCKNAMES_BPF_H

#include "locknames.h"

/* lock address -> CPU, for the run queue locks seen (learn_rq_lock). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LN_MAX_CPUS);
	__type(key, __u64);
	__type(value, __u32);
} rq_locks SEC(".maps");

/* struct rq without CONFIG_FAIR_GROUP_SCHED's cfs_rq.rq */
struct cfs_rq___group {
	struct rq *rq;
} __attribute__((preserve_access_index));

/* This CPU's run queue lock, learned from a task switching on it: its
 * cfs_rq belongs to this CPU's rq (through cfs_rq.rq, or as rq.cfs itself
 * when the kernel has no group scheduling). No symbol is needed, so it
 * works where kallsyms has no data symbols and `runqueues` cannot be
 * looked up. `known` is the caller's per-CPU flag: learned once per CPU. */
static __always_inline void learn_rq_lock(struct task_struct *p, __u16 *known)
{
	if (*known || !BPF_CORE_READ(p, pid))
		return;
	struct cfs_rq *cfs = BPF_CORE_READ(p, se.cfs_rq);
	if (!cfs)
		return;
	__u64 rq;
	if (bpf_core_field_exists(((struct cfs_rq___group *)cfs)->rq))
		rq = (__u64)BPF_CORE_READ((struct cfs_rq___group *)cfs, rq);
	else
		rq = (__u64)cfs - bpf_core_field_offset(struct rq, cfs);
	if (!rq)
		return;
	__u64 lock = rq + bpf_core_field_offset(struct rq, __lock);
	__u32 cpu = bpf_get_smp_processor_id();
	bpf_map_update_elem(&rq_locks, &lock, &cpu, BPF_ANY);
	*known = 1;
}

/* enum lock_name of the lock the current task waits for (LN_RQ with the CPU
 * in the upper 16 bits), or LN_UNNAMED. */
static __always_inline __u32 lock_named(__u64 lock)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	if (mm && bpf_core_field_exists(mm->mmap_lock) &&
	    lock == (__u64)__builtin_preserve_access_index(&mm->mmap_lock))
		return LN_MMAP;
	struct sighand_struct *sh = BPF_CORE_READ(task, sighand);
	if (sh && lock == (__u64)__builtin_preserve_access_index(&sh->siglock))
		return LN_SIGHAND;
	struct files_struct *files = BPF_CORE_READ(task, files);
	if (files && lock == (__u64)__builtin_preserve_access_index(&files->file_lock))
		return LN_FILES;
	struct ipc_namespace *ns = BPF_CORE_READ(task, nsproxy, ipc_ns);
	if (ns) {
		if (lock == (__u64)__builtin_preserve_access_index(&ns->ids[0].rwsem))
			return LN_IPC_SEM;
		if (lock == (__u64)__builtin_preserve_access_index(&ns->ids[1].rwsem))
			return LN_IPC_MSG;
		if (lock == (__u64)__builtin_preserve_access_index(&ns->ids[2].rwsem))
			return LN_IPC_SHM;
	}
	__u32 *cpu = bpf_map_lookup_elem(&rq_locks, &lock);
	if (cpu)
		return LN_RQ | (*cpu << 16);
	return LN_UNNAMED;
}

#endif
