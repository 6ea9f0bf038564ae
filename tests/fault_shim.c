/* Write faults for the reliability tests (issue 28): loaded with LD_PRELOAD, it makes
 * write(), pwrite(), pwrite64(), writev(), fsync() and fdatasync() on files under a folder
 * fail with a chosen errno (EIO by default: a failing device; ENOSPC: a full disk) once a
 * number of bytes have been written there. Inert unless PAMIR_FAULT_UNDER is set.
 *
 *   PAMIR_FAULT_UNDER=/path/prefix   files whose path starts with this are concerned
 *   PAMIR_FAULT_AFTER=N              bytes written there before the first fault (default 0)
 *   PAMIR_FAULT_ERRNO=5              the errno (5 EIO, 28 ENOSPC)
 *   PAMIR_FAULT_SWITCH=/path/file    if set, faults happen only while this file exists
 *                                    (and with the errno it holds, if it holds one)
 *
 * Every variable is read at each call, so a process that sets os.environ changes them.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static long long written = 0;
static int failing = 0;

static int concerned(int fd) {
    const char *under = getenv("PAMIR_FAULT_UNDER");
    if (!under || !*under) return 0;
    const char *sw = getenv("PAMIR_FAULT_SWITCH");
    if (sw && *sw && access(sw, F_OK) != 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0) return 0;
    path[len] = 0;
    return strncmp(path, under, strlen(under)) == 0;
}

static int fault(int fd, size_t n) {
    if (!concerned(fd)) return 0;
    const char *after = getenv("PAMIR_FAULT_AFTER");
    if (!failing && written + (long long)n <= (after ? atoll(after) : 0)) {
        written += (long long)n;
        return 0;
    }
    failing = 1; /* a device that failed keeps failing */
    const char *e = getenv("PAMIR_FAULT_ERRNO");
    int code = e ? atoi(e) : EIO;
    const char *sw = getenv("PAMIR_FAULT_SWITCH");
    FILE *f = sw && *sw ? fopen(sw, "r") : NULL;
    if (f) {
        int from_file;
        if (fscanf(f, "%d", &from_file) == 1) code = from_file;
        fclose(f);
    }
    errno = code;
    return 1;
}

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef int (*sync_fn)(int);

#define REAL(name, type) static type real_##name; \
    if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write, write_fn);
    return fault(fd, n) ? -1 : real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite, pwrite_fn);
    return fault(fd, n) ? -1 : real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite64, pwrite_fn);
    return fault(fd, n) ? -1 : real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL(writev, writev_fn);
    size_t n = 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return fault(fd, n) ? -1 : real_writev(fd, iov, cnt);
}

int fsync(int fd) {
    REAL(fsync, sync_fn);
    if (failing && concerned(fd)) { errno = EIO; return -1; }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync, sync_fn);
    if (failing && concerned(fd)) { errno = EIO; return -1; }
    return real_fdatasync(fd);
}
