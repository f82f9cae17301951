/*
 * diskfull.c -- an LD_PRELOAD shim for tests: makes one process's disk
 * "full" under one directory, on demand, leaving the machine's disk alone.
 *
 * While the first byte of the file named by $ORDO_TEST_DISKFULL_FILE is
 * '1', every write(2), pwrite(2), writev(2), pwritev(2) and fallocate(2)
 * to a file whose path starts with $ORDO_TEST_DISKFULL_PREFIX fails with
 * ENOSPC, as a full file system's would (a write that makes no progress).
 * A test fills the disk by writing '1' to the file and frees it with '0'
 * while the process runs. Reads, syncs and every other path are
 * untouched.
 *
 * Without the variables the shim changes nothing. Only for tests: the
 * path of a descriptor is looked up through /proc/self/fd at every write,
 * and the control file is read each time (cheap enough for a test).
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef int (*fallocate_fn)(int, int, off_t, off_t);
typedef ssize_t (*read_fn)(int, void *, size_t);

static int full_for(int fd)
{
    const char *ctl = getenv("ORDO_TEST_DISKFULL_FILE");
    const char *prefix = getenv("ORDO_TEST_DISKFULL_PREFIX");
    if (ctl == NULL || prefix == NULL || fd < 0)
        return 0;
    static read_fn real_read;
    if (real_read == NULL)
        real_read = (read_fn)dlsym(RTLD_NEXT, "read");
    int cfd = open(ctl, O_RDONLY | O_CLOEXEC);
    if (cfd < 0)
        return 0;
    char c = '0';
    ssize_t n = real_read(cfd, &c, 1);
    close(cfd);
    if (n != 1 || c != '1')
        return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t pl = readlink(link, path, sizeof path - 1);
    if (pl <= 0)
        return 0;
    path[pl] = '\0';
    return strncmp(path, prefix, strlen(prefix)) == 0;
}

ssize_t write(int fd, const void *buf, size_t len)
{
    static write_fn real;
    if (real == NULL)
        real = (write_fn)dlsym(RTLD_NEXT, "write");
    if (len > 0 && full_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
    static pwrite_fn real;
    if (real == NULL)
        real = (pwrite_fn)dlsym(RTLD_NEXT, "pwrite");
    if (len > 0 && full_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
    return pwrite(fd, buf, len, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    static writev_fn real;
    if (real == NULL)
        real = (writev_fn)dlsym(RTLD_NEXT, "writev");
    if (n > 0 && full_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, iov, n);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    static pwritev_fn real;
    if (real == NULL)
        real = (pwritev_fn)dlsym(RTLD_NEXT, "pwritev");
    if (n > 0 && full_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, iov, n, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
    return pwritev(fd, iov, n, off);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    static fallocate_fn real;
    if (real == NULL)
        real = (fallocate_fn)dlsym(RTLD_NEXT, "fallocate");
    if (full_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, mode, off, len);
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
    return fallocate(fd, mode, off, len);
}
