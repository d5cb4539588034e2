/* The plain engines are not MPI programs: a run is its own job. */
#include "cluster.h"
#include "../args.h"

int cluster_begin(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int cluster_agree(int failed)
{
	return failed;
}

void cluster_gather(void)
{
}

int cluster_end(int code)
{
	return code;
}

int cmd_bsp(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	die_usage("bsp: this engine has no MPI; use oslens-engine-mpi (built where an MPI compiler wrapper is)");
}
