#ifndef MIRROR_CLINUX_SHIM_H
#define MIRROR_CLINUX_SHIM_H
#include <unistd.h>
#include <sys/syscall.h>

/* Linux system calls that Swift's Glibc module does not expose (they need _GNU_SOURCE or are
   newer than its headers). Calling them through syscall(2) avoids depending on how the C
   library was configured. Each returns -1 and sets errno on failure, like the libc wrappers. */

/* syncfs(2): commit every dirty page and inode of the filesystem holding fd, in one journal
   commit (Linux 2.6.39). */
static inline int mirror_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/* sync_file_range(2) with SYNC_FILE_RANGE_WRITE: start writing these dirty pages back now,
   without waiting. A download calls it as it goes, so that the fdatasync of each durable
   checkpoint finds little left to write instead of stalling on the whole interval. */
static inline int mirror_start_writeback(int fd, long long offset, long long length) {
    return (int)syscall(SYS_sync_file_range, fd, offset, length, 2 /* SYNC_FILE_RANGE_WRITE */);
}
#endif
