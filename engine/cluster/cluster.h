/* One rank of an MPI job: what `run` and `bsp` do differently in
 * oslens-engine-mpi (cluster_mpi.c, built with an MPI compiler wrapper). The
 * plain engines link cluster_none.c, where every call is a no-op and the
 * engine stays libc-only.
 *
 * A rank measures only its share of its node's CPUs: the CPUs the launcher
 * bound it to, or, when the ranks of a node were left unbound, an equal
 * slice of the CPUs they share (in local-rank order). Its records are kept
 * in memory, stamped with its rank and host, and gathered to rank 0 after
 * every repetition, which writes them all: one stream of JSON lines, as
 * from one engine. */
#ifndef OSLENS_CLUSTER_H
#define OSLENS_CLUSTER_H

/* Joins the MPI job (if this engine has MPI), confines this thread to the
 * rank's CPUs, diverts the records to the gather and emits the rank's
 * `rank` record (and, from the first rank of each node, its `node`
 * record). Returns 0 without MPI, 1 as a rank; dies (exit 2) when the
 * ranks of a node cannot share its CPUs. */
int cluster_begin(int *argc, char ***argv);
/* Every rank says whether it failed so far; returns 1 if any rank did.
 * Collective, so also the common start: no rank returns before every rank
 * has called it. All ranks call it at the same points of a run. A rank
 * that failed because a stop signal was sent to it alone ends the job
 * instead (MPI_Abort), saying so on stderr. */
int cluster_agree(int failed);
/* Gathers every rank's records written since the last call to rank 0,
 * which writes them in rank order; collective. */
void cluster_gather(void);
/* The last gather, then leaves the job. Returns code, or the larger code
 * any rank ends with (on rank 0, so the launcher's status is the run's). */
int cluster_end(int code);

/* `oslens-engine-mpi bsp`: a bulk-synchronous loop (bsp.c). */
int cmd_bsp(int argc, char **argv);

#endif
