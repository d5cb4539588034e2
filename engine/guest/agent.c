/* The agent: PID 1 of a KVM guest that `--in kvm` boots from an initramfs
 * (src/oslens/envs/kvm.py makes it). It mounts what the engine reads
 * (/proc, /sys, tracefs, debugfs, bpffs), loads the modules the host listed
 * for the guest's network card, brings the network up at QEMU's user-mode
 * address, and serves: each connection that opens with the guest's key is
 * one command (an engine invocation, @facts, @tally or @kallsyms), run with its output
 * framed back (wire.h); any other is refused with nothing run. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../json.h"
#include "../textfile.h"
#include "wire.h"

#define GUEST_ADDR "10.0.2.15" /* QEMU user networking's first guest address */
#define GUEST_MASK "255.255.255.0"
#define MODULES_LIST "/oslens/modules"
/* How long a connection may take to present the key: oslens's relay sends
 * it at once; anyone else's connection holds a process here no longer. */
#define KEY_WAIT_S 10

/* The host's half, then the guest's; without one, every connection is refused. */
static unsigned char guest_key[2 * GUEST_KEY_LEN];
static int have_key;

/* What the sessions did, shared by them all (each is a forked child):
 * commands begun, connections refused. @tally reports them. */
struct tally {
	_Atomic long run, refused;
};
static struct tally *tally;

static void say(const char *fmt, const char *arg, int err)
{
	dprintf(2, "oslens-guest: ");
	dprintf(2, fmt, arg);
	dprintf(2, err ? ": %s\n" : "\n", strerror(err));
}

static void mount_all(void)
{
	static const struct {
		const char *type, *dir;
	} fs[] = {
		{"devtmpfs", "/dev"},
		{"proc", "/proc"},
		{"sysfs", "/sys"},
		{"tmpfs", "/tmp"},
		{"tmpfs", "/dev/shm"},
		{"tracefs", "/sys/kernel/tracing"},
		{"debugfs", "/sys/kernel/debug"},
		{"bpf", "/sys/fs/bpf"},
		{"cgroup2", "/sys/fs/cgroup"},
	};
	for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
		mkdir(fs[i].dir, 0755);
		if (mount(fs[i].type, fs[i].dir, fs[i].type, 0, NULL) && errno != EBUSY)
			say("mounting %s", fs[i].dir, errno);
	}
	chmod("/tmp", 01777);
}

/* The modules the host resolved for this kernel, dependencies first. */
static void load_modules(void)
{
	FILE *f = fopen(MODULES_LIST, "r");
	char path[512];
	if (!f)
		return;
	while (fgets(path, sizeof path, f)) {
		path[strcspn(path, "\n")] = 0;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST))
			say("loading %s", path, errno);
		if (fd >= 0)
			close(fd);
	}
	fclose(f);
}

/* The key the host built into the initramfs, taken out of the file system
 * so that no command run here can read it there. */
static void load_key(void)
{
	int fd = open(GUEST_KEY_FILE, O_RDONLY | O_CLOEXEC);
	have_key = fd >= 0 && read(fd, guest_key, sizeof guest_key) == (ssize_t)sizeof guest_key;
	if (!have_key)
		say("no key in %s: every connection will be refused", GUEST_KEY_FILE, 0);
	if (fd >= 0)
		close(fd);
	unlink(GUEST_KEY_FILE);
}

/* The connection's first frame is the host's half of the key, within
 * KEY_WAIT_S (SIGALRM ends this session otherwise), answered with the
 * guest's. Anything else is answered REFUSED alone; what the peer sent after
 * it is read and dropped until it closes, so that the answer is not lost to
 * a reset. */
static int key_accepted(int conn)
{
	char type, key[GUEST_KEY_LEN];
	alarm(KEY_WAIT_S);
	long len = frame_recv_at_most(conn, &type, key, sizeof key);
	if (have_key && len == GUEST_KEY_LEN && type == FRAME_KEY && same_key(key, (char *)guest_key)) {
		alarm(0);
		return frame_send(conn, FRAME_KEY, guest_key + GUEST_KEY_LEN, GUEST_KEY_LEN) == 0;
	}
	tally->refused++;
	frame_send(conn, FRAME_REFUSED, "", 0);
	shutdown(conn, SHUT_WR);
	while (read(conn, key, sizeof key) > 0)
		;
	return 0;
}

static int if_set(int s, const char *name, unsigned long req, const char *addr)
{
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
	if (addr) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &sin->sin_addr);
	} else {
		if (ioctl(s, SIOCGIFFLAGS, &ifr))
			return -1;
		ifr.ifr_flags |= IFF_UP;
	}
	return ioctl(s, req, &ifr);
}

static void network_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (if_set(s, "lo", SIOCSIFFLAGS, NULL))
		say("bringing up %s", "lo", errno);
	if (if_set(s, "eth0", SIOCSIFADDR, GUEST_ADDR) || if_set(s, "eth0", SIOCSIFNETMASK, GUEST_MASK) ||
	    if_set(s, "eth0", SIOCSIFFLAGS, NULL))
		say("configuring %s", "eth0", errno);
	close(s);
}

/* @facts: the guest as it sees itself, for the run's metadata. */
static void facts(void)
{
	struct utsname u;
	uname(&u);
	struct json *j = json_record("guest");
	json_obj(j, "kernel");
	json_str(j, "release", u.release);
	json_str(j, "version", u.version);
	json_str(j, "machine", u.machine);
	char *cmdline = read_text_file("/proc/cmdline", 0);
	if (cmdline) {
		cmdline[strcspn(cmdline, "\n")] = 0;
		json_str(j, "cmdline", cmdline);
		free(cmdline);
	}
	json_end(j);
	json_int(j, "cpus_online", sysconf(_SC_NPROCESSORS_ONLN));
	json_int(j, "mem_total_kib", (long long)sysconf(_SC_PHYS_PAGES) * (sysconf(_SC_PAGESIZE) / 1024));
	json_bool(j, "btf", access("/sys/kernel/btf/vmlinux", R_OK) == 0);
	json_emit(j);
}

/* @tally: the commands begun (this one among them) and the connections
 * refused since the guest booted. */
static void report_tally(void)
{
	struct json *j = json_record("tally");
	json_int(j, "run", tally->run);
	json_int(j, "refused", tally->refused);
	json_emit(j);
}

/* @kallsyms: the guest kernel's symbols, so that the host names the kernel
 * addresses the engine sampled here by this kernel's text (its own build
 * and KASLR offset), never by the host's. */
static int copy_kallsyms(void)
{
	int fd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		say("reading %s", "/proc/kallsyms", errno);
		return 1;
	}
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (write(1, buf, (size_t)n) != n)
			return 1;
	close(fd);
	return n < 0;
}

static void pump(int *from, int to, char type)
{
	char buf[65536];
	ssize_t n = read(*from, buf, sizeof buf);
	if (n > 0) {
		frame_send(to, type, buf, (size_t)n);
		return;
	}
	if (n < 0 && errno == EINTR)
		return;
	close(*from);
	*from = -1;
}

/* One connection: one command, its output framed back as it comes. */
static int session(int conn)
{
	static char buf[GUEST_MAX_FRAME];
	char type, *argv[256];
	int argc = 0, out[2], err[2];
	signal(SIGPIPE, SIG_IGN); /* a relay gone mid-frame is seen as a write error */
	if (!key_accepted(conn))
		return 1;
	long len = frame_recv(conn, &type, buf);
	if (len <= 0 || type != FRAME_ARGV || buf[len - 1] != 0)
		return 1;
	for (char *p = buf; p < buf + len && argc < 255; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return 1;
	tally->run++;
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL); /* ignored by the session only: exec would keep it ignored */
		dup2(out[1], 1);
		dup2(err[1], 2);
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		setsid();
		if (chdir("/tmp")) {
			/* stays at / */
		}
		if (!strcmp(argv[0], "@facts")) {
			facts();
			_exit(0);
		}
		if (!strcmp(argv[0], "@kallsyms"))
			_exit(copy_kallsyms());
		if (!strcmp(argv[0], "@tally")) {
			report_tally();
			_exit(0);
		}
		execv(argv[0], argv);
		dprintf(2, "oslens-guest: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	int relay = conn; /* -1 once the relay is gone */
	while (out[0] >= 0 || err[0] >= 0) {
		struct pollfd p[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {relay, POLLIN, 0}};
		if (poll(p, 3, -1) < 0)
			continue;
		if (p[0].revents)
			pump(&out[0], conn, FRAME_STDOUT);
		if (p[1].revents)
			pump(&err[0], conn, FRAME_STDERR);
		if (p[2].revents) {
			len = frame_recv(conn, &type, buf);
			if (len == 4 && type == FRAME_SIGNAL) {
				kill(pid, (int)frame_u32(buf));
			} else if (len < 0) { /* the relay is gone: so is its command */
				kill(-pid, SIGKILL);
				kill(pid, SIGKILL);
				relay = -1;
			}
		}
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	frame_send_u32(conn, FRAME_EXIT, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return 0;
}

static void reap(int sig)
{
	(void)sig;
	int saved = errno;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int agent_main(void)
{
	mount_all();
	load_key();
	tally = mmap(NULL, sizeof *tally, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (tally == MAP_FAILED) {
		say("mapping %s", "the tally", errno);
		reboot(RB_POWER_OFF);
	}
	load_modules();
	network_up();
	struct sigaction sa = {.sa_handler = reap, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigaction(SIGCHLD, &sa, NULL);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(GUEST_PORT)};
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 64)) {
		say("listening on port %s", "5501", errno);
		reboot(RB_POWER_OFF);
	}
	dprintf(2, "oslens-guest: ready\n");
	for (;;) {
		int conn = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			continue;
		setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pid_t pid = fork();
		if (pid == 0) {
			signal(SIGCHLD, SIG_DFL);
			close(s);
			_exit(session(conn));
		}
		close(conn);
	}
}
