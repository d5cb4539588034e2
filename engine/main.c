/* oslens-engine: argv in, JSON lines out. See README.md for the records. */
#include "engine.h"
#include "json.h"
#include "trace/trace.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void die_usage(const char *fmt, ...)
{
	va_list ap;
	fputs("oslens-engine: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

static void usage(void)
{
	fputs("usage: oslens-engine list | topology | plan N POLICY | histtest | trace | inject | profile | app | run --probe NAME[:VARIANT][,...]\n"
	      "         [--workers N|max | --cpus LIST]\n"
	      "         [--mode process|thread] [--placement compact|spread] [--duration S | --ops N]\n"
	      "         [--warmup S] [--reps N] [--interval S] [--opt KEY=VALUE]... [--time-limit S]\n"
	      "         [--clock auto|tsc|monotonic] [--tmpdir DIR] [--latency [--mix]] [--trace]\n", stderr);
	exit(EXIT_USAGE);
}

static void json_syscalls(struct json *j, const char *key, const char *list)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", list);
	json_arr(j, key);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_str(j, NULL, t);
	json_end(j);
}

static void emit_probe(const struct probe *p, void *arg)
{
	(void)arg;
	struct json *j = json_record("probe");
	json_str(j, "name", p->name);
	json_str(j, "summary", p->summary);
	json_str(j, "subsystem", p->subsystem);
	json_syscalls(j, "syscalls", p->syscalls);
	json_arr(j, "variants");
	for (int i = 0; i < PROBE_MAX_VARIANTS && p->variants[i].name; i++) {
		json_obj(j, NULL);
		json_str(j, "name", p->variants[i].name);
		json_str(j, "help", p->variants[i].help);
		json_syscalls(j, "syscalls", p->variants[i].syscalls ? p->variants[i].syscalls : p->syscalls);
		json_end(j);
	}
	json_end(j);
	json_arr(j, "options");
	for (int i = 0; i < PROBE_MAX_OPTS && p->opts[i].name; i++) {
		json_obj(j, NULL);
		json_str(j, "name", p->opts[i].name);
		json_int(j, "default", p->opts[i].def);
		json_int(j, "min", p->opts[i].min);
		json_int(j, "max", p->opts[i].max);
		json_str(j, "help", p->opts[i].help);
		json_end(j);
	}
	json_end(j);
	json_bool(j, "static", p->needs_static);
	json_bool(j, "timed", p->timed != NULL);
	json_emit(j);
}

static int cmd_topology(void)
{
	struct topology t;
	if (topology_read(&t) != 0)
		die_usage("cannot read the CPU topology");
	struct json *j = json_record("topology");
	json_int(j, "online", t.nonline);
	json_int(j, "available", t.n);
	json_int(j, "packages", t.npackages);
	json_arr(j, "cpus");
	for (int i = 0; i < t.n; i++) {
		topology_emit_cpu(j, &t.cpus[i]);
	}
	json_emit(j);
	return 0;
}

/* Records the whole numbers read from stdin into a histogram and prints it,
 * so that tests can check the histogram against exact statistics. */
static int cmd_histtest(void)
{
	struct hist *h = hist_new();
	unsigned long long v;
	while (h && scanf("%llu", &v) == 1)
		hist_record(h, v);
	if (!h || !feof(stdin))
		die_usage("histtest: stdin must hold whole non-negative numbers");
	struct json *j = json_record("hist");
	hist_emit(j, "hist", h, 1.0);
	json_emit(j);
	return 0;
}

/* Where `run` would place N workers, without running anything. */
static int cmd_plan(int argc, char **argv)
{
	if (argc != 4)
		die_usage("usage: oslens-engine plan N compact|spread");
	struct topology t;
	if (topology_read(&t) != 0)
		die_usage("cannot read the CPU topology");
	int n = !strcmp(argv[2], "max") ? t.n : atoi(argv[2]);
	struct cpu_topo *cpus = calloc(n > 0 ? n : 1, sizeof *cpus);
	char err[256];
	if (placement_plan(&t, argv[3], n, cpus, err, sizeof err) != 0)
		die_usage("%s", err);
	struct json *j = json_record("plan");
	json_str(j, "policy", argv[3]);
	json_arr(j, "cpus");
	for (int i = 0; i < n; i++)
		json_int(j, NULL, cpus[i].cpu);
	json_emit(j);
	return 0;
}

static double parse_seconds(const char *opt, const char *s, int allow_zero)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || (!allow_zero && v == 0) || v > 86400 * 7)
		die_usage("%s: '%s' is not a %s number of seconds", opt, s, allow_zero ? "non-negative" : "positive");
	return v;
}

long parse_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		die_usage("%s: '%s' is not a whole number from %ld to %ld", opt, s, min, max);
	return v;
}

#ifndef OSLENS_STATIC
/* The statically linked engine sits beside this one as <self>-static. */
static void exec_static(char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 8];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		die_usage("cannot find my own executable: %s", strerror(errno));
	self[n] = 0;
	snprintf(path, sizeof path, "%s-static", self);
	execv(path, argv);
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
		die_usage("%d workers need %ld more tasks; the system has %ld of kernel.threads-max %ld",
			  cfg->nworkers, need, tasks, threads_max);
	struct rlimit rl;
	if (geteuid() != 0 && getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)need > rl.rlim_cur / 2)
		die_usage("%d workers need %ld tasks but RLIMIT_NPROC is %lu; lower --workers or raise ulimit -u",
			  cfg->nworkers, need, (unsigned long)rl.rlim_cur);
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

static int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"probe", required_argument, 0, 'p'},   {"workers", required_argument, 0, 'w'},
		{"cpus", required_argument, 0, 'c'},    {"mode", required_argument, 0, 'm'},
		{"placement", required_argument, 0, 'P'}, {"duration", required_argument, 0, 'd'},
		{"ops", required_argument, 0, 'n'},     {"warmup", required_argument, 0, 'W'},
		{"reps", required_argument, 0, 'r'},    {"interval", required_argument, 0, 'i'},
		{"opt", required_argument, 0, 'o'},     {"time-limit", required_argument, 0, 't'},
		{"clock", required_argument, 0, 'C'},   {"tmpdir", required_argument, 0, 'T'},
		{"latency", no_argument, 0, 'L'},      {"mix", no_argument, 0, 'M'},
		{"trace", no_argument, 0, 'R'},
		{0, 0, 0, 0}};
	struct run_config cfg = {.placement = "compact", .warmup_s = 0.2, .interval_s = 0.1,
				 .reps = 1, .argc = argc, .argv = argv};
	const char *probe_arg = NULL, *workers_arg = "1", *cpus_arg = NULL;
	const char *opts[64];
	int nopts = 0;
	enum clock_want clock_want = CLOCK_WANT_AUTO;
	cfg.tmpdir_base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

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
			cfg.threaded = !strcmp(optarg, "thread");
			break;
		case 'P': cfg.placement = optarg; break;
		case 'd': cfg.duration_s = parse_seconds("--duration", optarg, 0); break;
		case 'n': cfg.ops = (uint64_t)parse_long("--ops", optarg, 1, LONG_MAX); break;
		case 'W': cfg.warmup_s = parse_seconds("--warmup", optarg, 1); break;
		case 'r': cfg.reps = (int)parse_long("--reps", optarg, 1, 100000); break;
		case 'i': cfg.interval_s = parse_seconds("--interval", optarg, 0); break;
		case 'o':
			if (nopts == 64)
				die_usage("--opt: too many options");
			opts[nopts++] = optarg;
			break;
		case 't': cfg.time_limit_s = parse_seconds("--time-limit", optarg, 0); break;
		case 'C':
			if (!strcmp(optarg, "auto")) clock_want = CLOCK_WANT_AUTO;
			else if (!strcmp(optarg, "tsc")) clock_want = CLOCK_WANT_TSC;
			else if (!strcmp(optarg, "monotonic")) clock_want = CLOCK_WANT_MONOTONIC;
			else die_usage("--clock: '%s' is not auto, tsc or monotonic", optarg);
			break;
		case 'T': cfg.tmpdir_base = optarg; break;
		case 'L': cfg.latency = 1; break;
		case 'M': cfg.mix = 1; break;
		case 'R': cfg.trace = 1; break;
		default: die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (!probe_arg)
		die_usage("run needs --probe NAME (see 'oslens-engine list')");
	if (cfg.duration_s && cfg.ops)
		die_usage("--duration and --ops are exclusive: fixed time or fixed work");
	if (!cfg.ops && !cfg.duration_s)
		cfg.duration_s = 1.0;
	if (cfg.interval_s > cfg.duration_s && cfg.duration_s)
		cfg.interval_s = cfg.duration_s;
	if (cfg.duration_s && cfg.duration_s / cfg.interval_s > 1e6)
		die_usage("--interval %g s gives more than a million samples over %g s", cfg.interval_s, cfg.duration_s);

	char specs[8192];
	snprintf(specs, sizeof specs, "%s", probe_arg);
	for (char *save, *t = strtok_r(specs, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct choice *more = realloc(cfg.choices, (cfg.nchoices + 1) * sizeof *more);
		if (!more)
			die_usage("out of memory");
		cfg.choices = more;
		parse_choice(t, &cfg.choices[cfg.nchoices++]);
	}
	if (!cfg.nchoices)
		die_usage("--probe names no probe");
	if (cfg.nchoices > 1 && !cfg.mix)
		die_usage("several probes in one run need --mix (each worker runs them in turn)");
	if (cfg.mix && !cfg.latency)
		die_usage("--mix times every operation of a mixed stream: it needs --latency");
#ifndef OSLENS_STATIC
	for (int k = 0; k < cfg.nchoices; k++)
		if (cfg.choices[k].probe->needs_static) {
			if (cfg.mix)
				die_usage("probe %s needs the static engine and cannot be mixed", cfg.choices[k].probe->name);
			exec_static(argv);
		}
#endif
	for (int i = 0; i < nopts; i++)
		set_opt(&cfg, opts[i]);
	for (int k = 0; k < cfg.nchoices && cfg.mix; k++)
		if (cfg.choices[k].probe->variants[cfg.choices[k].variant].alone)
			die_usage("%s:%s changes the whole worker (e.g. its address space) and cannot be mixed",
				  cfg.choices[k].probe->name, cfg.choices[k].probe->variants[cfg.choices[k].variant].name);
	for (int k = 0; k < cfg.nchoices && cfg.latency; k++)
		if (!cfg.choices[k].probe->timed)
			die_usage("probe %s has no per-operation latency (it is not a repeated operation)",
				  cfg.choices[k].probe->name);

	struct topology topo;
	if (topology_read(&topo) != 0)
		die_usage("cannot read the CPU topology or affinity mask");
	char err[256];
	if (cpus_arg) {
		int *list = malloc(sizeof(int) * (topo.n + 1));
		int n = cpulist_parse(cpus_arg, list, topo.n + 1);
		if (n <= 0)
			die_usage("--cpus: '%s' is not a CPU list of at most %d CPUs (e.g. 0-3,8)", cpus_arg, topo.n);
		cfg.nworkers = n;
		cfg.placement = "explicit";
		cfg.cpus = calloc(n, sizeof *cfg.cpus);
		for (int i = 0; i < n; i++) {
			const struct cpu_topo *t = topology_cpu(&topo, list[i]);
			if (!t)
				die_usage("--cpus: CPU %d is not online or not in this process's affinity mask", list[i]);
			for (int k = 0; k < i; k++)
				if (list[k] == list[i])
					die_usage("--cpus: CPU %d is listed twice", list[i]);
			cfg.cpus[i] = *t;
		}
		free(list);
	} else {
		cfg.nworkers = !strcmp(workers_arg, "max") ? topo.n
							   : (int)parse_long("--workers", workers_arg, 1, 1 << 20);
		cfg.cpus = calloc(cfg.nworkers, sizeof *cfg.cpus);
		if (!cfg.cpus || placement_plan(&topo, cfg.placement, cfg.nworkers, cfg.cpus, err, sizeof err) != 0)
			die_usage("%s", err);
	}
	if (cfg.nworkers > 4096)
		die_usage("at most 4096 workers per run");
	/* A partner task goes, in order, to a CPU no worker uses (dealt out
	 * round-robin), else to the next worker's CPU; the header records it. */
	cfg.partner_cpus = calloc(cfg.nworkers, sizeof *cfg.partner_cpus);
	int *spare = calloc(topo.n, sizeof *spare), nspare = 0;
	for (int k = 0; k < topo.n; k++) {
		int used = 0;
		for (int i = 0; i < cfg.nworkers && !used; i++)
			used = cfg.cpus[i].cpu == topo.cpus[k].cpu;
		if (!used)
			spare[nspare++] = topo.cpus[k].cpu;
	}
	for (int i = 0; i < cfg.nworkers; i++)
		cfg.partner_cpus[i] = nspare ? spare[i % nspare]
				  : cfg.nworkers > 1 ? cfg.cpus[(i + 1) % cfg.nworkers].cpu : -1;
	free(spare);
	for (int k = 0; k < cfg.nchoices; k++)
		if (cfg.choices[k].probe->needs_partner_cpu && topo.n < 2)
			die_usage("probe %s needs a second CPU for its partner task; this process has one",
				  cfg.choices[k].probe->name);
	check_task_budget(&cfg);
	if (clock_init(clock_want) != 0)
		die_usage("--clock tsc: %s", clock_info.reason);
	return run_probe(&cfg, &topo);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	/* The static exec target of the fork+exec probe: exits at once. */
	if (!strcmp(argv[1], "true"))
		_exit(0);
	if (!strcmp(argv[1], "list")) {
		probe_foreach(emit_probe, NULL);
		return 0;
	}
	if (!strcmp(argv[1], "topology"))
		return cmd_topology();
	if (!strcmp(argv[1], "trace"))
		return cmd_trace(argc, argv);
	if (!strcmp(argv[1], "profile"))
		return cmd_profile(argc, argv);
	if (!strcmp(argv[1], "app"))
		return cmd_app(argc, argv);
	if (!strcmp(argv[1], "inject"))
		return cmd_inject(argc, argv);
	if (!strcmp(argv[1], "histtest"))
		return cmd_histtest();
	if (!strcmp(argv[1], "plan"))
		return cmd_plan(argc, argv);
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc, argv);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		usage();
	die_usage("unknown command '%s' (list, topology, plan, run, app)", argv[1]);
}
