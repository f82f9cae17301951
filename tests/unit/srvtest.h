/*
 * srvtest.h -- file helpers the server's log tests share (test_srv_wal.c,
 * test_srv_snapshot.c): a fresh mkdtemp() directory under $TMPDIR (or
 * /tmp) and its removal, and writing a whole file. Include after
 * <cmocka.h>: failures are cmocka assertions.
 */
#ifndef ORDO_TESTS_SRVTEST_H
#define ORDO_TESTS_SRVTEST_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A new empty directory $TMPDIR/<prefix>XXXXXX; free with tmpdir_free. */
static inline char *tmpdir_new(const char *prefix)
{
    const char *base = getenv("TMPDIR");
    char *path = malloc(4096);
    snprintf(path, 4096, "%s/%sXXXXXX", base != NULL ? base : "/tmp", prefix);
    assert_non_null(mkdtemp(path));
    return path;
}

/* Removes the files in path (not subdirectories), path itself, and frees it. */
static inline void tmpdir_free(char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char p[4200];
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        unlink(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(path);
    free(path);
}

/* Writes n bytes of b as the whole of path. */
static inline void file_put(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

#endif
