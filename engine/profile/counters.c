/* See counters.h. Each hardware event is opened twice, once counting only
 * user mode (exclude_kernel) and once only kernel mode (exclude_user), as
 * the OS-share-of-instructions studies did; a VM without a virtual PMU
 * refuses them all, which is reported with the errno, never as zero. */
#include "counters.h"
#include "../json.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

enum scope { ALL, USER, KERNEL };
static const char *const scope_names[] = {"all", "user", "kernel"};

struct event {
	const char *name;
	uint32_t type;
	uint64_t config;
	int hardware; /* opened per privilege level */
};

#define CACHE(id, op, res) ((id) | ((op) << 8) | ((res) << 16))

static const struct event events[] = {
	{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 0},
	{"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, 0},
	{"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, 0},
	{"page-faults-min", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, 0},
	{"page-faults-maj", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, 0},
	{"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 1},
	{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 1},
	{"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, 1},
	{"L1-icache-misses", PERF_TYPE_HW_CACHE,
	 CACHE(PERF_COUNT_HW_CACHE_L1I, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS), 1},
	{"iTLB-misses", PERF_TYPE_HW_CACHE,
	 CACHE(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ, PERF_COUNT_HW_CACHE_RESULT_MISS), 1},
};
#define NEVENTS (sizeof events / sizeof events[0])

struct counter {
	const struct event *ev;
	enum scope scope;
	int *fds; /* one per task */
	int nfds;
	int err;       /* errno of the first refusal, 0 if all opened */
	int user_only; /* refused at all levels, counted with exclude_kernel */
};

static struct counter counters[NEVENTS * 2];
static int ncounters;

static int paranoid(void)
{
	int v = 2;
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 2;
		fclose(f);
	}
	return v;
}

static void open_one(struct counter *c, const pid_t *tids, int ntids, int on_exec)
{
	c->fds = calloc(ntids, sizeof *c->fds);
	if (!c->fds) {
		c->err = ENOMEM;
		return;
	}
	for (int i = 0; i < ntids; i++) {
		struct perf_event_attr attr = {
			.type = c->ev->type,
			.size = sizeof attr,
			.config = c->ev->config,
			.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
			.disabled = 1,
			.inherit = 1,
			.enable_on_exec = on_exec,
			.exclude_kernel = c->scope == USER || c->user_only,
			.exclude_user = c->scope == KERNEL,
			.exclude_hv = c->scope != ALL || c->user_only,
		};
		int fd = (int)syscall(SYS_perf_event_open, &attr, tids[i], -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			/* a thread that just exited is no refusal */
			if (errno != ESRCH && !c->err)
				c->err = errno;
			continue;
		}
		c->fds[c->nfds++] = fd;
		if (!on_exec)
			ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	}
}

void counters_open(const pid_t *tids, int ntids, int on_exec)
{
	ncounters = 0;
	for (size_t e = 0; e < NEVENTS; e++)
		for (int s = events[e].hardware ? USER : ALL; s <= (events[e].hardware ? KERNEL : ALL); s++) {
			struct counter *c = &counters[ncounters++];
			*c = (struct counter){.ev = &events[e], .scope = s};
			open_one(c, tids, ntids, on_exec);
			/* perf_event_paranoid=2 lets a user count its own tasks
			 * in user mode only (as `perf stat` falls back to): so
			 * does a software event refused at all levels. */
			if (c->scope == ALL && !c->nfds && (c->err == EACCES || c->err == EPERM)) {
				free(c->fds);
				*c = (struct counter){.ev = &events[e], .scope = s, .user_only = 1};
				open_one(c, tids, ntids, on_exec);
			}
		}
}

static void why_not(const struct counter *c, char *buf, size_t len)
{
	switch (c->err) {
	case ENOENT:
	case EOPNOTSUPP:
	case ENODEV:
		snprintf(buf, len, "not supported by this CPU or hypervisor (perf_event_open: %s)", strerror(c->err));
		break;
	case EACCES:
	case EPERM:
		if (c->scope == KERNEL)
			snprintf(
				buf, len,
				"not permitted (perf_event_paranoid=%d; kernel-mode counting needs CAP_PERFMON or root)",
				paranoid());
		else
			snprintf(buf, len, "not permitted (perf_event_paranoid=%d; needs CAP_PERFMON or root)",
				 paranoid());
		break;
	default: snprintf(buf, len, "perf_event_open: %s", strerror(c->err));
	}
}

void counters_emit_and_close(void)
{
	struct json *j = json_record("counters");
	json_arr(j, "events");
	for (int i = 0; i < ncounters; i++) {
		struct counter *c = &counters[i];
		uint64_t value = 0, enabled = 0, running = 0;
		int nread = 0;
		for (int k = 0; k < c->nfds; k++) {
			uint64_t v[3];
			if (read(c->fds[k], v, sizeof v) == (ssize_t)sizeof v) {
				/* multiplexed: scale to the time the counter was enabled */
				value += v[2] ? (uint64_t)((double)v[0] * v[1] / v[2]) : 0;
				enabled += v[1];
				running += v[2];
				nread++;
			}
			close(c->fds[k]);
		}
		free(c->fds);
		json_obj(j, NULL);
		json_str(j, "name", c->ev->name);
		json_str(j, "scope", scope_names[c->scope]);
		if (c->user_only) {
			char why[96];
			snprintf(why, sizeof why, "user only: perf_event_paranoid=%d", paranoid());
			json_str(j, "scope_limited", why);
		} else {
			json_null(j, "scope_limited");
		}
		if (nread && !c->err) {
			json_uint(j, "value", value);
			json_uint(j, "enabled_ns", enabled);
			json_uint(j, "running_ns", running);
			json_null(j, "error");
		} else {
			char why[256];
			if (!c->err)
				snprintf(why, sizeof why, "no task to count (they exited before the counters opened)");
			else
				why_not(c, why, sizeof why);
			json_null(j, "value");
			json_str(j, "error", why);
		}
		json_end(j);
	}
	json_end(j);
	json_emit(j);
	ncounters = 0;
}
