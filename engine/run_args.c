/* `oslens-engine run`: its argv parsed into a run_config and checked against
 * the probes, the topology and the system's task limits, before anything
 * runs (and, with --dry-run, instead of running). The attributions' options
 * come from the table of parts it is given (run_parts.h): it reads their
 * descriptors and calls their checks, and a worker, given none, parses the
 * master's argv less their options. */
#include "engine.h"
#include "json.h"
#include "run_parts.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef OSLENS_STATIC
/* The statically linked engine sits beside this one as <self>-static. A
 * real run execs it; a dry run only checks that it could. */
static void hand_to_static(char **argv, int dry_run)
{
	char self[PATH_MAX], path[PATH_MAX + 8];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		die_usage("cannot find my own executable: %s", strerror(errno));
	self[n] = 0;
	snprintf(path, sizeof path, "%s-static", self);
	if (dry_run ? access(path, X_OK) == 0 : execv(path, argv) == 0)
		return;
	die_usage("this probe needs the statically linked engine %s: %s", path, strerror(errno));
}
#endif

/* Refuses a run whose extra tasks would hit RLIMIT_NPROC or the kernel's
 * task limit, rather than discovering it as fork failures mid-measurement. */
static void check_task_budget(const struct run_config *cfg)
{
	long extra = 0;
	for (int k = 0; k < cfg->nchoices; k++)
		extra += cfg->choices[k].probe->processes_per_worker;
	long need = (long)cfg->nworkers * (1 + extra) + 2;
	long tasks = 0, threads_max = 0;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%*f %*f %*f %*d/%ld", &tasks) != 1)
			tasks = 0;
		fclose(f);
	}
	f = fopen("/proc/sys/kernel/threads-max", "r");
	if (f) {
		if (fscanf(f, "%ld", &threads_max) != 1)
			threads_max = 0;
		fclose(f);
	}
	if (threads_max && tasks + need > threads_max)
		die_usage("%d workers need %ld more tasks; the system has %ld of kernel.threads-max %ld", cfg->nworkers,
			  need, tasks, threads_max);
	struct rlimit rl;
	if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)need > rl.rlim_cur / 2)
		die_usage("%d workers need %ld tasks but RLIMIT_NPROC is %lu; lower --workers or raise ulimit -u",
			  cfg->nworkers, need, (unsigned long)rl.rlim_cur);
}

/* --target goes with the probes that work on one, and each checks it with
 * its options (size, alignment, direct I/O) before anything runs. */
static void check_target(const struct run_config *cfg)
{
	int takers = 0;
	for (int k = 0; k < cfg->nchoices; k++) {
		const struct choice *c = &cfg->choices[k];
		if (!c->probe->needs_target)
			continue;
		takers++;
		if (!cfg->target)
			die_usage("probe %s needs --target DEVICE|FILE", c->probe->name);
		struct probe_env env;
		probe_env_init(&env, cfg, c, NULL);
		char why[256];
		if (c->probe->check_target && c->probe->check_target(&env, why, sizeof why) != 0)
			die_usage("--target %s: %s", cfg->target, why);
	}
	if (cfg->target && !takers)
		die_usage("--target: no chosen probe works on a target");
}

/* The attributions asked for (asked: their indices in the order given):
 * --sample-period only with one that samples, each part's own checks, in
 * table order, then at most one that loads BPF programs, refused naming
 * those given. A worker (no table) was checked by its master. */
static void check_parts(const struct run_config *cfg, const int *asked, int nasked)
{
	char why[256];
	int sampling = 0;
	for (int i = 0; i < nasked; i++)
		sampling |= cfg->part_table[asked[i]]->sample_period_ns != 0;
	if (cfg->part_table && cfg->sample_period_ns >= 0 && !sampling) {
		char samplers[256] = "";
		size_t len = 0;
		for (int k = 0; cfg->part_table[k] && len < sizeof samplers; k++)
			if (cfg->part_table[k]->sample_period_ns)
				len += snprintf(samplers + len, sizeof samplers - len, "%s--%s", len ? ", " : "",
						cfg->part_table[k]->name);
		die_usage("--sample-period: the period of an attribution's samples, and none that samples (%s) was "
			  "asked for",
			  samplers);
	}
	for (int k = 0; cfg->part_table && cfg->part_table[k]; k++) {
		const struct run_part *p = cfg->part_table[k];
		if (cfg->parts >> k & 1 && p->check && p->check(cfg, why, sizeof why) != 0)
			die_usage("%s", why);
	}
	int nbpf = 0;
	for (int i = 0; i < nasked; i++)
		nbpf += cfg->part_table[asked[i]]->bpf != 0;
	if (nbpf < 2)
		return;
	char names[512] = "";
	size_t len = 0;
	for (int i = 0, n = 0; i < nasked && len < sizeof names; i++) {
		const struct run_part *p = cfg->part_table[asked[i]];
		if (!p->bpf)
			continue;
		const char *sep = ++n == 1 ? "" : n == nbpf ? " and " : ", ";
		len += snprintf(names + len, sizeof names - len, "%s--%s", sep, p->name);
	}
	die_usage("%s are exclusive: each loads its own BPF programs", names);
}

/* --opt KEY=VALUE sets the option in every chosen probe that has it. */
static void set_opt(struct run_config *cfg, const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq)
		die_usage("--opt: '%s' is not KEY=VALUE", kv);
	int takers = 0;
	for (int k = 0; k < cfg->nchoices; k++) {
		const struct probe *p = cfg->choices[k].probe;
		for (int i = 0; i < PROBE_MAX_OPTS && p->opts[i].name; i++)
			if (strlen(p->opts[i].name) == (size_t)(eq - kv) && !strncmp(p->opts[i].name, kv, eq - kv)) {
				char what[80];
				snprintf(what, sizeof what, "--opt %s", p->opts[i].name);
				cfg->choices[k].opt[i] = parse_long(what, eq + 1, p->opts[i].min, p->opts[i].max);
				takers++;
			}
	}
	if (!takers)
		die_usage("no chosen probe has an option '%.*s'", (int)(eq - kv), kv);
}

/* NAME[:VARIANT] -> a choice with default options. */
static void parse_choice(const char *spec, struct choice *c)
{
	char name[64];
	snprintf(name, sizeof name, "%s", spec);
	char *colon = strchr(name, ':');
	const char *variant = colon ? colon + 1 : NULL;
	if (colon)
		*colon = 0;
	c->probe = probe_find(name);
	if (!c->probe)
		die_usage("unknown probe '%s' (see 'oslens-engine list')", name);
	c->variant = 0;
	if (variant) {
		c->variant = -1;
		for (int i = 0; i < PROBE_MAX_VARIANTS && c->probe->variants[i].name; i++)
			if (!strcmp(c->probe->variants[i].name, variant))
				c->variant = i;
		if (c->variant < 0)
			die_usage("probe %s has no variant '%s'", name, variant);
	}
	for (int i = 0; i < PROBE_MAX_OPTS && c->probe->opts[i].name; i++)
		c->opt[i] = c->probe->opts[i].def;
}

/* getopt's value for part k of the table: PART_OPT + k, past every char. */
#define PART_OPT 256

/* Parses and checks `run`'s argv into cfg and topo, dying with one line on
 * anything a run would refuse. A probe that needs the static engine is
 * handed to it here (exec), unless this is a dry run. */
void run_parse_args(int argc, char **argv, const struct run_part *const *parts, struct run_config *cfg,
		    struct topology *topo)
{
	static const struct option base[] = {
		{"probe", required_argument, 0, 'p'},
		{"workers", required_argument, 0, 'w'},
		{"cpus", required_argument, 0, 'c'},
		{"mode", required_argument, 0, 'm'},
		{"placement", required_argument, 0, 'P'},
		{"duration", required_argument, 0, 'd'},
		{"ops", required_argument, 0, 'n'},
		{"warmup", required_argument, 0, 'W'},
		{"reps", required_argument, 0, 'r'},
		{"interval", required_argument, 0, 'i'},
		{"opt", required_argument, 0, 'o'},
		{"time-limit", required_argument, 0, 't'},
		{"clock", required_argument, 0, 'C'},
		{"tmpdir", required_argument, 0, 'T'},
		{"latency", no_argument, 0, 'L'},
		{"latency-every", required_argument, 0, 'E'},
		{"mix", no_argument, 0, 'M'},
		{"dry-run", no_argument, 0, 'D'},
		{"target", required_argument, 0, 'g'},
		{"sample-period", required_argument, 0, 'S'},
	};
	/* the options above, then each part's (a flag) */
	struct option longopts[sizeof base / sizeof base[0] + RUN_MAX_PARTS + 1];
	int nlong = 0;
	for (; nlong < (int)(sizeof base / sizeof base[0]); nlong++)
		longopts[nlong] = base[nlong];
	for (int k = 0; parts && k < RUN_MAX_PARTS && parts[k]; k++)
		longopts[nlong++] = (struct option){parts[k]->name, no_argument, 0, PART_OPT + k};
	longopts[nlong] = (struct option){0, 0, 0, 0};
	*cfg = (struct run_config){.placement = "compact",
				   .warmup_s = 0.2,
				   .interval_s = 0.1,
				   .reps = 1,
				   .argc = argc,
				   .argv = argv,
				   .sample_period_ns = -1};
	cfg->part_table = parts;
	int asked[RUN_MAX_PARTS], nasked = 0; /* the parts asked for, in the order given */
	/* the elements of argv that asked for them, and argv without them */
	char **part_args = calloc(argc, sizeof *part_args);
	int npart_args = 0;
	cfg->worker_argv = calloc(argc + 1, sizeof *cfg->worker_argv);
	if (!part_args || !cfg->worker_argv)
		die_usage("out of memory");
	const char *probe_arg = NULL, *workers_arg = "1", *cpus_arg = NULL, *every_arg = NULL;
	const char *opts[64];
	int nopts = 0;
	cfg->tmpdir_base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	optind = 2;
	opterr = 0; /* one line of our own instead of getopt's */
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': probe_arg = optarg; break;
		case 'w': workers_arg = optarg; break;
		case 'c': cpus_arg = optarg; break;
		case 'm':
			if (strcmp(optarg, "process") && strcmp(optarg, "thread"))
				die_usage("--mode: '%s' is not process or thread", optarg);
			cfg->threaded = !strcmp(optarg, "thread");
			break;
		case 'P': cfg->placement = optarg; break;
		case 'd': cfg->duration_s = parse_seconds("--duration", optarg, 0); break;
		case 'n': cfg->ops = (uint64_t)parse_long("--ops", optarg, 1, RUN_MAX_OPS); break;
		case 'W': cfg->warmup_s = parse_seconds("--warmup", optarg, 1); break;
		case 'r': cfg->reps = (int)parse_long("--reps", optarg, 1, RUN_MAX_REPS); break;
		case 'i': cfg->interval_s = parse_seconds("--interval", optarg, 0); break;
		case 'o':
			if (nopts == 64)
				die_usage("--opt: too many options");
			opts[nopts++] = optarg;
			break;
		case 't': cfg->time_limit_s = parse_seconds("--time-limit", optarg, 0); break;
		case 'C':
			if (!strcmp(optarg, "auto"))
				cfg->clock_want = CLOCK_WANT_AUTO;
			else if (!strcmp(optarg, "tsc"))
				cfg->clock_want = CLOCK_WANT_TSC;
			else if (!strcmp(optarg, "monotonic"))
				cfg->clock_want = CLOCK_WANT_MONOTONIC;
			else
				die_usage("--clock: '%s' is not auto, tsc or monotonic", optarg);
			break;
		case 'T': cfg->tmpdir_base = optarg; break;
		case 'S':
			cfg->sample_period_ns = parse_long("--sample-period", optarg, 0, RUN_MAX_SAMPLE_PERIOD_NS);
			if (cfg->sample_period_ns && cfg->sample_period_ns < RUN_MIN_SAMPLE_PERIOD_NS)
				die_usage("--sample-period: %s ns is under %d ns (10 kHz); 0 takes no sample", optarg,
					  RUN_MIN_SAMPLE_PERIOD_NS);
			break;
		case 'L': cfg->latency = 1; break;
		case 'E':
			every_arg = optarg;
			cfg->latency_every = strcmp(optarg, "auto") ? (uint64_t)parse_long("--latency-every", optarg, 1,
											   RUN_MAX_LATENCY_EVERY)
								    : 0;
			break;
		case 'M': cfg->mix = 1; break;
		case 'D': cfg->dry_run = 1; break;
		case 'g':
			if (!*optarg)
				die_usage("--target: an empty path");
			cfg->target = optarg;
			break;
		default:
			if (c < PART_OPT || c >= PART_OPT + RUN_MAX_PARTS || !parts)
				die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
			if (!(cfg->parts >> (c - PART_OPT) & 1))
				asked[nasked++] = c - PART_OPT;
			cfg->parts |= 1u << (c - PART_OPT);
			part_args[npart_args++] = argv[optind - 1];
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (!probe_arg)
		die_usage("run needs --probe NAME (see 'oslens-engine list')");
	if (cfg->duration_s && cfg->ops)
		die_usage("--duration and --ops are exclusive: fixed time or fixed work");
	if (!cfg->ops && !cfg->duration_s)
		cfg->duration_s = 1.0;
	if (cfg->interval_s > cfg->duration_s && cfg->duration_s)
		cfg->interval_s = cfg->duration_s;
	if (cfg->duration_s && cfg->duration_s / cfg->interval_s > RUN_MAX_SAMPLES)
		die_usage("--interval %g s gives more than a million samples over %g s", cfg->interval_s,
			  cfg->duration_s);

	char specs[8192];
	snprintf(specs, sizeof specs, "%s", probe_arg);
	for (char *save, *t = strtok_r(specs, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct choice *more = realloc(cfg->choices, (cfg->nchoices + 1) * sizeof *more);
		if (!more)
			die_usage("out of memory");
		cfg->choices = more;
		parse_choice(t, &cfg->choices[cfg->nchoices++]);
	}
	if (!cfg->nchoices)
		die_usage("--probe names no probe");
	if (cfg->nchoices > 1 && !cfg->mix)
		die_usage("several probes in one run need --mix (each worker runs them in turn)");
	if (cfg->mix && !cfg->latency)
		die_usage("--mix times every operation of a mixed stream: it needs --latency");
	if (every_arg && !cfg->latency)
		die_usage("--latency-every says which operations --latency times: it needs --latency");
	if (every_arg && cfg->mix && cfg->latency_every != 1)
		die_usage("--mix times every operation of a mixed stream: --latency-every can only be 1 there");
	if (!every_arg)
		cfg->latency_every = 1;
#ifndef OSLENS_STATIC
	for (int k = 0; k < cfg->nchoices; k++)
		if (cfg->choices[k].probe->needs_static) {
			if (cfg->mix)
				die_usage("probe %s needs the static engine and cannot be mixed",
					  cfg->choices[k].probe->name);
			hand_to_static(argv, cfg->dry_run);
		}
#endif
	for (int i = 0; i < nopts; i++)
		set_opt(cfg, opts[i]);
	for (int k = 0; k < cfg->nchoices && cfg->mix; k++)
		if (cfg->choices[k].probe->variants[cfg->choices[k].variant].alone)
			die_usage("%s:%s changes the whole worker (e.g. its address space) and cannot be mixed",
				  cfg->choices[k].probe->name,
				  cfg->choices[k].probe->variants[cfg->choices[k].variant].name);
	for (int k = 0; k < cfg->nchoices && cfg->latency; k++)
		if (!cfg->choices[k].probe->timed)
			die_usage("probe %s has no per-operation latency (it is not a repeated operation)",
				  cfg->choices[k].probe->name);

	check_target(cfg);
	check_parts(cfg, asked, nasked);
	for (int i = 0; i < argc; i++) {
		int theirs = 0;
		for (int t = 0; t < npart_args; t++)
			theirs |= argv[i] == part_args[t];
		if (!theirs)
			cfg->worker_argv[cfg->worker_argc++] = argv[i];
	}
	free(part_args);

	if (topology_read(topo) != 0)
		die_usage("cannot read the CPU topology or affinity mask");
	char err[256];
	if (cpus_arg) {
		int *list = malloc(sizeof(int) * (topo->n + 1));
		int n = cpulist_parse(cpus_arg, list, topo->n + 1);
		if (n <= 0)
			die_usage("--cpus: '%s' is not a CPU list of at most %d CPUs (e.g. 0-3,8)", cpus_arg, topo->n);
		cfg->nworkers = n;
		cfg->placement = "explicit";
		cfg->cpus = calloc(n, sizeof *cfg->cpus);
		for (int i = 0; i < n; i++) {
			const struct cpu_topo *t = topology_cpu(topo, list[i]);
			if (!t)
				die_usage("--cpus: CPU %d is not online or not in this process's affinity mask",
					  list[i]);
			for (int k = 0; k < i; k++)
				if (list[k] == list[i])
					die_usage("--cpus: CPU %d is listed twice", list[i]);
			cfg->cpus[i] = *t;
		}
		free(list);
	} else {
		cfg->nworkers = !strcmp(workers_arg, "max")
					? topo->n
					: (int)parse_long("--workers", workers_arg, 1, RUN_MAX_WORKERS);
		cfg->cpus = calloc(cfg->nworkers, sizeof *cfg->cpus);
		if (!cfg->cpus || placement_plan(topo, cfg->placement, cfg->nworkers, cfg->cpus, err, sizeof err) != 0)
			die_usage("%s", err);
	}
	if (cfg->nworkers > RUN_MAX_WORKERS)
		die_usage("--workers: at most %d workers per run", RUN_MAX_WORKERS);
	/* A partner task goes, in order, to a CPU no worker uses (dealt out
	 * round-robin), else to the next worker's CPU; the header records it. */
	cfg->partner_cpus = calloc(cfg->nworkers, sizeof *cfg->partner_cpus);
	int *used = calloc(cfg->nworkers, sizeof *used), *spare = calloc(topo->n, sizeof *spare);
	if (!used || !spare)
		die_usage("out of memory");
	for (int i = 0; i < cfg->nworkers; i++)
		used[i] = cfg->cpus[i].cpu;
	int nspare = topology_unused(topo, used, cfg->nworkers, spare);
	free(used);
	for (int i = 0; i < cfg->nworkers; i++)
		cfg->partner_cpus[i] = nspare		   ? spare[i % nspare]
				       : cfg->nworkers > 1 ? cfg->cpus[(i + 1) % cfg->nworkers].cpu
							   : -1;
	free(spare);
	for (int k = 0; k < cfg->nchoices; k++)
		if (cfg->choices[k].probe->needs_partner_cpu && topo->n < 2)
			die_usage("probe %s needs a second CPU for its partner task; this process has one",
				  cfg->choices[k].probe->name);
	check_task_budget(cfg);
}

/* --dry-run: the configuration a run would measure, after every check. */
void run_emit_config(const struct run_config *cfg)
{
	struct json *j = json_record("config");
	json_str(j, "command", "run");
	json_arr(j, "probes");
	for (int k = 0; k < cfg->nchoices; k++) {
		const struct choice *c = &cfg->choices[k];
		json_obj(j, NULL);
		json_str(j, "name", c->probe->name);
		json_str(j, "variant", c->probe->variants[c->variant].name);
		json_obj(j, "options");
		for (int i = 0; i < PROBE_MAX_OPTS && c->probe->opts[i].name; i++)
			json_int(j, c->probe->opts[i].name, c->opt[i]);
		json_end(j);
		json_end(j);
	}
	json_end(j);
	json_int(j, "workers", cfg->nworkers);
	json_str(j, "mode", cfg->threaded ? "thread" : "process");
	json_str(j, "placement", cfg->placement);
	json_arr(j, "cpus");
	for (int i = 0; i < cfg->nworkers; i++)
		json_int(j, NULL, cfg->cpus[i].cpu);
	json_end(j);
	json_arr(j, "partner_cpus");
	for (int i = 0; i < cfg->nworkers; i++)
		json_int(j, NULL, cfg->partner_cpus[i]);
	json_end(j);
	json_str(j, "fixed", cfg->ops ? "ops" : "time");
	json_num(j, "duration_s", cfg->duration_s);
	json_uint(j, "ops", cfg->ops);
	json_num(j, "warmup_s", cfg->warmup_s);
	json_num(j, "interval_s", cfg->interval_s);
	json_int(j, "reps", cfg->reps);
	json_num(j, "time_limit_s", cfg->time_limit_s);
	json_bool(j, "latency", cfg->latency);
	if (cfg->latency) {
		if (cfg->latency_every)
			json_uint(j, "latency_every", cfg->latency_every);
		else
			json_str(j, "latency_every", "auto");
	}
	json_bool(j, "mix", cfg->mix);
	if (cfg->sample_period_ns >= 0)
		json_int(j, "sample_period_ns", cfg->sample_period_ns);
	for (int k = 0; cfg->part_table && cfg->part_table[k]; k++)
		json_bool(j, cfg->part_table[k]->name, cfg->parts >> k & 1);
	json_str(j, "tmpdir_base", cfg->tmpdir_base);
	if (cfg->target)
		json_str(j, "target", cfg->target);
	json_str(j, "clock", clock_info.source);
	json_emit(j);
}

void probe_env_init(struct probe_env *env, const struct run_config *cfg, const struct choice *c, const char *tmpdir)
{
	memset(env, 0, sizeof *env);
	env->probe = c->probe;
	env->variant = c->variant;
	memcpy(env->opt, c->opt, sizeof env->opt);
	env->nworkers = cfg->nworkers;
	env->threaded = cfg->threaded;
	env->tmpdir = tmpdir;
	env->target = cfg->target;
}
