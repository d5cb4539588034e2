/* oslens-worker: the image a run's master execs for its fresh workers
 * (worker_exec_fresh). It holds what a worker runs — the probes, the
 * barrier, the clock, the plan — and none of the engine's attribution,
 * workloads, profiler or output, so the address space that fork and the
 * other probes whose cost grows with it carry is that of a small program
 * (OSMark's forkbench was one), not the engine's. */
#include "engine.h"

int main(int argc, char **argv)
{
	return cmd_worker(argc, argv);
}
