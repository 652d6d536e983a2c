// What launch.c uses of a C library, on raw system calls.
//
// launch.c runs from the binary's entry point (tlentry), before the C
// library has started: no thread pointer (errno, the stack protector's
// canary), no IFUNC relocations (the C library's string functions), no
// stdio, no malloc. Starting the static C library cost each pooled launcher
// about 1 ms of CPU here (CPUID for its cache sizes, about 30 page faults),
// more than everything it then does to confine itself. So this file
// includes only the compiler's freestanding headers and the kernel's
// UAPI headers, and gives launch.c the few functions it calls, under their
// usual names (macros onto tl_*). Nothing here may call the C library:
// TestLauncherStartsWithoutTheCLibrary holds the launcher's start-up to a
// handful of page faults.

// A function this file does not give is an error, not an implicit
// declaration that would link the C library's, uninitialised.
#pragma GCC diagnostic error "-Wimplicit-function-declaration"

#include <stdarg.h>
#include <stddef.h>
#include <asm/unistd.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/filter.h>
#include <linux/limits.h>
#include <linux/mount.h>
#include <linux/prctl.h>
#include <linux/resource.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <linux/stat.h>
#include <linux/types.h>
#include <linux/uio.h>

typedef __u8 uint8_t;
typedef __u16 uint16_t;
typedef __u32 uint32_t;
typedef __u64 uint64_t;
typedef long ssize_t;
typedef unsigned int uid_t;
typedef unsigned int gid_t;
typedef int pid_t;

#define NULL ((void *)0)
#define SIGKILL 9
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define MSG_CTRUNC 0x8
#define MSG_TRUNC 0x20
#define MSG_NOSIGNAL 0x4000
#define MSG_CMSG_CLOEXEC 0x40000000
#ifndef S_IFMT
#define S_IFMT 0170000
#define S_IFDIR 0040000
#define S_IFLNK 0120000
#endif
#ifndef S_ISDIR
#define S_ISDIR(m) (((m) & S_IFMT) == S_IFDIR)
#define S_ISLNK(m) (((m) & S_IFMT) == S_IFLNK)
#endif

#define SYS_capget __NR_capget
#define SYS_capset __NR_capset
#define SYS_close_range __NR_close_range
#define SYS_fsconfig __NR_fsconfig
#define SYS_fsmount __NR_fsmount
#define SYS_fsopen __NR_fsopen
#define SYS_mount_setattr __NR_mount_setattr
#define SYS_move_mount __NR_move_mount
#define SYS_open_tree __NR_open_tree
#define SYS_openat2 __NR_openat2
#define SYS_seccomp __NR_seccomp
#ifdef __NR_landlock_restrict_self
#define SYS_landlock_restrict_self __NR_landlock_restrict_self
#endif

// The kernel's struct user_msghdr and struct cmsghdr, as a C library
// declares them.
struct msghdr {
	void *msg_name;
	int msg_namelen;
	struct iovec *msg_iov;
	size_t msg_iovlen;
	void *msg_control;
	size_t msg_controllen;
	int msg_flags;
};
struct cmsghdr {
	size_t cmsg_len;
	int cmsg_level;
	int cmsg_type;
};
#define CMSG_ALIGN(n) (((n) + sizeof(size_t) - 1) & ~(sizeof(size_t) - 1))
#define CMSG_SPACE(n) (CMSG_ALIGN(n) + CMSG_ALIGN(sizeof(struct cmsghdr)))
#define CMSG_LEN(n) (CMSG_ALIGN(sizeof(struct cmsghdr)) + (n))
#define CMSG_DATA(c) ((unsigned char *)(c) + CMSG_ALIGN(sizeof(struct cmsghdr)))
#define CMSG_FIRSTHDR(m) ((m)->msg_controllen >= sizeof(struct cmsghdr) ? (struct cmsghdr *)(m)->msg_control : (struct cmsghdr *)NULL)
#define CMSG_NXTHDR(m, c) tl_cmsg_next(m, c)

static struct cmsghdr *tl_cmsg_next(struct msghdr *m, struct cmsghdr *c) {
	if (c->cmsg_len < sizeof(struct cmsghdr))
		return NULL;
	unsigned char *next = (unsigned char *)c + CMSG_ALIGN(c->cmsg_len);
	unsigned char *end = (unsigned char *)m->msg_control + m->msg_controllen;
	if (next + sizeof(struct cmsghdr) > end || next + CMSG_ALIGN(((struct cmsghdr *)next)->cmsg_len) > end)
		return NULL;
	return (struct cmsghdr *)next;
}

// errno: one thread, no thread-local storage.
static int tl_errno;
#define errno tl_errno

static long tl_sys6(long n, long a, long b, long c, long d, long e, long f) {
	long r;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	r = x0;
#else
#error "termd-launch: no system call sequence for this architecture"
#endif
	if (r < 0 && r > -4096) {
		tl_errno = (int)-r;
		return -1;
	}
	return r;
}
#define tl_sys(n, a, b, c, d, e, f) tl_sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

// syscall(2) as the C library has it: six arguments read whatever was passed.
static long tl_syscall(long n, ...) {
	va_list ap;
	long a[6];
	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	return tl_sys6(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
#define syscall tl_syscall

static __attribute__((noreturn)) void tl_exit(int code) {
	for (;;)
		tl_sys(__NR_exit_group, code, 0, 0, 0, 0, 0);
}
#define _exit tl_exit
#define read(fd, b, n) tl_sys(__NR_read, fd, b, n, 0, 0, 0)
#define write(fd, b, n) tl_sys(__NR_write, fd, b, n, 0, 0, 0)
#define close(fd) tl_sys(__NR_close, fd, 0, 0, 0, 0, 0)
#define recvmsg(fd, m, fl) tl_sys(__NR_recvmsg, fd, m, fl, 0, 0, 0)
#define sendmsg(fd, m, fl) tl_sys(__NR_sendmsg, fd, m, fl, 0, 0, 0)
#define send(fd, b, n, fl) tl_sys(__NR_sendto, fd, b, n, fl, 0, 0)
#define fcntl(fd, cmd, arg) tl_sys(__NR_fcntl, fd, cmd, arg, 0, 0, 0)
#define openat(dir, p, fl) tl_sys(__NR_openat, dir, p, fl, 0, 0, 0)
#define open(p, fl) tl_sys(__NR_openat, AT_FDCWD, p, fl, 0, 0, 0)
#define statx(dir, p, fl, mask, sx) tl_sys(__NR_statx, dir, p, fl, mask, sx, 0)
#define unshare(fl) tl_sys(__NR_unshare, fl, 0, 0, 0, 0, 0)
#define mount(src, dst, type, fl, data) tl_sys(__NR_mount, src, dst, type, fl, data, 0)
#define setns(fd, t) tl_sys(__NR_setns, fd, t, 0, 0, 0, 0)
#define chdir(p) tl_sys(__NR_chdir, p, 0, 0, 0, 0, 0)
#define setpriority(w, who, prio) tl_sys(__NR_setpriority, w, who, prio, 0, 0, 0)
#define getuid() ((uid_t)tl_sys(__NR_getuid, 0, 0, 0, 0, 0, 0))
#define getgid() ((gid_t)tl_sys(__NR_getgid, 0, 0, 0, 0, 0, 0))
#define getppid() ((pid_t)tl_sys(__NR_getppid, 0, 0, 0, 0, 0, 0))
#define prctl(op, a, b, c, d) tl_sys(__NR_prctl, op, a, b, c, d, 0)
#define setgroups(n, g) tl_sys(__NR_setgroups, n, g, 0, 0, 0, 0)
#define setresgid(r, e, s) tl_sys(__NR_setresgid, r, e, s, 0, 0, 0)
#define setresuid(r, e, s) tl_sys(__NR_setresuid, r, e, s, 0, 0, 0)
#define execve(p, av, env) tl_sys(__NR_execve, p, av, env, 0, 0, 0)

// dup2 as launch.c uses it: the descriptors always differ.
static int tl_dup2(int from, int to) {
	if (from == to)
		return tl_sys(__NR_fcntl, from, F_GETFD, 0, 0, 0, 0) < 0 ? -1 : to;
	return tl_sys(__NR_dup3, from, to, 0, 0, 0, 0);
}
#define dup2 tl_dup2

// struct stat, of which launch.c reads only st_mode, from statx.
struct tl_stat {
	unsigned int st_mode;
};
#define stat tl_stat
static int tl_fstat(int fd, struct tl_stat *st) {
	struct statx sx;
	if (tl_sys(__NR_statx, fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_MODE, &sx, 0) < 0)
		return -1;
	st->st_mode = sx.stx_mode;
	return 0;
}
#define fstat tl_fstat

// getcwd as the C library has it: a directory outside the root (the
// kernel's "(unreachable)/...") is ENOENT.
static char *tl_getcwd(char *buf, size_t n) {
	if (tl_sys(__NR_getcwd, buf, n, 0, 0, 0, 0) < 0)
		return NULL;
	if (buf[0] != '/') {
		tl_errno = ENOENT;
		return NULL;
	}
	return buf;
}
#define getcwd tl_getcwd

// Strings. Plain loops: the compiler is kept from turning them back into
// calls to the C library's (IFUNC) memset and memcpy.
#pragma GCC optimize("no-tree-loop-distribute-patterns")

static size_t tl_strlen(const char *s) {
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}
#define strlen tl_strlen

static int tl_strcmp(const char *a, const char *b) {
	while (*a && *a == *b)
		a++, b++;
	return (unsigned char)*a - (unsigned char)*b;
}
#define strcmp tl_strcmp

static void *tl_memchr(const void *s, int c, size_t n) {
	const unsigned char *p = s;
	for (size_t i = 0; i < n; i++)
		if (p[i] == (unsigned char)c)
			return (void *)(p + i);
	return NULL;
}
#define memchr tl_memchr

static void *tl_memcpy(void *dst, const void *src, size_t n) {
	unsigned char *d = dst;
	const unsigned char *s = src;
	for (size_t i = 0; i < n; i++)
		d[i] = s[i];
	return dst;
}
#define memcpy tl_memcpy

static void *tl_memset(void *dst, int c, size_t n) {
	unsigned char *d = dst;
	for (size_t i = 0; i < n; i++)
		d[i] = (unsigned char)c;
	return dst;
}
#define memset tl_memset

// strtok_r with one delimiter character, as launch.c uses it.
static char *tl_strtok_r(char *s, const char *delim, char **save) {
	char d = delim[0];
	if (!s)
		s = *save;
	while (*s == d)
		s++;
	if (!*s) {
		*save = s;
		return NULL;
	}
	char *tok = s;
	while (*s && *s != d)
		s++;
	if (*s)
		*s++ = 0;
	*save = s;
	return tok;
}
#define strtok_r tl_strtok_r

// strtoull and strtol in base 10 only, with the C library's ERANGE.
static unsigned long long tl_strtoull(const char *s, char **end, int base) {
	(void)base;
	const char *p = s;
	int neg = 0;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	unsigned long long v = 0;
	int any = 0, over = 0;
	for (; *p >= '0' && *p <= '9'; p++, any = 1) {
		unsigned d = *p - '0';
		if (v > (~0ULL - d) / 10)
			over = 1;
		v = v * 10 + d;
	}
	*end = (char *)(any ? p : s);
	if (over) {
		tl_errno = ERANGE;
		return ~0ULL;
	}
	return neg ? -v : v;
}
#define strtoull tl_strtoull

static long tl_strtol(const char *s, char **end, int base) {
	const char *p = s;
	int neg = *p == '-';
	if (*p == '+' || *p == '-')
		p++;
	if (*p < '0' || *p > '9') { // no digits: no conversion
		*end = (char *)s;
		return 0;
	}
	int e = tl_errno;
	tl_errno = 0;
	unsigned long long v = tl_strtoull(p, end, base);
	if (tl_errno || v > (neg ? (unsigned long long)1 << 63 : ((unsigned long long)1 << 63) - 1)) {
		tl_errno = ERANGE;
		return neg ? (long)((unsigned long long)1 << 63) : (long)(((unsigned long long)1 << 63) - 1);
	}
	tl_errno = e;
	return neg ? (long)-v : (long)v;
}
#define strtol tl_strtol

// Memory: a bump allocator, first over a static block, then over anonymous
// mappings; nothing is freed (the launcher execs or exits). A block knows
// its capacity, so that push()'s realloc one element at a time grows by
// doubling.
static unsigned char tl_first[16 << 10] __attribute__((aligned(16)));
static unsigned char *tl_arena, *tl_arena_end;
static void *tl_malloc(size_t n) {
	size_t need = ((n + 15) & ~(size_t)15) + 16;
	if (!tl_arena) // set here, not by a relocation: nothing applies those
		tl_arena = tl_first, tl_arena_end = tl_first + sizeof tl_first;
	if (need < n || (size_t)(tl_arena_end - tl_arena) < need) {
		size_t sz = need < (1 << 20) ? (1 << 20) : need;
		long m = tl_sys(__NR_mmap, 0, sz, 3 /* PROT_READ | PROT_WRITE */, 0x22 /* MAP_PRIVATE | MAP_ANONYMOUS */, -1, 0);
		if (m == -1 || need < n)
			return NULL;
		tl_arena = (unsigned char *)m;
		tl_arena_end = tl_arena + sz;
	}
	unsigned char *p = tl_arena + 16;
	*(size_t *)tl_arena = need - 16;
	tl_arena += need;
	return p;
}
#define malloc tl_malloc

// tl_prefault touches, while a pooled launcher waits for its execution, the
// pages the launch writes first: the static block and the allocator's
// pointers, the deepest stack frames (fail's message, confine's working
// directory). Faulted there, not after the configuration arrives, they cost
// the execution no time.
static void __attribute__((noinline)) tl_prefault(void) {
	volatile unsigned char stack[16 << 10];
	for (size_t i = sizeof stack; i > 0; i -= 4096)
		stack[i - 1] = 0;
	for (size_t i = 0; i < sizeof tl_first; i += 4096)
		((volatile unsigned char *)tl_first)[i] = 0;
	tl_arena = tl_first, tl_arena_end = tl_first + sizeof tl_first; // and their page
}

static void *tl_calloc(size_t n, size_t size) {
	if (size && n > (size_t)-1 / size)
		return NULL;
	return tl_malloc(n * size); // fresh anonymous memory is zero
}
#define calloc tl_calloc

static void *tl_realloc(void *old, size_t n) {
	size_t cap = old ? *(size_t *)((unsigned char *)old - 16) : 0;
	if (old && n <= cap)
		return old;
	void *p = tl_malloc(n < 2 * cap ? 2 * cap : n);
	if (p && old)
		tl_memcpy(p, old, cap);
	return p;
}
#define realloc tl_realloc
#define free(p) ((void)(p))

static char *tl_strdup(const char *s) {
	size_t n = tl_strlen(s) + 1;
	char *p = tl_malloc(n);
	return p ? tl_memcpy(p, s, n) : NULL;
}
#define strdup tl_strdup

// strerror: the messages a launcher's report can carry.
static const char *tl_strerror(int e) {
	switch (e) {
	case EPERM: return "Operation not permitted";
	case ENOENT: return "No such file or directory";
	case ESRCH: return "No such process";
	case EINTR: return "Interrupted system call";
	case EIO: return "Input/output error";
	case E2BIG: return "Argument list too long";
	case ENOEXEC: return "Exec format error";
	case EBADF: return "Bad file descriptor";
	case EAGAIN: return "Resource temporarily unavailable";
	case ENOMEM: return "Cannot allocate memory";
	case EACCES: return "Permission denied";
	case EFAULT: return "Bad address";
	case EBUSY: return "Device or resource busy";
	case EEXIST: return "File exists";
	case EXDEV: return "Invalid cross-device link";
	case ENODEV: return "No such device";
	case ENOTDIR: return "Not a directory";
	case EISDIR: return "Is a directory";
	case EINVAL: return "Invalid argument";
	case ENFILE: return "Too many open files in system";
	case EMFILE: return "Too many open files";
	case ETXTBSY: return "Text file busy";
	case ENOSPC: return "No space left on device";
	case EROFS: return "Read-only file system";
	case EMLINK: return "Too many links";
	case EPIPE: return "Broken pipe";
	case ERANGE: return "Numerical result out of range";
	case ENAMETOOLONG: return "File name too long";
	case ENOSYS: return "Function not implemented";
	case ENOTEMPTY: return "Directory not empty";
	case ELOOP: return "Too many levels of symbolic links";
	case EOVERFLOW: return "Value too large for defined data type";
	case EUSERS: return "Too many users";
	case ENOTSOCK: return "Socket operation on non-socket";
	case EOPNOTSUPP: return "Operation not supported";
	case ECONNRESET: return "Connection reset by peer";
	case ESTALE: return "Stale file handle";
	default: return "Unknown error";
	}
}
#define strerror tl_strerror

// vsnprintf for %s, %c, %d, %u, %x with the l, ll and z sizes: what
// launch.c's messages use. Always NUL-terminated; returns the length it
// would have had, like the C library's.
struct tl_out {
	char *buf;
	size_t size, n;
};
static void tl_put(struct tl_out *o, char c) {
	if (o->n + 1 < o->size)
		o->buf[o->n] = c;
	o->n++;
}
static void tl_putnum(struct tl_out *o, unsigned long long v, int neg, unsigned base) {
	char d[24];
	int k = 0;
	do
		d[k++] = "0123456789abcdef"[v % base];
	while ((v /= base) != 0);
	if (neg)
		tl_put(o, '-');
	while (k > 0)
		tl_put(o, d[--k]);
}
static int tl_vsnprintf(char *buf, size_t size, const char *f, va_list ap) {
	struct tl_out o = {buf, size, 0};
	for (; *f; f++) {
		if (*f != '%') {
			tl_put(&o, *f);
			continue;
		}
		int size_l = 0;
		for (f++; *f == 'l' || *f == 'z'; f++)
			size_l++;
		long long sv;
		unsigned long long uv;
		switch (*f) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			for (s = s ? s : "(null)"; *s; s++)
				tl_put(&o, *s);
			break;
		}
		case 'c':
			tl_put(&o, (char)va_arg(ap, int));
			break;
		case 'd':
			sv = size_l ? va_arg(ap, long) : va_arg(ap, int);
			tl_putnum(&o, sv < 0 ? -(unsigned long long)sv : (unsigned long long)sv, sv < 0, 10);
			break;
		case 'u':
		case 'x':
			uv = size_l ? va_arg(ap, unsigned long) : va_arg(ap, unsigned int);
			tl_putnum(&o, uv, 0, *f == 'x' ? 16 : 10);
			break;
		case '%':
			tl_put(&o, '%');
			break;
		default: // not used by launch.c
			tl_put(&o, '%');
			if (!*f)
				f--;
			else
				tl_put(&o, *f);
		}
	}
	if (size)
		buf[o.n < size ? o.n : size - 1] = 0;
	return (int)o.n;
}
#define vsnprintf tl_vsnprintf

static int tl_snprintf(char *buf, size_t size, const char *f, ...) {
	va_list ap;
	va_start(ap, f);
	int n = tl_vsnprintf(buf, size, f, ap);
	va_end(ap);
	return n;
}
#define snprintf tl_snprintf
