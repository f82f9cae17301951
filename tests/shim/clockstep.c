/*
 * clockstep.c -- an LD_PRELOAD shim for tests: steps the wall clock of one
 * process, leaving the machine's alone.
 *
 * CLOCK_REALTIME (and gettimeofday, time) read through clock_gettime() get
 * an offset added, in nanoseconds, read from the 8-byte file named by
 * $ORDO_TEST_CLOCK_STEP_FILE (a little-endian int64, mapped shared, so a
 * test steps the clock by rewriting it while the process runs). Every
 * other clock -- CLOCK_MONOTONIC above all -- is untouched: a server whose
 * deadlines follow the monotonic clock must not notice the step.
 *
 * Without the variable, or if the file cannot be mapped, the shim adds
 * nothing. Only for tests: the offset is read without synchronisation (an
 * aligned 8-byte load).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static volatile const int64_t *step_ns;

static void init(void)
{
    if (real_clock_gettime != NULL)
        return;
    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    const char *path = getenv("ORDO_TEST_CLOCK_STEP_FILE");
    if (path == NULL)
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED)
        step_ns = p;
}

static void shift(struct timespec *ts)
{
    if (step_ns == NULL)
        return;
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + *step_ns;
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    init();
    int rc = real_clock_gettime(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        shift(ts);
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    (void)tz;
    struct timespec ts;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
