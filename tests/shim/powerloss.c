/*
 * powerloss.c -- an LD_PRELOAD shim for tests: records what a power loss
 * would leave of one data directory, so a test can kill the process and
 * put the directory back as the disk would have kept it.
 *
 * The model (what a journaling filesystem promises and no more): a file's
 * contents are durable as of its last fsync() or fdatasync(); a
 * directory's entries (names, and which file each names) as of the
 * directory's last fsync(). Everything on disk when the process starts is
 * durable (the test rebuilt it so).
 *
 * $ORDO_POWERLOSS_DATA names the data directory, $ORDO_POWERLOSS_SHADOW
 * an empty directory the shim writes into:
 *   f-<ino>-<birth ns>       a file's durable contents (its identity is the
 *                            inode and its birth time, so a reused inode
 *                            number is another file);
 *   d-<ino>-<birth ns>.list  a directory's durable entries, one per line:
 *                            "<type> <key> <name>\n", type 'f' or 'd',
 *                            key the entry's f-/d- identity;
 *   root                     the data directory's own key.
 * At start every file under the data directory is copied and every
 * directory listed (their durable state); then each fsync()/fdatasync()
 * of a descriptor under it, once the real call succeeded, copies the
 * file or lists the directory again, before the call returns: what the
 * process was told is durable is in the shadow. After a SIGKILL,
 * tests/crash/powerloss.py rebuilds the directory from the shadow (a file
 * never synced is empty; a name never synced into its directory is gone).
 *
 * Without the variables the shim passes every call through. Only for
 * tests: one mutex serialises the shadow's writes; a sync of a large file
 * costs a copy of it.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*sync_fn)(int);

static sync_fn real_fsync, real_fdatasync;
/* Half of PATH_MAX, so a shadow path (the directory, a key) always fits. */
static char data_dir[PATH_MAX], shadow_dir[PATH_MAX / 2];
static size_t data_len;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A file's or directory's identity: inode and birth time. */
static int identity(int dirfd, const char *name, int flags, char *key, size_t klen, char *type)
{
    struct statx sx;
    if (statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME | STATX_TYPE, &sx) != 0)
        return -1;
    bool dir = S_ISDIR(sx.stx_mode);
    if (!dir && !S_ISREG(sx.stx_mode))
        return -1;
    *type = dir ? 'd' : 'f';
    snprintf(key, klen, "%c-%llu-%lld%09u", *type, (unsigned long long)sx.stx_ino, (long long)sx.stx_btime.tv_sec,
             sx.stx_btime.tv_nsec);
    return 0;
}

/* Write path atomically from the bytes of fd (read from offset 0). */
static void copy_file(int fd, const char *key)
{
    char tmp[PATH_MAX], dst[PATH_MAX], src[64];
    snprintf(dst, sizeof dst, "%s/%s", shadow_dir, key);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", shadow_dir, key);
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out >= 0) {
        char buf[1 << 16];
        ssize_t n;
        off_t off = 0;
        while ((n = pread(in, buf, sizeof buf, off)) > 0) {
            if (write(out, buf, (size_t)n) != n)
                break;
            off += n;
        }
        close(out);
        rename(tmp, dst);
    }
    close(in);
}

/* List directory fd's entries into <key>.list (or "root.list"). */
static void list_dir(int fd, const char *key)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(dst, sizeof dst, "%s/%s.list", shadow_dir, key);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s.list", shadow_dir, key);
    int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        return;
    }
    FILE *out = fopen(tmp, "w");
    struct dirent *e;
    while (out != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char ekey[128], type;
        if (identity(dirfd(d), e->d_name, 0, ekey, sizeof ekey, &type) == 0)
            fprintf(out, "%c %s %s\n", type, ekey, e->d_name);
    }
    closedir(d);
    if (out != NULL) {
        fclose(out);
        rename(tmp, dst);
    }
}

/* The path fd names, if it is the data directory or under it. */
static bool under_data(int fd)
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0)
        return false;
    path[n] = '\0';
    return strncmp(path, data_dir, data_len) == 0 && (path[data_len] == '\0' || path[data_len] == '/');
}

/* Record fd's durable state now (the caller's sync succeeded). */
static void record(int fd)
{
    char key[128], type;
    if (identity(fd, "", AT_EMPTY_PATH, key, sizeof key, &type) != 0)
        return;
    if (type == 'd')
        list_dir(fd, key);
    else
        copy_file(fd, key);
}

/* The durable state at start: every file copied, every directory listed. */
static void snapshot_tree(int dfd)
{
    record(dfd);
    DIR *d = fdopendir(dup(dfd));
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int fd = openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
            snapshot_tree(fd);
        else if (S_ISREG(st.st_mode))
            record(fd);
        close(fd);
    }
    closedir(d);
}

static void init(void)
{
    real_fsync = (sync_fn)dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (sync_fn)dlsym(RTLD_NEXT, "fdatasync");
    const char *data = getenv("ORDO_POWERLOSS_DATA"), *shadow = getenv("ORDO_POWERLOSS_SHADOW");
    if (data == NULL || shadow == NULL || strlen(shadow) >= sizeof shadow_dir)
        return;
    /* The data directory may not exist yet (a first start creates it): its
     * path is all we keep, resolved as far as it exists. */
    char resolved[PATH_MAX];
    if (realpath(data, resolved) == NULL) {
        if (strlen(data) >= sizeof resolved || data[0] != '/')
            return;
        strcpy(resolved, data);
    }
    strcpy(data_dir, resolved);
    data_len = strlen(data_dir);
    strcpy(shadow_dir, shadow);
    int dfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        snapshot_tree(dfd);
        close(dfd);
    }
}

/* After a successful sync of fd: record it, and the data directory's own
 * key in "root" (a first start creates the directory). */
static void after_sync(int fd)
{
    if (shadow_dir[0] == '\0' || !under_data(fd))
        return;
    pthread_mutex_lock(&mu);
    record(fd);
    /* "root" is written when it changes (a first start creates the
     * directory), and like every shadow file atomically: a kill lands at
     * any instruction. */
    static char root_key[128];
    char key[128], type, path[PATH_MAX], tmp[PATH_MAX];
    if (identity(AT_FDCWD, data_dir, 0, key, sizeof key, &type) == 0 && strcmp(key, root_key) != 0) {
        snprintf(path, sizeof path, "%s/root", shadow_dir);
        snprintf(tmp, sizeof tmp, "%s/.tmp-root", shadow_dir);
        FILE *f = fopen(tmp, "w");
        if (f != NULL) {
            bool ok = fputs(key, f) >= 0;
            if (fclose(f) == 0 && ok && rename(tmp, path) == 0)
                strcpy(root_key, key);
        }
    }
    pthread_mutex_unlock(&mu);
}

__attribute__((constructor)) static void powerloss_start(void)
{
    pthread_once(&once, init);
    if (shadow_dir[0] == '\0')
        return;
    int fd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        after_sync(fd); /* "root" as of the start */
        close(fd);
    }
}

int fsync(int fd)
{
    pthread_once(&once, init);
    int rc = real_fsync(fd);
    if (rc == 0)
        after_sync(fd);
    return rc;
}

int fdatasync(int fd)
{
    pthread_once(&once, init);
    int rc = real_fdatasync(fd);
    if (rc == 0)
        after_sync(fd);
    return rc;
}
