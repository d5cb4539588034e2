/* PHOENIX string_match: find four key words in a text. Each worker makes
 * its share of the text's fixed chunks (the same Zipf-like text as
 * wordcount's) and hashes every word, comparing the hash with the keys'
 * and, where one is equal, the word with the key. A stream of short
 * computations over text in the caches: user time that should scale with
 * the workers.
 *
 * The chunks are fixed and the counts added, so the result is the same for
 * any number of workers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "words.h"

#define KEYS 4
/* Vocabulary ranks of the keys: a common word, two middling, a rare one. */
static const uint32_t key_rank[KEYS] = {3, 500, 20000, 99000};

struct strmatch {
	struct vocab v;
	uint64_t hash[KEYS];
};

static uint64_t fnv1a(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static int strmatch_setup(struct app_run *r)
{
	struct strmatch *s = calloc(1, sizeof *s);
	if (!s || vocab_init(&s->v) != 0)
		return app_run_fail(r, "out of memory for the vocabulary");
	for (int k = 0; k < KEYS; k++)
		s->hash[k] = fnv1a(s->v.text + s->v.off[key_rank[k]], s->v.len[key_rank[k]]);
	r->data = s;
	return 0;
}

/* Adds to count[k] the occurrences of key k among the words of p[0..len). */
static void match(const struct strmatch *s, const char *p, size_t len, uint64_t count[KEYS])
{
	size_t i = 0;
	while (i < len) {
		while (i < len && (p[i] < 'a' || p[i] > 'z'))
			i++;
		size_t start = i;
		while (i < len && p[i] >= 'a' && p[i] <= 'z')
			i++;
		if (i == start)
			continue;
		uint64_t h = fnv1a(p + start, i - start);
		for (int k = 0; k < KEYS; k++) {
			uint32_t r = key_rank[k];
			if (h == s->hash[k] && i - start == s->v.len[r] &&
			    !memcmp(p + start, s->v.text + s->v.off[r], i - start))
				count[k]++;
		}
	}
}

static int strmatch_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	const struct strmatch *s = r->data;
	long first, last;
	app_share(TEXT_CHUNKS, r->nworkers, w->index, &first, &last);
	uint64_t count[KEYS + 1] = {0}; /* and the words, to check that all were seen */
	char *buf = NULL;
	size_t cap = 0;
	for (long c = first; c < last; c++) {
		long n, len = vocab_chunk(&s->v, 0x7374726d61ull, r->size, (int)c, &buf, &cap, &n);
		if (len < 0) {
			free(buf);
			return app_fail(w, "out of memory for chunk %ld of the text", c);
		}
		match(s, buf, (size_t)len, count);
		count[KEYS] += (uint64_t)n;
	}
	free(buf);
	return app_buf_put(out, count, sizeof count) == 0 ? 0 : app_fail(w, "out of memory");
}

static int strmatch_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	uint64_t all[KEYS + 1] = {0};
	for (int i = 0; i < r->nworkers; i++) {
		if (parts[i].len != sizeof all)
			return app_run_fail(r, "worker %d returned %zu bytes, not its counts", i, parts[i].len);
		const uint64_t *c = (const uint64_t *)parts[i].data;
		for (int k = 0; k <= KEYS; k++)
			all[k] += c[k];
	}
	if (all[KEYS] != (uint64_t)r->size)
		return app_run_fail(r, "searched %llu words, not %ld", (unsigned long long)all[KEYS], r->size);
	uint64_t h = 0;
	for (int k = 0; k < KEYS; k++)
		h = app_mix64(h ^ all[k]);
	*checksum = h;
	return 0;
}

OSLENS_APP(strmatch) = {
	.name = "strmatch",
	.summary = "PHOENIX string_match: four key words hashed and looked for in an in-memory Zipf text; computation",
	.kind = APP_COMPUTE,
	.size_unit = "words",
	.default_size = 20000000,
	.min_size = 1,
	.max_size = 1L << 28,
	.setup = strmatch_setup,
	.work = strmatch_work,
	.merge = strmatch_merge,
};
