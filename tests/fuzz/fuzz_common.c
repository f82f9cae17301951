/*
 * fuzz_common.c -- the seed writer and temporary directories of fuzz.h,
 * linked into every target.
 */
#include "fuzz.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The seed directory (ORDO_FUZZ_SEEDS) while seeds are written. */
static const char *seed_dir;
static char tmp_dir[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    seed_dir = getenv("ORDO_FUZZ_SEEDS");
    if (seed_dir == NULL || seed_dir[0] == '\0')
        return 0;
    if (mkdir(seed_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz: cannot create %s: %s\n", seed_dir, strerror(errno));
        exit(1);
    }
    fuzz_seeds();
    exit(0);
}

void fuzz_seed(const char *name, const void *data, size_t len)
{
    char path[1024];
    CHECK(seed_dir != NULL);
    snprintf(path, sizeof path, "%s/seed-%s", seed_dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, len, f) == len);
    CHECK(fclose(f) == 0);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag;
    if (ftw->level > 0 || strcmp(path, tmp_dir) == 0)
        remove(path);
    return 0;
}

static void remove_tmp(void)
{
    if (tmp_dir[0] != '\0')
        nftw(tmp_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_tmpdir(void)
{
    if (tmp_dir[0] != '\0')
        return tmp_dir;
    struct stat st;
    const char *base = getenv("ORDO_FUZZ_TMP"); /* scripts/fuzz.sh: this run's directory */
    if (base == NULL || base[0] == '\0')
        base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
               : getenv("TMPDIR")                                                              ? getenv("TMPDIR")
                                                                                               : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%s/ordo-fuzz-XXXXXX", base);
    CHECK(mkdtemp(tmp_dir) != NULL);
    atexit(remove_tmp);
    return tmp_dir;
}

static int clear_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag;
    if (ftw->level > 0)
        remove(path);
    return 0;
}

void fuzz_clear_dir(const char *dir)
{
    nftw(dir, clear_one, 16, FTW_DEPTH | FTW_PHYS);
}
