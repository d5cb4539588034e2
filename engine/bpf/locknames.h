/* Kernel locks named from where they live: one naming for every BPF side that
 * sees lock contention (profile.bpf.c, explain.bpf.c, through
 * locknames.bpf.h) and for their loaders (lock_name_of). perf lock
 * contention names them the same way: a field of the waiter's own task, or a
 * CPU's run queue, whose addresses no symbol gives. A static lock is named in
 * user space from kallsyms, where it lists data symbols; any other lock by
 * the code that waited for it. */
#ifndef OSLENS_LOCKNAMES_H
#define OSLENS_LOCKNAMES_H

enum lock_name {
	LN_UNNAMED = 0,
	LN_MMAP,    /* mm_struct.mmap_lock of the waiter's address space */
	LN_SIGHAND, /* sighand_struct.siglock */
	LN_FILES,   /* files_struct.file_lock */
	LN_RQ,	    /* a CPU's run queue lock (rq.__lock); the CPU in the upper 16 bits */
	LN_IPC_SEM, /* the IPC namespace's semaphore ids rw-semaphore */
	LN_IPC_MSG,
	LN_IPC_SHM,
	LN_COUNT
};

#define LN_MAX_CPUS 8192 /* run queue locks kept */

#ifndef __bpf__
#include <stdio.h>

/* A lock_named() value in words; "" when the BPF side could not name it. */
static inline void lock_name_of(unsigned named, char *buf, size_t len)
{
	static const char *const names[LN_COUNT] = {
		[LN_MMAP] = "mmap_lock",
		[LN_SIGHAND] = "siglock",
		[LN_FILES] = "files_struct.file_lock",
		[LN_IPC_SEM] = "ipc_ids(sem).rwsem",
		[LN_IPC_MSG] = "ipc_ids(msg).rwsem",
		[LN_IPC_SHM] = "ipc_ids(shm).rwsem",
	};
	unsigned which = named & 0xffff;
	if (which == LN_RQ)
		snprintf(buf, len, "rq_lock (cpu %u)", named >> 16);
	else if (which < LN_COUNT && names[which])
		snprintf(buf, len, "%s", names[which]);
	else
		buf[0] = 0;
}
#endif

#endif
