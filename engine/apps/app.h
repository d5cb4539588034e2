/* The application interface: a whole workload, run once, for `oslens
 * appscale --workload NAME`.
 *
 * Where a probe repeats one OS primitive for a while, an app is a
 * strong-scaling job: a fixed amount of work, fixed by its size alone,
 * divided over N workers (threads of one process, or processes). Its result
 * checksum depends on the size only, never on N, so a run that scaled
 * wrongly (lost or doubled work) shows. An app is one C file that fills a
 * `struct app` and registers it with OSLENS_APP(); registration goes through
 * a linker section, so adding an app never touches a central list. */
#ifndef OSLENS_APP_H
#define OSLENS_APP_H

#include <stddef.h>
#include <stdint.h>

struct app_buf { /* bytes a worker hands to the merge */
	char *data;
	size_t len, cap;
};

/* What every worker of one run shares. Built by the master before any
 * worker exists; read-only once they run (process-mode workers get a
 * copy-on-write copy), except memory from app_shared_alloc(). */
struct app_run {
	const struct app *app;
	long size;
	int nworkers;
	int threaded;
	int size_given;	     /* --size was on the command line */
	const char *dir;     /* --dir or --prepare, or NULL */
	void *data;	     /* the app's input, made by setup */
	struct app_ctl *ctl; /* the harness's shared state (app.c) */
	char err[256];	     /* set by setup/merge (app_run_fail) on failure */
};

struct app_worker {
	const struct app_run *run;
	int index;
	char err[256]; /* set by work (app_fail) on failure */
};

enum app_kind { APP_COMPUTE, APP_MEMORY, APP_KERNEL };

struct app {
	const char *name;
	const char *summary;
	enum app_kind kind;
	const char *size_unit; /* what --size counts ("points", "files") */
	long default_size, min_size, max_size;
	int uses_dir; /* its input is files under --dir */

	/* --prepare DIR: makes the input files, untimed. Optional. */
	int (*prepare)(struct app_run *r);
	/* Master, before the workers: builds r->data. Optional. */
	int (*setup)(struct app_run *r);
	/* Worker: its share of the work; its partial result goes into out. */
	int (*work)(struct app_worker *w, struct app_buf *out);
	/* Master, after every worker: combines the partial results. */
	int (*merge)(struct app_run *r, const struct app_buf *parts, uint64_t *checksum);
};

/* Register an app: `OSLENS_APP(kmeans) = { .name = "kmeans", ... };` */
#define OSLENS_APP(id)                                                                                         \
	static const struct app id##_app;                                                                      \
	static const struct app *const id##_app_ref __attribute__((used, section("oslens_apps"))) = &id##_app; \
	static const struct app id##_app

/* The registered app called name, or NULL (registry.c). */
const struct app *app_find(const char *name);
/* Calls fn for every registered app, in link order. */
void app_foreach(void (*fn)(const struct app *a));

/* [begin, end) of worker i's equal share of n items. */
void app_share(long n, int nworkers, int i, long *begin, long *end);
/* All workers wait here until every one has arrived (futex in shared
 * memory: works for threads and processes alike). */
void app_barrier(const struct app_worker *w);
/* Zeroed memory that all workers see, threads or processes; from setup only. */
void *app_shared_alloc(struct app_run *r, size_t len);
/* Formats the reason into err and returns -1. */
int app_fail(struct app_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int app_run_fail(struct app_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int app_buf_put(struct app_buf *b, const void *p, size_t len);

/* What `oslens-engine app` was asked to do (app_args.c). */
struct app_config {
	int list; /* `app list` */
	const struct app *app;
	int nworkers;
	int threaded;
	long size;
	int size_given;
	const char *dir; /* --dir, or --prepare's DIR */
	int prepare;	 /* --prepare: make the input files in dir, untimed */
	int dry_run;
};

/* argv (argv[1] = "app") into cfg, or one line on stderr and exit 2. */
void app_parse_args(int argc, char **argv, struct app_config *cfg);

/* A counter-based generator: the same (seed, i) always gives the same value,
 * so input is identical however the generation is divided. */
static inline uint64_t app_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
