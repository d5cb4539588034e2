/* The loader of blkio.bpf.c (see blkio.h): for one repetition of
 * `run --completions`, counts where the target's I/Os were submitted and
 * completed, and writes one `completions` record. */
#include "blkio.h"
#include "../json.h"
#include "loader.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "blkio.skel.h"

static struct blkio_bpf *skel;

/* A partition's whole disk, from sysfs; the device itself otherwise. */
static uint32_t whole_disk(unsigned maj, unsigned min)
{
	char path[128], dev[32];
	snprintf(path, sizeof path, "/sys/dev/block/%u:%u/partition", maj, min);
	if (access(path, F_OK) != 0)
		return BLKIO_MKDEV(maj, min);
	snprintf(path, sizeof path, "/sys/dev/block/%u:%u/../dev", maj, min);
	FILE *f = fopen(path, "r");
	unsigned pmaj, pmin;
	int ok = f && fgets(dev, sizeof dev, f) && sscanf(dev, "%u:%u", &pmaj, &pmin) == 2;
	if (f)
		fclose(f);
	return ok ? BLKIO_MKDEV(pmaj, pmin) : BLKIO_MKDEV(maj, min);
}

int blkio_bpf_start(uint64_t dev, char *why, size_t whylen)
{
	blkio_bpf_stop();
	loader_init();
	if (loader_check_usable(why, whylen) != 0)
		return -1;
	skel = blkio_bpf__open();
	if (!skel) {
		snprintf(why, whylen, "cannot open the BPF object: %s", strerror(errno));
		return -1;
	}
	skel->rodata->dev_part = BLKIO_MKDEV(major(dev), minor(dev));
	skel->rodata->dev_disk = whole_disk(major(dev), minor(dev));
	int err = blkio_bpf__load(skel);
	if (err) {
		loader_load_failed(err, why, whylen);
		blkio_bpf_stop();
		return -1;
	}
	if ((err = blkio_bpf__attach(skel)) != 0) {
		snprintf(why, whylen, "cannot attach to the block tracepoints: %s", strerror(-err));
		blkio_bpf_stop();
		return -1;
	}
	return 0;
}

void blkio_bpf_window(uint64_t start_ns, uint64_t end_ns)
{
	if (!skel)
		return;
	/* the end first, as explain_bpf_window: until the start is stored the
	 * window stays closed, never [start, open) with the initial end 0
	 * (which puts window_end in .bss, window_start in .data) */
	__atomic_store_n(&skel->bss->window_end, end_ns, __ATOMIC_SEQ_CST);
	__atomic_store_n(&skel->data->window_start, start_ns, __ATOMIC_SEQ_CST);
}

/* Events the kernel did not deliver to a program because a BPF program was
 * already running on that CPU (bpf_prog_info.recursion_misses). */
static uint64_t missed_events(void)
{
	uint64_t missed = 0;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, skel->obj)
	{
		struct bpf_prog_info info = {0};
		uint32_t len = sizeof info;
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0)
			missed += info.recursion_misses;
	}
	return missed;
}

void blkio_bpf_emit(int rep)
{
	if (!skel)
		return;
	struct json *j = json_record("completions");
	json_int(j, "rep", rep);
	json_bool(j, "available", 1);
	json_str(j, "source", "BPF raw_tp: block_bio_queue -> block_rq_complete | block_bio_complete, by struct bio");
	json_uint(j, "missed", missed_events());
	uint64_t unseen = 0;
	json_arr(j, "cpus");
	int fd = bpf_map__fd(skel->maps.cpus);
	int n = libbpf_num_possible_cpus(); /* the ids the kernel can give: < 0 on error */
	for (uint32_t cpu = 0; n > 0 && cpu < (uint32_t)n && cpu < BLKIO_MAX_CPUS; cpu++) {
		struct blkio_cpu c;
		if (bpf_map_lookup_elem(fd, &cpu, &c) != 0 || (!c.submitted && !c.completed))
			continue;
		json_obj(j, NULL);
		json_int(j, "cpu", (int)cpu);
		json_uint(j, "submitted", c.submitted);
		json_uint(j, "completed", c.completed);
		json_uint(j, "local", c.local);
		json_end(j);
		unseen += c.unseen;
	}
	json_end(j);
	json_uint(j, "unseen", unseen);
	json_emit(j);
}

void blkio_bpf_stop(void)
{
	blkio_bpf__destroy(skel);
	skel = NULL;
}
