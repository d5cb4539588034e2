/* MOSBENCH psearchy: index a tree of small text files. Each worker takes its
 * share of the file list and, for every file, opens it, fstat()s it, maps
 * it, adds its words to an index of its own (word -> occurrences, files)
 * and unmaps and closes it. Little user work per file against five system
 * calls and a page fault or two: in thread mode all workers share one
 * descriptor table and one mmap_lock, the kernel-side contention MOSBENCH
 * found, so system time should grow with the workers.
 *
 * `--prepare DIR` writes the files (size of them, 1-8 KiB of Zipf text, 100
 * to a subdirectory) and, last, DIR/psearchy.manifest saying how many; a run
 * reads the manifest, so a half-made tree is refused, not half-indexed. The
 * tree belongs to the caller: nothing in it is ever removed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../json.h"
#include "app.h"
#include "words.h"

#define FILES_PER_DIR 100
#define MANIFEST "psearchy.manifest"
#define MIN_FILE 1024
#define MAX_FILE 8192

static void file_path(char *buf, size_t len, const char *dir, long i)
{
	snprintf(buf, len, "%s/d%04ld/f%06ld.txt", dir, i / FILES_PER_DIR, i);
}

static int psearchy_prepare(struct app_run *r)
{
	char path[PATH_MAX + 64], buf[MAX_FILE];
	if (mkdir(r->dir, 0777) != 0 && errno != EEXIST)
		return app_run_fail(r, "mkdir %s: %s", r->dir, strerror(errno));
	snprintf(path, sizeof path, "%s/%s", r->dir, MANIFEST);
	if (unlink(path) != 0 && errno != ENOENT)
		return app_run_fail(r, "cannot remove the old %s: %s", path, strerror(errno));
	struct vocab v;
	if (vocab_init(&v) != 0)
		return app_run_fail(r, "out of memory for the vocabulary");
	uint64_t bytes = 0;
	for (long i = 0; i < r->size; i++) {
		if (i % FILES_PER_DIR == 0) {
			snprintf(path, sizeof path, "%s/d%04ld", r->dir, i / FILES_PER_DIR);
			if (mkdir(path, 0777) != 0 && errno != EEXIST)
				return app_run_fail(r, "mkdir %s: %s", path, strerror(errno));
		}
		uint64_t rng = app_mix64(0x70736561726368ull + i);
		size_t want = MIN_FILE + rng % (MAX_FILE - MIN_FILE + 1);
		size_t len = vocab_text(&v, &rng, buf, want, UINT64_MAX);
		file_path(path, sizeof path, r->dir, i);
		int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0666);
		if (fd < 0)
			return app_run_fail(r, "%s: %s", path, strerror(errno));
		int rc = write_all(fd, buf, len);
		int err = errno;
		if (close(fd) != 0 && rc == 0) {
			rc = -1;
			err = errno;
		}
		if (rc != 0)
			return app_run_fail(r, "writing %s: %s", path, strerror(err));
		bytes += len;
	}
	vocab_free(&v);
	/* last, and whole (rename), so that its presence means a finished tree */
	char tmp[PATH_MAX + 72];
	snprintf(path, sizeof path, "%s/%s", r->dir, MANIFEST);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return app_run_fail(r, "%s: %s", tmp, strerror(errno));
	fprintf(f, "oslens psearchy files %ld bytes %llu\n", r->size, (unsigned long long)bytes);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		return app_run_fail(r, "writing %s: %s", path, strerror(errno));
	struct json *j = json_record("app_prepare");
	json_str(j, "name", r->app->name);
	json_str(j, "dir", r->dir);
	json_int(j, "size", r->size);
	json_uint(j, "bytes", bytes);
	json_emit(j);
	return 0;
}

static int psearchy_setup(struct app_run *r)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", r->dir, MANIFEST);
	FILE *f = fopen(path, "re");
	if (!f)
		return app_run_fail(r,
				    "%s has no prepared files (%s: %s); make them with "
				    "'oslens-engine app psearchy --prepare %s'",
				    r->dir, MANIFEST, strerror(errno), r->dir);
	long files = -1;
	int got = fscanf(f, "oslens psearchy files %ld", &files);
	fclose(f);
	if (got != 1 || files < 1)
		return app_run_fail(r, "%s is not a psearchy manifest; prepare %s again", path, r->dir);
	if (r->size_given && r->size > files)
		return app_run_fail(r, "--size %ld: %s holds only %ld prepared files", r->size, r->dir, files);
	if (!r->size_given)
		r->size = files;
	return 0;
}

static int index_file(struct app_worker *w, struct wordtab *tab, long i)
{
	char path[PATH_MAX + 64];
	file_path(path, sizeof path, w->run->dir, i);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return app_fail(w, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		app_fail(w, "fstat %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	int rc = 0;
	if (st.st_size > 0) {
		void *p = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			app_fail(w, "mmap %s: %s", path, strerror(errno));
			close(fd);
			return -1;
		}
		if (wordtab_scan(tab, p, st.st_size, (uint32_t)i) != 0)
			rc = app_fail(w, "out of memory for the index");
		munmap(p, st.st_size);
	}
	close(fd);
	return rc;
}

static int psearchy_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	long begin, end;
	app_share(r->size, r->nworkers, w->index, &begin, &end);
	struct wordtab tab;
	if (wordtab_init(&tab) != 0)
		return app_fail(w, "out of memory for the index");
	for (long i = begin; i < end; i++)
		if (index_file(w, &tab, i) != 0)
			return -1;
	if (wordtab_put(&tab, out) != 0)
		return app_fail(w, "out of memory for the index");
	wordtab_free(&tab);
	return 0;
}

static int psearchy_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	struct wordtab all;
	if (wordtab_init(&all) != 0)
		return app_run_fail(r, "out of memory for the merged index");
	for (int i = 0; i < r->nworkers; i++)
		if (wordtab_merge(&all, &parts[i]) != 0)
			return app_run_fail(r, "the index of worker %d is damaged", i);
	/* every file is indexed by one worker, so files per word add up exactly */
	*checksum = wordtab_checksum(&all, 1);
	wordtab_free(&all);
	return 0;
}

OSLENS_APP(psearchy) = {
	.name = "psearchy",
	.summary = "MOSBENCH psearchy: index small files (open, fstat, mmap, scan, munmap, close each); kernel-heavy",
	.kind = APP_KERNEL,
	.size_unit = "files",
	.default_size = 20000,
	.min_size = 1,
	.max_size = 10000000,
	.uses_dir = 1,
	.prepare = psearchy_prepare,
	.setup = psearchy_setup,
	.work = psearchy_work,
	.merge = psearchy_merge,
};
