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
#endif
