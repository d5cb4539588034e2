/* PHOENIX word_count: count the words of a text. Each worker counts its
 * share into a table of its own that grows a malloc'd node per new word;
 * the master then merges the tables. The time goes to hashing, pointer
 * chasing through tables larger than the caches, and malloc; the kernel is
 * entered when the heap grows and its pages are first touched.
 *
 * The text is generated, so nothing is read from disk: size words from a
 * Zipf-like vocabulary of 100,000, in TEXT_CHUNKS fixed chunks, each from a
 * generator seeded by its index. Each worker generates and counts its own
 * chunks: the whole job is parallel (a serial set-up would read as Amdahl's
 * serial fraction) and the result does not depend on the number of workers. */
#include <stdint.h>
#include <stdlib.h>

#include "app.h"
#include "words.h"

static int wordcount_setup(struct app_run *r)
{
	struct vocab *v = calloc(1, sizeof *v);
	if (!v || vocab_init(v) != 0)
		return app_run_fail(r, "out of memory for the vocabulary");
	r->data = v;
	return 0;
}

static int wordcount_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	const struct vocab *v = r->data;
	long first, last;
	app_share(TEXT_CHUNKS, r->nworkers, w->index, &first, &last);
	struct wordtab tab;
	if (wordtab_init(&tab) != 0)
		return app_fail(w, "out of memory for the word table");
	char *buf = NULL;
	size_t cap = 0;
	for (long c = first; c < last; c++) {
		long n, len = vocab_chunk(v, 0x776f7264ull, r->size, (int)c, &buf, &cap, &n);
		if (len < 0 || wordtab_scan(&tab, buf, (size_t)len, 0) != 0) {
			free(buf);
			return app_fail(w, "out of memory for chunk %ld of the text or the word table", c);
		}
	}
	free(buf);
	if (wordtab_put(&tab, out) != 0)
		return app_fail(w, "out of memory for the word table");
	wordtab_free(&tab);
	return 0;
}

static int wordcount_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	struct wordtab all;
	if (wordtab_init(&all) != 0)
		return app_run_fail(r, "out of memory for the merged table");
	for (int i = 0; i < r->nworkers; i++)
		if (wordtab_merge(&all, &parts[i]) != 0)
			return app_run_fail(r, "the table of worker %d is damaged or too big", i);
	if (all.total != (uint64_t)r->size)
		return app_run_fail(r, "counted %llu words, not %ld", (unsigned long long)all.total, r->size);
	*checksum = wordtab_checksum(&all, 0);
	wordtab_free(&all);
	return 0;
}

OSLENS_APP(wordcount) = {
	.name = "wordcount",
	.summary = "PHOENIX word_count: per-worker hash tables, a malloc per new word, over an in-memory Zipf text",
	.kind = APP_MEMORY,
	.size_unit = "words",
	.default_size = 20000000,
	.min_size = 1,
	.max_size = 1L << 28,
	.setup = wordcount_setup,
	.work = wordcount_work,
	.merge = wordcount_merge,
};
