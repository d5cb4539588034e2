/* oslens-engine-mpi: `run` and `bsp` as ranks of an MPI job (cluster.h). */
#include "cluster.h"
#include "../args.h"
#include "../json.h"
#include "../textfile.h"
#include "../topology.h"

#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static int joined, rank, size;
static char host[MPI_MAX_PROCESSOR_NAME];
static char *held; /* records written since the last gather */
static size_t held_len, held_cap;

static int put(const char *buf, size_t len)
{
	if (held_len + len > held_cap) {
		size_t cap = held_cap ? held_cap : 1 << 16;
		while (cap < held_len + len)
			cap *= 2;
		char *b = realloc(held, cap);
		if (!b)
			return -1;
		held = b;
		held_cap = cap;
	}
	memcpy(held + held_len, buf, len);
	held_len += len;
	return 0;
}

/* The json_sink of a rank: every record, its own or a worker's results
 * file (which may come in pieces), is held with the rank and host first. */
static int hold(const char *buf, size_t len)
{
	static int line_start = 1;
	static char stamp[MPI_MAX_PROCESSOR_NAME + 64];
	if (!stamp[0])
		snprintf(stamp, sizeof stamp, "{\"rank\":%d,\"host\":\"%s\",", rank, host);
	size_t from = 0;
	for (size_t i = 0; i < len; i++) {
		if (line_start && buf[i] == '{') {
			if (put(buf + from, i - from) || put(stamp, strlen(stamp)))
				return -1;
			from = i + 1;
		}
		line_start = buf[i] == '\n';
	}
	return put(buf + from, len - from);
}

/* The CPUs this thread may run on, ascending; their count. */
static int own_cpus(int *out, int max)
{
	cpu_set_t *set = CPU_ALLOC(max);
	size_t bytes = CPU_ALLOC_SIZE(max);
	int n = 0;
	if (set && sched_getaffinity(0, bytes, set) == 0)
		for (int c = 0; c < max; c++)
			if (CPU_ISSET_S(c, bytes, set))
				out[n++] = c;
	CPU_FREE(set);
	return n;
}

/* This rank's CPUs: its own where the launcher bound the ranks of its
 * node apart, or its slice of the CPUs they all share when it did not
 * bind them. Every rank of a node reaches the same verdict, so where the
 * CPUs cannot be shared they all say why and exit 2. */
static int share_cpus(MPI_Comm local, int lrank, int lsize, int *mine, int max, const char **how)
{
	unsigned char *masks = calloc((size_t)lsize, (size_t)max), *own = calloc(1, (size_t)max);
	int *cpus = calloc((size_t)max, sizeof *cpus);
	if (!masks || !own || !cpus)
		die_usage("out of memory");
	int n = own_cpus(cpus, max);
	for (int i = 0; i < n; i++)
		own[cpus[i]] = 1;
	MPI_Allgather(own, max, MPI_UNSIGNED_CHAR, masks, max, MPI_UNSIGNED_CHAR, local);
	int same = 1;
	for (int r = 0; r < lsize; r++)
		same &= !memcmp(masks + (size_t)r * max, own, (size_t)max);
	int k = 0;
	if (same && lsize > 1) {
		if (n < lsize)
			die_usage(
				"%d ranks on %s share %d CPU%s: at most one rank per CPU (fewer ranks, or more hosts)",
				lsize, host, n, n == 1 ? "" : "s");
		for (int i = (int)((long)lrank * n / lsize); i < (int)((long)(lrank + 1) * n / lsize); i++)
			mine[k++] = cpus[i];
		*how = "slice";
	} else {
		for (int r = 0; r < lsize; r++)
			for (int c = 0; r != lrank && c < max; c++)
				if (own[c] && masks[(size_t)r * max + c])
					die_usage(
						"ranks %d and %d of %s are both bound to CPU %d: bind them apart, or not "
						"at all (each then takes a slice)",
						lrank, r, host, c);
		memcpy(mine, cpus, (size_t)n * sizeof *mine);
		k = n;
		*how = lsize > 1 ? "launcher" : "all";
	}
	free(masks);
	free(own);
	free(cpus);
	return k;
}

static void fact(struct json *j, const char *key, const char *path)
{
	char *text = read_text_file(path, 0);
	if (text) {
		text[strcspn(text, "\n")] = 0;
		json_str(j, key, text);
	} else {
		json_null(j, key);
	}
	free(text);
}

/* What makes one node measure differently from another, read once per
 * node: kernel, boot command line, THP, clock source, the governor of each
 * CPU and where each IRQ may run. */
static void emit_node(void)
{
	struct utsname u;
	struct json *j = json_record("node");
	if (uname(&u) == 0) {
		json_str(j, "kernel", u.release);
		json_str(j, "kernel_version", u.version);
		json_str(j, "machine", u.machine);
	}
	fact(j, "cmdline", "/proc/cmdline");
	fact(j, "thp", "/sys/kernel/mm/transparent_hugepage/enabled");
	fact(j, "thp_defrag", "/sys/kernel/mm/transparent_hugepage/defrag");
	fact(j, "clocksource", "/sys/devices/system/clocksource/clocksource0/current_clocksource");
	fact(j, "cpus_online", "/sys/devices/system/cpu/online");
	fact(j, "isolated", "/sys/devices/system/cpu/isolated");
	fact(j, "nohz_full", "/sys/devices/system/cpu/nohz_full");
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	json_obj(j, "governor");
	for (long c = 0; c < nconf; c++) {
		char path[128], key[24];
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cpufreq/scaling_governor", c);
		snprintf(key, sizeof key, "%ld", c);
		char *g = read_text_file(path, 0);
		if (g) {
			g[strcspn(g, "\n")] = 0;
			json_str(j, key, g);
			free(g);
		}
	}
	json_end(j);
	json_obj(j, "irq_affinity");
	for (int irq = 0; irq < 4096; irq++) {
		char path[128], key[24];
		snprintf(path, sizeof path, "/proc/irq/%d/effective_affinity_list", irq);
		char *a = read_text_file(path, 0);
		if (a) {
			a[strcspn(a, "\n")] = 0;
			snprintf(key, sizeof key, "%d", irq);
			json_str(j, key, a);
			free(a);
		}
	}
	json_end(j);
	json_emit(j);
}

/* SIGUSR1 is how oslens stops a job in order: launchers forward it to
 * every rank (Open MPI's mpirun does, srun does), while a SIGINT or SIGTERM
 * to mpirun aborts the job, killing the ranks before they report. A rank
 * takes it as the SIGINT the single-node engine is stopped with.
 *
 * A stop signal sent to one rank alone stops that rank only: the others
 * would measure on to the end of their repetition before they heard of
 * it. Such a rank, once stopped in order, ends the job at once instead
 * (cluster_agree): the run cannot be whole anyway. */
static volatile sig_atomic_t forwarded, stopped_alone;
static struct sigaction caller[NSIG]; /* the command's own stop handlers */

static void stop_forwarded(int sig)
{
	(void)sig;
	forwarded = 1;
	kill(getpid(), SIGINT);
}

static void stop_here(int sig, siginfo_t *info, void *ctx)
{
	(void)ctx;
	/* from the launcher (mpirun's SIGTERM as it aborts the job) it is no stop of ours */
	if (!forwarded && !stopped_alone && info->si_pid != getppid())
		stopped_alone = sig;
	caller[sig].sa_handler(sig);
}

/* Wraps the command's handler of each stop signal, if it has one. */
static void watch_stops(void)
{
	static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
		struct sigaction sa;
		if (sigaction(stops[i], NULL, &sa) != 0 || sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN ||
		    (sa.sa_flags & SA_SIGINFO))
			continue;
		caller[stops[i]] = sa;
		sa.sa_sigaction = stop_here;
		sa.sa_flags |= SA_SIGINFO;
		sigaction(stops[i], &sa, NULL);
	}
}

/* What the run's collectives were timed under (see cluster_begin). */
static const char *thread_level(int provided)
{
	if (provided == MPI_THREAD_SINGLE)
		return "single";
	if (provided == MPI_THREAD_FUNNELED)
		return "funneled";
	if (provided == MPI_THREAD_SERIALIZED)
		return "serialized";
	return provided == MPI_THREAD_MULTIPLE ? "multiple" : "unknown";
}

int cluster_begin(int *argc, char ***argv)
{
	for (int i = 2; i < *argc; i++)
		if (!strcmp((*argv)[i], "--dry-run"))
			return 0; /* a dry run checks arguments: it joins no job */
	struct sigaction sa = {.sa_handler = stop_forwarded};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	watch_stops();
	/* `run` has worker threads (none calls MPI): FUNNELED. `bsp` is one
	 * thread, and SINGLE is what its collectives are timed under: with
	 * FUNNELED, Open MPI 4.1's barrier and allreduce after 20 µs of work
	 * took 1.06-1.6 times as long (16 of 16 interleaved pairs of a minimal
	 * loop), which the harness showed as cost of its own (bench/cluster.py). */
	int level = strcmp((*argv)[1], "bsp") ? MPI_THREAD_FUNNELED : MPI_THREAD_SINGLE, provided;
	if (MPI_Init_thread(argc, argv, level, &provided) != MPI_SUCCESS)
		die_usage("MPI_Init failed: this engine must be started by an MPI launcher (mpirun, srun)");
	joined = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int len = 0;
	MPI_Get_processor_name(host, &len);
	MPI_Comm local;
	int lrank, lsize;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &lrank);
	MPI_Comm_size(local, &lsize);
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	int max = nconf > 0 ? (int)nconf : 1;
	int *mine = calloc((size_t)max, sizeof *mine);
	const char *how = "all";
	if (!mine)
		die_usage("out of memory");
	int n = share_cpus(local, lrank, lsize, mine, max, &how);
	if (n == 0 || cpus_pin(mine, n) != 0)
		die_usage("rank %d on %s: no CPU to run on", rank, host);
	MPI_Comm_free(&local);

	json_sink = hold;
	char version[MPI_MAX_LIBRARY_VERSION_STRING];
	MPI_Get_library_version(version, &len);
	version[strcspn(version, "\n,")] = 0;
	struct json *j = json_record("rank");
	json_int(j, "size", size);
	json_int(j, "local_rank", lrank);
	json_int(j, "local_size", lsize);
	json_str(j, "cpus_from", how);
	json_arr(j, "cpus");
	for (int i = 0; i < n; i++)
		json_int(j, NULL, mine[i]);
	json_end(j);
	json_int(j, "pid", (int)getpid());
	json_str(j, "mpi", version);
	json_str(j, "mpi_thread", thread_level(provided));
	json_emit(j);
	if (lrank == 0)
		emit_node();
	free(mine);
	return 1;
}

int cluster_agree(int failed)
{
	if (!joined)
		return failed;
	if (failed && stopped_alone) {
		fprintf(stderr, "oslens-engine: rank %d on %s was stopped by SIG%s alone: the job is ended\n", rank,
			host, sigabbrev_np(stopped_alone));
		MPI_Abort(MPI_COMM_WORLD, 128 + stopped_alone);
	}
	int any = 0;
	MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	return any;
}

void cluster_gather(void)
{
	if (!joined)
		return;
	int n = (int)held_len, *counts = NULL, *displs = NULL;
	char *all = NULL;
	long total = 0;
	if (rank == 0) {
		counts = calloc((size_t)size, sizeof *counts);
		displs = calloc((size_t)size, sizeof *displs);
		if (!counts || !displs)
			MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		for (int r = 0; r < size; r++) {
			displs[r] = (int)total;
			total += counts[r];
		}
		all = malloc(total > 0 ? (size_t)total : 1);
		if (!all || total > 0x7fffffffL)
			MPI_Abort(MPI_COMM_WORLD, 1);
	}
	MPI_Gatherv(held, n, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (rank == 0 && total > 0 && write_all(STDOUT_FILENO, all, (size_t)total) != 0)
		json_output_lost = 1;
	held_len = 0;
	free(all);
	free(counts);
	free(displs);
}

int cluster_end(int code)
{
	if (!joined)
		return code;
	cluster_gather();
	int worst = code;
	MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Finalize();
	joined = 0;
	return worst;
}
