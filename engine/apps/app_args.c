/* `oslens-engine app`'s argv into a struct app_config, every check made
 * before anything runs; a bad argument is one line and exit status 2. */
#include "app.h"
#include "../args.h"

#include <getopt.h>
#include <limits.h>
#include <string.h>

static void app_usage(void)
{
	die_usage("usage: oslens-engine app list | app NAME [--workers N] [--mode thread|process] "
		  "[--size K] [--dir DIR] | app NAME --prepare DIR [--size K]");
}

void app_parse_args(int argc, char **argv, struct app_config *cfg)
{
	*cfg = (struct app_config){.nworkers = 1, .threaded = 1};
	if (argc < 3 || argv[2][0] == '-')
		app_usage();
	if (!strcmp(argv[2], "list")) {
		if (argc > 3)
			die_usage("app list: unexpected argument '%s'", argv[3]);
		cfg->list = 1;
		return;
	}
	const struct app *app = app_find(argv[2]);
	if (!app)
		die_usage("unknown app '%s' (see 'oslens-engine app list')", argv[2]);
	cfg->app = app;
	cfg->size = app->default_size;

	static const struct option longopts[] = {{"workers", required_argument, 0, 'w'},
						 {"mode", required_argument, 0, 'm'},
						 {"size", required_argument, 0, 's'},
						 {"dir", required_argument, 0, 'd'},
						 {"prepare", required_argument, 0, 'p'},
						 {"dry-run", no_argument, 0, 'D'},
						 {0, 0, 0, 0}};
	const char *prepare = NULL;
	int workers_given = 0, mode_given = 0;
	optind = 3;
	opterr = 0; /* one line of our own instead of getopt's */
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			cfg->nworkers = (int)parse_long("--workers", optarg, 1, APP_MAX_WORKERS);
			workers_given = 1;
			break;
		case 'm':
			if (strcmp(optarg, "thread") && strcmp(optarg, "process"))
				die_usage("--mode: '%s' is not thread or process", optarg);
			cfg->threaded = !strcmp(optarg, "thread");
			mode_given = 1;
			break;
		case 's':
			cfg->size = parse_long("--size", optarg, app->min_size, app->max_size);
			cfg->size_given = 1;
			break;
		case 'd': cfg->dir = optarg; break;
		case 'p': prepare = optarg; break;
		case 'D': cfg->dry_run = 1; break;
		default: die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);

	if (prepare) {
		if (!app->prepare)
			die_usage("app %s has no input files to --prepare", app->name);
		if (cfg->dir || workers_given || mode_given)
			die_usage("--prepare only makes the input (with --size); run it with --dir afterwards");
		if (strlen(prepare) > PATH_MAX - 64)
			die_usage("--prepare: a path of %zu bytes is too long", strlen(prepare));
		cfg->dir = prepare;
		cfg->prepare = 1;
		return;
	}
	if (cfg->dir && strlen(cfg->dir) > PATH_MAX - 64)
		die_usage("--dir: a path of %zu bytes is too long", strlen(cfg->dir));
	if (app->uses_dir && !cfg->dir)
		die_usage("app %s reads files: give --dir DIR (made with 'app %s --prepare DIR')", app->name,
			  app->name);
	if (!app->uses_dir && cfg->dir)
		die_usage("app %s makes its input in memory and takes no --dir", app->name);
}
