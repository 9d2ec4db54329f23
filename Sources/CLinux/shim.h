#ifndef MIRROR_CLINUX_SHIM_H
#define MIRROR_CLINUX_SHIM_H
#include <unistd.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <errno.h>

/* Linux system calls that Swift's Glibc module does not expose (they need _GNU_SOURCE or are
   newer than its headers). Calling them through syscall(2) avoids depending on how the C
   library was configured. Each returns -1 and sets errno on failure, like the libc wrappers. */

/* The C library's standard streams, returned by functions: Swift 6 refuses to read the `stdout`
   and `stderr` globals (mutable C variables) from code that may run on any thread. The FILE
   objects themselves lock around each call (flockfile(3)), so sharing them is safe. */
static inline FILE *mirror_stdout(void) { return stdout; }
static inline FILE *mirror_stderr(void) { return stderr; }

/* syncfs(2): commit every dirty page and inode of the filesystem holding fd, in one journal
   commit (Linux 2.6.39). */
static inline int mirror_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/* sync_file_range(2) with SYNC_FILE_RANGE_WRITE: start writing these dirty pages back now,
   without waiting. A download asks for it every MiB (on the file's writer thread when it has
   one), so that the fdatasync of each durable checkpoint finds little left to write instead of
   stalling on the whole interval. */
static inline int mirror_start_writeback(int fd, long long offset, long long length) {
    return (int)syscall(SYS_sync_file_range, fd, offset, length, 2 /* SYNC_FILE_RANGE_WRITE */);
}
/* fallocate(2) with FALLOC_FL_KEEP_SIZE (1): allocate blocks for [offset, offset+length) without
   changing the file's size, so that later appends into that range need no new block. The journal
   keeps such a reserve beyond its end, so that the record of a run the full disk stopped can still
   be written (docs/journal.md). Fails with EOPNOTSUPP where the file system has no fallocate. */
static inline int mirror_reserve(int fd, long long offset, long long length) {
    return (int)syscall(SYS_fallocate, fd, 1 /* FALLOC_FL_KEEP_SIZE */, offset, length);
}

/* openat2(2) (Linux 5.6) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS: the
   kernel resolves `path` relative to `dirfd` in one lookup and fails with EXDEV if it would leave
   the folder (an absolute path, "..") and with ELOOP if any component, the last included, is a
   symlink. The struct and flags are declared here (values of <linux/openat2.h>, kernel ABI) so the
   build does not depend on how new the installed headers are. Fails with ENOSYS on older kernels
   (EPERM under some seccomp filters); callers then walk the path one openat(O_NOFOLLOW) at a time.
   `mode` is only passed with O_CREAT: openat2 rejects a mode without it (EINVAL). */
struct mirror_open_how {
    unsigned long long flags;
    unsigned long long mode;
    unsigned long long resolve;
};
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
static inline int mirror_openat2_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct mirror_open_how how;
    how.flags = (unsigned long long)(unsigned int)flags;
    how.mode = (flags & 0100 /* O_CREAT */) ? mode : 0;
    how.resolve = 0x08 /* RESOLVE_BENEATH */ | 0x04 /* RESOLVE_NO_SYMLINKS */ | 0x02 /* RESOLVE_NO_MAGICLINKS */;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

/* renameat2(2) (Linux 3.15) with RENAME_EXCHANGE (2): swaps two names atomically, even a folder
   and a symlink, which rename(2) cannot (it refuses to put a symlink over a non-empty folder).
   `mirror sync --atomic` uses it to turn a plain DEST folder into the symlink to a generation
   without a moment in which DEST does not exist. */
#ifndef SYS_renameat2
#define SYS_renameat2 316
#endif
static inline int mirror_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, 2 /* RENAME_EXCHANGE */);
}

/* renameat2(2) with RENAME_NOREPLACE (1): the rename fails with EEXIST instead of replacing
   whatever has the new name, so installing a file where nothing is yet needs no look first.
   Filesystems without it fail with EINVAL; callers then look and use renameat(2). */
static inline int mirror_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, 1 /* RENAME_NOREPLACE */);
}

/* copy_file_range(2) (Linux 4.5; across file systems since 5.3): the kernel copies `len` bytes
   between two files without bringing them to user space (server-side on NFS 4.2, shared
   extents on some file systems). Declared by <unistd.h> only with _GNU_SOURCE. Reuse by content
   (`LocalCopy`) falls back to read/write where it fails. */
#ifndef SYS_copy_file_range
#define SYS_copy_file_range 326
#endif
static inline long long mirror_copy_file_range(int infd, long long *inoff, int outfd, long long *outoff, unsigned long len) {
    return (long long)syscall(SYS_copy_file_range, infd, inoff, outfd, outoff, len, 0u);
}


/* linkat(2) of an open file by its /proc/self/fd magic link, with AT_SYMLINK_FOLLOW (0x400): the
   way open(2) documents for an unprivileged process to give an O_TMPFILE file a name (linkat with
   AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH). Like link(2), it never replaces: EEXIST when the name
   is taken; ENOENT also when /proc is not mounted. */
static inline int mirror_link_open_file(int fd, int newdirfd, const char *newname) {
    char path[40];
    int n = snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (n < 0 || n >= (int)sizeof path) { errno = EBADF; return -1; }
    return linkat(-100 /* AT_FDCWD */, path, newdirfd, newname, 0x400 /* AT_SYMLINK_FOLLOW */);
}

/* O_PATH (Linux 2.6.39) is only declared by <fcntl.h> with _GNU_SOURCE: a descriptor that names a
   file or folder without opening it for reading, enough to fstat it or to resolve *at() paths
   beneath it, and with O_NOFOLLOW it refers to a symlink itself. */
static const int mirror_O_PATH = 010000000;
/* Content-defined chunking (docs/manifest.md, "Chunk indexes"): the length of the chunk that
   starts at p[0], given the n bytes available from there. A gear hash, h = (h << 1) + gear[byte],
   runs over the bytes; its top bits depend on the last 64 bytes only, so a cut point depends on
   the content around it and not on its offset, and an insertion or a deletion moves the cuts
   after it by the same amount instead of shifting every chunk (FastCDC's normalized chunking,
   Xia et al., USENIX ATC 2016: a harder mask before `avg`, an easier one after). Chunks are at
   least `min` bytes (none of those bytes is looked at), at most `max`, and the last one may be
   shorter. Written in C because it looks at every byte of a file: a few cycles a byte. */
static inline unsigned long mirror_cdc_cut(const unsigned char *p, unsigned long n, const unsigned long long *gear,
                                           unsigned long long mask_small, unsigned long long mask_large,
                                           unsigned long min, unsigned long avg, unsigned long max) {
    if (n <= min) return n;
    if (n > max) n = max;
    unsigned long normal = avg < n ? avg : n;
    unsigned long long h = 0;
    unsigned long i = min;
    for (; i < normal; i++) {
        h = (h << 1) + gear[p[i]];
        if (!(h & mask_small)) return i + 1;
    }
    for (; i < n; i++) {
        h = (h << 1) + gear[p[i]];
        if (!(h & mask_large)) return i + 1;
    }
    return n;
}

/* prctl(PR_SET_NAME): the calling thread's name as the kernel shows it (`top -H`, `ps -L`,
   /proc/PID/task/TID/comm), at most 15 bytes. pthread_setname_np needs _GNU_SOURCE, and
   Foundation's Thread.name does not reach the kernel on Linux when set before the thread starts. */
#include <sys/prctl.h>
static inline int mirror_name_thread(const char *name) {
    return prctl(15 /* PR_SET_NAME */, (unsigned long)name, 0UL, 0UL, 0UL);
}

/* sched_getaffinity(2): how many CPUs this process may run on, which `taskset` and a container's
   CPU set narrow (sysconf(_SC_NPROCESSORS_ONLN) counts every online CPU). The libc wrapper and
   CPU_COUNT need _GNU_SOURCE; the system call returns the bytes of the mask it filled. -1 when
   the kernel's mask is larger than this one (over 8192 CPUs) or the call fails. */
static inline int mirror_allowed_cpus(void) {
    unsigned long mask[128];
    long n = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    if (n <= 0) return -1;
    int count = 0;
    for (long i = 0; i < n / (long)sizeof(unsigned long); i++) count += __builtin_popcountl(mask[i]);
    return count;
}

#endif
