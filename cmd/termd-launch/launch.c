//go:build linux && cgo

// termd-launch: confine one execution between fork and exec, then exec it.
//
// This runs from the binary's entry point (tlentry, below), before the C
// library and the Go runtime start: a Go program costs several milliseconds
// of runtime start-up per execution, the static C library's start about 1 ms
// of CPU (freestanding.h), this costs what exec of a program with no start-up
// at all costs.
// The daemon (package daemon/sandbox) builds everything that needs thought:
// the Landlock ruleset from descriptors it opened, the seccomp program, the
// list of mounts. This file only applies them, in order, and refuses to exec
// the command when any step fails: it never runs a command with less
// confinement than it was told. The protocol is in
// daemon/sandbox/launcher/config.go.

#include "freestanding.h"

#define CONFIG_FD 3
#define REPORT_FD 4
#define EXIT_CONFIG 125
#define EXIT_CONFINE 126
#define MAX_CONFIG (8 << 20)
#define FIRST_FD 5
#define MAX_PASSED_FDS 16

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#define MOUNT_ATTR_NOEXEC 0x00000008
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x00000001
#define FSMOUNT_CLOEXEC 0x00000001
#define FSCONFIG_SET_STRING 1
#define FSCONFIG_CMD_CREATE 6
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#endif
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

struct tl_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};
struct tl_open_how {
	uint64_t flags, mode, resolve;
};

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (n >= (int)sizeof msg)
		n = sizeof msg - 1;
	if (write(REPORT_FD, msg, n) < 0) {
		/* nowhere to say it: the exit status tells */
	}
	_exit(EXIT_CONFINE);
}

// The configuration: NUL-terminated key, NUL-terminated value, repeated.
struct config {
	char *path;
	char **argv, **env;
	int nargv, nenv;
	char **mount_kind, **mount_path;
	int nmounts, nkinds;
	int userns;
	int userns_fd; // idmapped mounts and the command's user namespace, or -1
	int netns_fd;  // a network namespace to join first (a workspace loopback), or -1
	int new_mountns;
	int say_confined;
	char *cwd;
	int set_nice, nice;
	int set_cred;
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	int ngroups;
	int drop_caps, no_new_privs, ruleset_fd;
	struct sock_filter *filter;
	int nfilter;
	int hold_filter; // install the filter with a listener and pass it to termd
	int filter_fd;   // that listener, or -1
};

// read_full reads exactly n bytes; 0 at a clean end of file before the first
// byte, else fails.
static int read_full(int fd, char *buf, size_t n) {
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("launcher: reading the configuration: %s", strerror(errno));
		if (r == 0) {
			if (got == 0)
				return 0;
			fail("launcher: the configuration is truncated");
		}
		got += r;
	}
	return 1;
}

// receive_config is how a launcher gets its execution: on the socket at
// CONFIG_FD, a 4-byte little-endian length carrying the per-plan descriptors
// (SCM_RIGHTS, moved to FIRST_FD on in order; a launcher started for its
// execution inherits them there and is passed none), then that many bytes of
// configuration. The end of file instead means termd let this launcher go
// (or died): exit without doing anything.
static char *receive_config(size_t *len) {
	unsigned char hdr[4];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * MAX_PASSED_FDS)];
	} ctl;
	struct iovec iov = {.iov_base = hdr, .iov_len = sizeof hdr};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	ssize_t r;
	do
		r = recvmsg(CONFIG_FD, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		_exit(EXIT_CONFIG);
	if (r < 0)
		fail("launcher: receiving the configuration: %s", strerror(errno));
	if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC))
		fail("launcher: more than %d descriptors were passed", MAX_PASSED_FDS);
	int fds[MAX_PASSED_FDS], nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < n && nfds < MAX_PASSED_FDS; i++)
			memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if ((size_t)r < sizeof hdr && read_full(CONFIG_FD, (char *)hdr + r, sizeof hdr - r) == 0)
		fail("launcher: the configuration is truncated");
	// Out of the way first (a received descriptor may sit where another
	// must go), then into place: the configuration names them FIRST_FD + n.
	for (int i = 0; i < nfds; i++) {
		int high = fcntl(fds[i], F_DUPFD_CLOEXEC, FIRST_FD + MAX_PASSED_FDS);
		if (high < 0)
			fail("launcher: moving a passed descriptor: %s", strerror(errno));
		close(fds[i]);
		fds[i] = high;
	}
	for (int i = 0; i < nfds; i++) {
		if (dup2(fds[i], FIRST_FD + i) < 0)
			fail("launcher: placing a passed descriptor: %s", strerror(errno));
		close(fds[i]);
	}
	size_t n = (size_t)hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
	if (n == 0 || n > MAX_CONFIG)
		fail("launcher: a configuration of %zu bytes", n);
	char *buf = malloc(n);
	if (!buf)
		fail("launcher: out of memory");
	if (read_full(CONFIG_FD, buf, n) == 0)
		fail("launcher: the configuration is truncated");
	*len = n;
	return buf;
}

// confined tells termd (when the configuration says say_confined) that the
// launcher has confined itself and waits for the go-ahead: the byte 'c' on
// the socket. termd opens the mount namespace the
// launcher made (so that it, not the command's exit, tears it down) before it
// sends 'g'. A termd that has let the launcher go reads nothing: no SIGPIPE.
static void confined(void) {
	ssize_t r;
	do
		r = send(CONFIG_FD, "c", 1, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
}

// await_go blocks until termd says the command may run: one byte "g" once
// the execution's intent is durable. The end of file (termd could not record
// the intent, or died) means nothing runs.
static void await_go(void) {
	char b = 0;
	ssize_t r;
	do
		r = read(CONFIG_FD, &b, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1 || b != 'g')
		_exit(EXIT_CONFIG);
}

// hand_filter passes termd the seccomp filter's listener (the byte 'f'
// carrying it by SCM_RIGHTS) and closes it here: while termd holds it, the
// filter outlives the command, whose exit would otherwise free the filter's
// program (a kernel worker that ran in the exit's way, before termd was
// told). The filter never answers SECCOMP_RET_USER_NOTIF: nothing is ever
// notified on it. Not sent (termd let the launcher go): nothing is lost.
static void hand_filter(int fd) {
	char b = 'f';
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof ctl);
	struct iovec iov = {.iov_base = &b, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	ssize_t r;
	do
		r = sendmsg(CONFIG_FD, &msg, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	close(fd);
}

static void push(char ***v, int *n, char *s) {
	*v = realloc(*v, sizeof(char *) * (*n + 2));
	if (!*v)
		fail("launcher: out of memory");
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

static long number(const char *key, const char *s) {
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *s == 0 || *end != 0)
		fail("launcher: %s=%s is not a number", key, s);
	return v;
}

// id reads a uid or gid: 0 to 4294967294. The value 4294967295 is (uid_t)-1,
// which setresuid and setresgid take as "leave unchanged": a command would
// keep the launcher's identity (root) while termd believes it switched.
static uint32_t id(const char *key, const char *s) {
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *s < '0' || *s > '9' || *end != 0 || v >= 0xffffffffULL)
		fail("launcher: %s=%s is not a valid id (0 to 4294967294; -1 and 4294967295 mean \"unchanged\" to the kernel)", key, s);
	return (uint32_t)v;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static void parse(char *buf, size_t len, struct config *c) {
	memset(c, 0, sizeof *c);
	int have_gid = 0;
	c->ruleset_fd = -1;
	c->filter_fd = -1;
	c->userns_fd = -1;
	c->netns_fd = -1;
	size_t i = 0;
	while (i < len) {
		char *key = buf + i;
		char *kend = memchr(key, 0, len - i);
		if (!kend || kend + 1 >= buf + len)
			fail("launcher: configuration is truncated");
		char *val = kend + 1;
		char *vend = memchr(val, 0, buf + len - val);
		if (!vend)
			fail("launcher: configuration is truncated");
		i = vend + 1 - buf;
		if (!strcmp(key, "path")) {
			c->path = val;
		} else if (!strcmp(key, "arg")) {
			push(&c->argv, &c->nargv, val);
		} else if (!strcmp(key, "env")) {
			push(&c->env, &c->nenv, val);
		} else if (!strcmp(key, "readonly") || !strcmp(key, "hide") || !strcmp(key, "idmap") || !strcmp(key, "pin")) {
			push(&c->mount_kind, &c->nkinds, key);
			push(&c->mount_path, &c->nmounts, val);
		} else if (!strcmp(key, "uid")) {
			c->set_cred = 1;
			c->uid = id(key, val);
		} else if (!strcmp(key, "gid")) {
			have_gid = 1;
			c->gid = id(key, val);
		} else if (!strcmp(key, "group")) {
			c->groups = realloc(c->groups, sizeof(gid_t) * (c->ngroups + 1));
			if (!c->groups)
				fail("launcher: out of memory");
			c->groups[c->ngroups++] = id(key, val);
		} else if (!strcmp(key, "userns")) {
			c->userns = 1;
		} else if (!strcmp(key, "userns_fd")) {
			c->userns_fd = number(key, val);
		} else if (!strcmp(key, "netns_fd")) {
			c->netns_fd = number(key, val);
		} else if (!strcmp(key, "say_confined")) {
			c->say_confined = 1;
		} else if (!strcmp(key, "hold_filter")) {
			c->hold_filter = 1;
		} else if (!strcmp(key, "mountns")) {
			c->new_mountns = 1;
		} else if (!strcmp(key, "cwd")) {
			c->cwd = val;
		} else if (!strcmp(key, "nice")) {
			c->set_nice = 1;
			c->nice = number(key, val);
		} else if (!strcmp(key, "drop_caps")) {
			c->drop_caps = 1;
		} else if (!strcmp(key, "no_new_privs")) {
			c->no_new_privs = 1;
		} else if (!strcmp(key, "ruleset_fd")) {
			c->ruleset_fd = number(key, val);
		} else if (!strcmp(key, "seccomp")) {
			size_t h = strlen(val);
			if (h % 16)
				fail("launcher: seccomp program has a bad length");
			// struct sock_fprog's length is 16 bits: a longer program would
			// be cut short silently. The kernel takes at most BPF_MAXINSNS.
			if (h / 16 == 0 || h / 16 > BPF_MAXINSNS)
				fail("launcher: a seccomp program of %zu instructions (the kernel takes 1 to %d)", h / 16, BPF_MAXINSNS);
			c->nfilter = h / 16;
			c->filter = calloc(c->nfilter, sizeof(struct sock_filter));
			if (!c->filter)
				fail("launcher: out of memory");
			for (int k = 0; k < c->nfilter; k++) {
				unsigned char b[8];
				for (int j = 0; j < 8; j++) {
					int hi = hexval(val[k * 16 + j * 2]), lo = hexval(val[k * 16 + j * 2 + 1]);
					if (hi < 0 || lo < 0)
						fail("launcher: seccomp program is not hex");
					b[j] = hi << 4 | lo;
				}
				// code (u16 LE), jt, jf, k (u32 LE)
				c->filter[k].code = b[0] | b[1] << 8;
				c->filter[k].jt = b[2];
				c->filter[k].jf = b[3];
				c->filter[k].k = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
			}
		} else {
			fail("launcher: unknown configuration key %s (termd and termd-launch are from different builds?)", key);
		}
	}
	if (!c->path || c->nargv == 0)
		fail("launcher: the configuration names no command");
	// Credentials come whole: a uid alone would run the command with the
	// launcher's gid (0 under a root termd), a gid or groups alone would be
	// ignored.
	if (c->set_cred != have_gid || (c->ngroups > 0 && !c->set_cred))
		fail("launcher: the configuration sets %s without %s (both uid and gid are needed)", c->set_cred ? "uid" : (have_gid ? "gid" : "groups"), c->set_cred ? "gid" : "uid");
	if (!c->env) {
		c->env = calloc(1, sizeof(char *));
		if (!c->env)
			fail("launcher: out of memory");
	}
}

static int empty_tmpfs(void) {
	int fs = syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "nr_inodes", "1", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		close(fs);
		return -1;
	}
	int m = syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	close(fs);
	return m;
}

// not_a_link returns fd, or closes it and fails with ELOOP when it is a
// symbolic link: under O_PATH | O_NOFOLLOW a link at the end of the path is
// opened as itself (openat2's RESOLVE_NO_SYMLINKS included), and a cover
// mounted on it would protect the link, not what was at the path.
static int not_a_link(int fd) {
	struct stat st;
	int e = fstat(fd, &st) < 0 ? errno : (S_ISLNK(st.st_mode) ? ELOOP : 0);
	if (!e)
		return fd;
	close(fd);
	errno = e;
	return -1;
}

// open_nofollow opens the absolute path as O_PATH without following a
// symbolic link anywhere in it. Where openat2 is refused (systemd's
// RestrictSUIDSGID= answers it ENOSYS, since a filter cannot read its
// open_how), it walks the path one component at a time: a component that
// is a symbolic link (opened as itself under O_NOFOLLOW) or ".." is ELOOP.
static int open_nofollow(const char *path) {
	struct tl_open_how how = {.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	int fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
	if (fd >= 0)
		return not_a_link(fd);
	if (errno != ENOSYS && errno != EPERM)
		return fd;
	if (path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	char *copy = strdup(path);
	if (!copy) {
		errno = ENOMEM;
		return -1;
	}
	int dir = open("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
	char *save = NULL;
	for (char *c = strtok_r(copy, "/", &save); dir >= 0 && c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "..")) {
			close(dir);
			dir = -1;
			errno = ELOOP;
			break;
		}
		if (!strcmp(c, "."))
			continue;
		int next = openat(dir, c, O_PATH | O_CLOEXEC | O_NOFOLLOW);
		int e = errno;
		close(dir);
		dir = next >= 0 ? not_a_link(next) : -1;
		if (next < 0)
			errno = e;
	}
	int e = errno;
	free(copy);
	errno = e;
	return dir;
}

// A cover: what apply_mount put over one path, known by its mount's id and
// its root's inode, so that covered() can tell whether the path, resolved
// again, leads to it.
struct cover {
	enum { COVER_ABSENT, COVER_MOUNTED, COVER_LOST } state;
	uint64_t mnt_id, ino;
	uint32_t dev_major, dev_minor;
};

// identify reads the mount id and inode of what fd refers to.
static int identify(int fd, struct statx *sx) {
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_MNT_ID, sx) < 0)
		return -1;
	if (!(sx->stx_mask & STATX_MNT_ID)) {
		errno = ENOSYS; // before Linux 5.8
		return -1;
	}
	return 0;
}

// apply_mount opens path without following any symbolic link and covers it:
// "readonly" binds it onto itself read-only, "hide" puts an empty read-only
// directory (or /dev/null for a file) over it, "idmap" binds it onto itself
// through the user namespace userns_fd's mapping (a file the command, uid 0
// inside that namespace, creates there is owned by uid 0 on the disk), "pin"
// binds it onto itself unchanged (a mount point cannot be renamed or removed
// in its mount namespace). It records in *cv what it mounted, that the path was absent, or that what
// it opened was removed before the mount could land on it.
static void apply_mount(const char *kind, const char *path, int userns_fd, struct cover *cv) {
	cv->state = COVER_ABSENT;
	int target = open_nofollow(path);
	if (target < 0 && errno == ENOENT)
		return; // gone since the plan was checked: nothing to cover
	if (target < 0)
		fail("sandbox: opening %s to protect it (a symbolic link in its path is refused): %s", path, strerror(errno));
	struct stat st;
	if (fstat(target, &st) < 0)
		fail("sandbox: stat %s: %s", path, strerror(errno));
	int tree;
	struct tl_mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	const char *doing = "making it read-only";
	if (!strcmp(kind, "idmap")) {
		if (userns_fd < 0)
			fail("sandbox: an idmapped mount of %s without a user namespace", path);
		attr = (struct tl_mount_attr){.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns_fd};
		doing = "idmapping it (its file system must support idmapped mounts, Linux 5.12 or later)";
	}
	if (!strcmp(kind, "readonly") || !strcmp(kind, "idmap") || !strcmp(kind, "pin"))
		tree = syscall(SYS_open_tree, target, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	else if (S_ISDIR(st.st_mode))
		tree = empty_tmpfs();
	else
		tree = syscall(SYS_open_tree, AT_FDCWD, "/dev/null", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		fail("sandbox: preparing the %s mount for %s: %s", kind, path, strerror(errno));
	if (strcmp(kind, "pin") && syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
		fail("sandbox: the %s mount of %s: %s: %s", kind, path, doing, strerror(errno));
	// ENOENT: what was opened has been removed or renamed over since (a
	// mount point must have a name); the next round opens the path again.
	struct statx sx;
	cv->state = COVER_LOST;
	if (syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0) {
		if (identify(tree, &sx) < 0)
			fail("sandbox: identifying the cover over %s (Linux 5.8 or later is needed): %s", path, strerror(errno));
		*cv = (struct cover){COVER_MOUNTED, sx.stx_mnt_id, sx.stx_ino, sx.stx_dev_major, sx.stx_dev_minor};
	} else if (errno != ENOENT)
		fail("sandbox: mounting over %s: %s", path, strerror(errno));
	close(tree);
	close(target);
}

// covered says whether path, resolved again now, leads to the root of the
// cover apply_mount made for it (the topmost mount there), or is still
// absent when it was absent then.
static int covered(const char *path, const struct cover *cv) {
	int fd = open_nofollow(path);
	if (fd < 0)
		return cv->state == COVER_ABSENT && errno == ENOENT;
	struct statx sx;
	int ok = cv->state == COVER_MOUNTED && identify(fd, &sx) == 0 && sx.stx_mnt_id == cv->mnt_id &&
		 sx.stx_ino == cv->ino && sx.stx_dev_major == cv->dev_major && sx.stx_dev_minor == cv->dev_minor;
	close(fd);
	return ok;
}

// apply_mounts covers every path, then checks that each path leads to its
// own cover. Between the open and the mount of a path, another process may
// rename it or a parent, or exchange it with another name (even another
// masked path, so that two covers land on one object and the other object
// stays in the clear): the cover is then over an object no longer at the
// path. A cover follows its object through later renames, so once every
// path leads to its own cover each object that was at a masked path keeps
// one. A path that does not is covered again, for at most MOUNT_ROUNDS
// rounds; then the launch fails, naming it. The cover left behind is over
// an object that was at the path (a read-only or idmapped bind shows that
// object itself), so it hides no less than one placed without the race.
#define MOUNT_ROUNDS 8
static void apply_mounts(struct config *c) {
	struct cover *cv = calloc(c->nmounts, sizeof *cv);
	char *todo = malloc(c->nmounts);
	if (!cv || !todo)
		fail("launcher: out of memory");
	memset(todo, 1, c->nmounts);
	for (int round = 1;; round++) {
		for (int i = 0; i < c->nmounts; i++)
			if (todo[i])
				apply_mount(c->mount_kind[i], c->mount_path[i], c->userns_fd, &cv[i]);
		const char *moved = NULL;
		for (int i = 0; i < c->nmounts; i++) {
			// A later entry for the same path covers this one's cover.
			int later = 0;
			for (int j = i + 1; j < c->nmounts && !later; j++)
				later = !strcmp(c->mount_path[i], c->mount_path[j]);
			todo[i] = !later && !covered(c->mount_path[i], &cv[i]);
			if (todo[i] && !moved)
				moved = c->mount_path[i];
		}
		if (!moved)
			break;
		if (round == MOUNT_ROUNDS)
			fail("sandbox: %s was renamed, replaced or exchanged while it was being covered, %d times in a row: the command does not run with it uncovered", moved, MOUNT_ROUNDS);
	}
	free(cv);
	free(todo);
}

static void write_file(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, data, strlen(data)) != (ssize_t)strlen(data))
		fail("sandbox: writing %s: %s", path, strerror(errno));
	close(fd);
}

// enter_userns gives an unprivileged termd (user mode) a private mount
// namespace: a new user namespace that maps only the caller's own uid and
// gid, so the command keeps its identity and gains nothing outside.
static void enter_userns(void) {
	char map[64];
	uid_t u = getuid();
	gid_t g = getgid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
		fail("sandbox: unshare(user and mount namespace): %s (unprivileged user namespaces are needed when termd does not run as root)", strerror(errno));
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1\n", u, u);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "%u %u 1\n", g, g);
	write_file("/proc/self/gid_map", map);
}

static void confine(struct config *c) {
	// A pre-started launcher was born in a pooled empty network namespace;
	// a plan on a workspace loopback joins that one first, while the
	// launcher still holds its capabilities in the namespace's owner (the
	// initial user namespace): after a user namespace below it, setns
	// would be refused.
	if (c->netns_fd >= 0) {
		if (setns(c->netns_fd, CLONE_NEWNET) < 0)
			fail("sandbox: joining the workspace loopback's network namespace: %s", strerror(errno));
		close(c->netns_fd);
	}
	// A pre-started launcher makes its private mount namespace itself (an
	// inline one was cloned into it), enters the command's directory (an
	// inline one was started there) and takes the daemon's priority (an
	// inline one inherited it), before anything else.
	if (c->new_mountns && unshare(CLONE_NEWNS) < 0)
		fail("sandbox: unshare(mount namespace): %s", strerror(errno));
	if (c->cwd && chdir(c->cwd) < 0)
		fail("chdir %s: %s", c->cwd, strerror(errno));
	// It waited at a low priority; the command gets the daemon's.
	if (c->set_nice && setpriority(PRIO_PROCESS, 0, c->nice) < 0)
		fail("setpriority %d: %s", c->nice, strerror(errno));
	if (c->userns)
		enter_userns();
	if (c->nmounts > 0) {
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			fail("sandbox: making the mount namespace private: %s", strerror(errno));
		apply_mounts(c);
		// The working directory was entered before the mounts: enter it
		// again so that it is seen through them. Without that the command
		// would work in the directory as it was before (a read-only or
		// hidden cover over it not applying), so a directory that cannot
		// be named again (removed, or its path longer than PATH_MAX) fails
		// the launch.
		char wd[PATH_MAX];
		if (!getcwd(wd, sizeof wd))
			fail("sandbox: finding the working directory to re-enter it through the sandbox's mounts: %s", strerror(errno));
		if (chdir(wd) < 0)
			fail("sandbox: re-entering the working directory %s: %s", wd, strerror(errno));
	}
	if (c->userns_fd >= 0) {
		// The command holds no host root: it enters the user namespace
		// termd made, where uid 0 is an unprivileged uid outside (and
		// becomes uid 0 inside below), with every capability in it dropped
		// before exec. Root-owned files and sockets elsewhere are others'.
		if (setns(c->userns_fd, CLONE_NEWUSER) < 0)
			fail("sandbox: entering the user namespace that maps root: %s", strerror(errno));
		close(c->userns_fd);
		if (!c->set_cred) {
			c->set_cred = 1;
			c->uid = 0;
			c->gid = 0;
			c->ngroups = 0;
		}
	}
	pid_t ppid = getppid();
	if (c->drop_caps) {
		// The bounding set (needs CAP_SETPCAP, so before the credentials
		// change): after exec nobody, not even uid 0, gets a capability back.
		for (int cap = 0; cap <= 63; cap++) {
			if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
				if (errno == EINVAL)
					break;
				fail("sandbox: dropping capability %d from the bounding set: %s", cap, strerror(errno));
			}
		}
	}
	if (c->set_cred) {
		if (setgroups(c->ngroups, c->groups) < 0)
			fail("setgroups: %s", strerror(errno));
		if (setresgid(c->gid, c->gid, c->gid) < 0)
			fail("setresgid %u: %s", c->gid, strerror(errno));
		if (setresuid(c->uid, c->uid, c->uid) < 0)
			fail("setresuid %u: %s", c->uid, strerror(errno));
		// A credential change clears the parent-death signal: set it again,
		// and give up if termd is already gone.
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
			fail("prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
		if (getppid() != ppid)
			fail("termd went away while the command was starting");
	}
	if (c->drop_caps) {
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
			fail("sandbox: clearing ambient capabilities: %s", strerror(errno));
		struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct data[2];
		if (syscall(SYS_capget, &hdr, data) < 0)
			fail("sandbox: capget: %s", strerror(errno));
		data[0].inheritable = data[1].inheritable = 0;
		if (syscall(SYS_capset, &hdr, data) < 0)
			fail("sandbox: clearing inheritable capabilities: %s", strerror(errno));
	}
	if (c->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail("sandbox: no_new_privs: %s", strerror(errno));
	if (c->ruleset_fd >= 0) {
		if (syscall(SYS_landlock_restrict_self, c->ruleset_fd, 0) < 0)
			fail("sandbox: landlock_restrict_self: %s", strerror(errno));
		close(c->ruleset_fd);
	}
	if (c->nfilter > 0) {
		struct sock_fprog prog = {.len = c->nfilter, .filter = c->filter};
		// With a listener (see hand_filter), where the kernel gives one;
		// a refusal attaches nothing, and the same filter goes on without.
		if (c->hold_filter)
			c->filter_fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
		if (c->filter_fd < 0 && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			fail("sandbox: installing the seccomp filter: %s", strerror(errno));
	}
	// Nothing but stdin, stdout and stderr reaches the command; the report
	// descriptor closes at exec, which is how the daemon learns it worked.
	if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		fail("close_range: %s", strerror(errno));
}

// launch runs one execution: "pooled", started ahead of its execution, or
// for it; both get their configuration on the socket, confine themselves
// while termd commits the intent, and exec the command only on the
// go-ahead.
static void __attribute__((noreturn)) launch(void) {
	tl_prefault();
	size_t len;
	char *buf = receive_config(&len);
	struct config c;
	parse(buf, len, &c);
	confine(&c);
	if (c.say_confined)
		confined();
	if (c.filter_fd >= 0)
		hand_filter(c.filter_fd); // after 'c', which termd reads alone
	await_go(); // confined already; CONFIG_FD closes at exec
	execve(c.path, c.argv, c.env);
	fail("exec %s: %s", c.path, strerror(errno));
}

// tl_start gets the stack the kernel set up (argc, argv, ...). Started by
// termd (argv "termd-launch" or "termd-launch pooled"), it never returns;
// otherwise the C library and then the Go main start as usual and explain.
__attribute__((visibility("hidden"))) void tl_start(long *sp);
__attribute__((visibility("hidden"))) void tl_start(long *sp) {
	long argc = sp[0];
	char **argv = (char **)(sp + 1);
	if (argc < 1 || argc > 2 || strcmp(argv[0], "termd-launch") != 0)
		return;
	if (argc == 2 && strcmp(argv[1], "pooled") != 0)
		return;
	launch();
}

// tlentry is the binary's entry point (cgo_linux.go links with -e tlentry):
// tl_start on the initial stack, then, if it returns, the C library's own
// entry point _start with the stack and registers as the kernel left them
// (rdx, x0: no function for atexit).
__asm__(".text\n"
	".globl tlentry\n"
	".type tlentry, @function\n"
	"tlentry:\n"
#if defined(__x86_64__)
	"	xor %ebp, %ebp\n"
	"	mov %rsp, %r12\n"
	"	mov %rsp, %rdi\n"
	"	and $-16, %rsp\n"
	"	call tl_start\n"
	"	mov %r12, %rsp\n"
	"	xor %edx, %edx\n"
	"	jmp _start\n"
#elif defined(__aarch64__)
	"	mov x29, #0\n"
	"	mov x30, #0\n"
	"	mov x19, sp\n"
	"	mov x0, sp\n"
	"	bl tl_start\n"
	"	mov sp, x19\n"
	"	mov x0, #0\n"
	"	b _start\n"
#endif
	".size tlentry, .-tlentry\n");
