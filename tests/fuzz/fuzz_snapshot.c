/*
 * fuzz_snapshot.c -- libFuzzer target for the snapshot loader
 * (log/snapshot.c: snap_load_mem(), and snap_load() on a file).
 *
 * Input: byte 0 is the mode, the rest the snapshot's bytes. Mode bits:
 *   0  fill in the trailer's checksum (the last 4 bytes: CRC-32C of all
 *      before), so the loader reads the entries instead of refusing;
 *   1  load from a file (dir/snapshot.ordo, snap_load()) instead of from
 *      memory.
 * Each input loads into a fresh core, which is then destroyed (leaks show).
 *
 * Checked (abort on violation):
 *   - a refused snapshot says why, reports revision 0 and no entries;
 *   - a loaded one reaches its revision (the loader asserts it too);
 *   - round trip: the loaded state, encoded again (snap_encode_mem) and
 *     loaded into another core, loads, at the same revision, with the same
 *     entry count and the same state digest (snap_digest, independent of
 *     the order tables are walked in).
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=snapshot).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "core/core.h"
#include "fuzz.h"
#include "fuzz_records.h"
#include "log/snapshot.h"

/* Retained history of the cores loaded: any will do. */
#define HISTORY_REVS 1000
#define NOW_MS 1700000100000ull

enum { M_FIX_CRC = 1, M_FILE = 2 };

static int load(core_t *core, const uint8_t *p, size_t n, bool file, uint64_t *rev, uint64_t *entries, char *err,
                size_t elen)
{
    if (!file)
        return snap_load_mem(core, p, n, "fuzz", rev, entries, err, elen);
    const char *dir = fuzz_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, SNAP_FILE);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(n == 0 || write(fd, p, n) == (ssize_t)n);
    close(fd);
    return snap_load(core, dir, rev, entries, err, elen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned mode = data[0];
    size_t n = size - 1;
    uint8_t *p = malloc(n ? n : 1);
    memcpy(p, data + 1, n);
    if ((mode & M_FIX_CRC) && n >= 4)
        put_u32(p + n - 4, ordo_crc32c(0, p, n - 4));

    core_t *core = core_create(HISTORY_REVS);
    CHECK(core != NULL);
    uint64_t rev = 77, entries = 77;
    char err[512] = "";
    int rc = load(core, p, n, (mode & M_FILE) != 0, &rev, &entries, err, sizeof err);
    free(p);
    if (rc != 0) {
        CHECK(rc == -1 && err[0] != '\0' && rev == 0 && entries == 0);
        core_destroy(core);
        return 0;
    }
    CHECK(core_rev(core) == rev);

    ordo_buf_t again = ORDO_BUF_INIT;
    CHECK(snap_encode_mem(core, NOW_MS, &again) == 0);
    core_t *copy = core_create(HISTORY_REVS);
    uint64_t rev2 = 0, entries2 = 0;
    rc = snap_load_mem(copy, again.data, again.len, "fuzz re-encoded", &rev2, &entries2, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "fuzz_snapshot: the re-encoded snapshot does not load: %s\n", err);
    CHECK(rc == 0);
    CHECK(rev2 == rev && core_rev(copy) == rev);
    CHECK(snap_digest(copy) == snap_digest(core));
    ordo_buf_free(&again);
    core_destroy(copy);
    core_destroy(core);
    return 0;
}

/* Seeds: snapshots of the cores the sample records build, after the
 * first 0, 6, 12, 20 and all of them, with the checksum mode on and off;
 * and one of the key-only state in format 2 (no queue entries). */
static void seed_state(const char *name, size_t count, int format)
{
    record_t recs[FUZZ_SAMPLE_RECORDS_MAX];
    size_t n = fuzz_sample_records(recs, FUZZ_SAMPLE_RECORDS_MAX);
    core_t *core = core_create(HISTORY_REVS);
    for (size_t i = 0; i < count && i < n; i++) {
        apply_result_t res;
        core_apply(core, &recs[i], &res);
    }
    ordo_buf_t s = ORDO_BUF_INIT;
    ordo_buf_append(&s, "", 1);
    ordo_buf_t snap = ORDO_BUF_INIT;
    CHECK(snap_encode_mem(core, NOW_MS, &snap) == 0);
    if (format != SNAP_FORMAT) {
        put_u32(snap.data + 8, (uint32_t)format);
        put_u32(snap.data + snap.len - 4, ordo_crc32c(0, snap.data, snap.len - 4));
    }
    ordo_buf_append(&s, snap.data, snap.len);
    char nm[64];
    s.data[0] = M_FIX_CRC;
    snprintf(nm, sizeof nm, "%s-crc", name);
    fuzz_seed(nm, s.data, s.len);
    s.data[0] = 0;
    fuzz_seed(name, s.data, s.len);
    s.data[0] = M_FILE;
    snprintf(nm, sizeof nm, "%s-file", name);
    fuzz_seed(nm, s.data, s.len);
    ordo_buf_free(&snap);
    ordo_buf_free(&s);
    core_destroy(core);
}

void fuzz_seeds(void)
{
    seed_state("empty", 0, SNAP_FORMAT);
    seed_state("keys", 6, SNAP_FORMAT);
    seed_state("keys-v2", 6, SNAP_FORMAT_V2);
    seed_state("coord", 12, SNAP_FORMAT);
    seed_state("queue", 24, SNAP_FORMAT);
    seed_state("all", FUZZ_SAMPLE_RECORDS_MAX, SNAP_FORMAT);
}
