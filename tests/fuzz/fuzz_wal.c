/*
 * fuzz_wal.c -- libFuzzer target for the WAL's reader: recovery of the
 * segment files of a directory (log/wal.c: wal_open(), which scans every
 * segment, replays its frames, cuts a torn tail, refuses or repairs
 * corruption). The reader works on files only, so each input becomes a
 * directory of files in a private tmpfs directory (fuzz_tmpdir()).
 *
 * Input: byte 0 is the mode, then up to SEGS_MAX segment files, each a
 * u16 length (little-endian) and that many bytes, or fewer if the input
 * ends first. Mode bits:
 *   0  write a valid header over each segment's first 40 bytes (the salt,
 *      bytes 24..31, kept), so the frames behind it are reached;
 *   1  fill in each frame's checksum (frames walked by their lengths from
 *      offset 40 while they fit), so records are replayed, not cut;
 *   2  repair (wal_options_t.repair): cut corruption instead of refusing;
 *   3  write a valid manifest naming the last segment (+1 with bit 7);
 *   4  after_rev 3 instead of 0 (records up to 3 are skipped);
 *   5  the first segment is number 5 instead of 1;
 *   6  a number is missing between the first two segments;
 *   7  the manifest names one segment past the last (a lost tail).
 *
 * Checked (abort on violation):
 *   - replayed records come in non-decreasing revision order, above
 *     after_rev, each no longer than WAL_RECORD_BYTES_LIMIT, and their
 *     bytes are readable (hashed);
 *   - a refused log says why (err is not empty);
 *   - an opened log, closed and opened again without repair, opens, cuts
 *     and repairs nothing, and replays exactly the same records;
 *   - a record appended then is replayed after them by a third open.
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=wal).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "core/record.h"
#include "fuzz.h"
#include "fuzz_records.h"
#include "log/wal.h"

#define SEGS_MAX 4
#define HEADER_BYTES 40 /* wal.c's WAL_HEADER_BYTES */

enum {
    M_FIX_HEADER = 1, M_FIX_FRAMES = 2, M_REPAIR = 4, M_MANIFEST = 8, M_AFTER = 16, M_SEQ5 = 32, M_GAP = 64,
    M_LOST_TAIL = 128
};

typedef struct replay_s {
    uint64_t after_rev;
    uint64_t records;
    uint64_t last_rev;
    uint64_t hash;
} replay_t;

static int replay(void *arg, uint64_t rev, const void *rec, size_t len)
{
    replay_t *r = arg;
    CHECK(rev > r->after_rev);
    CHECK(r->records == 0 || rev >= r->last_rev);
    CHECK(len <= WAL_RECORD_BYTES_LIMIT);
    const unsigned char *p = rec;
    r->hash = (r->hash ^ rev) * 0x100000001b3ull;
    for (size_t i = 0; i < len; i++)
        r->hash = (r->hash ^ p[i]) * 0x100000001b3ull;
    r->records++;
    r->last_rev = rev;
    return 0;
}

static void write_file(const char *dir, const char *name, const void *b, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(n == 0 || write(fd, b, n) == (ssize_t)n);
    close(fd);
}

static void fix_header(unsigned char *b, size_t n, uint64_t seq)
{
    if (n < HEADER_BYTES)
        return;
    memcpy(b, "ORDOWAL", 8);
    put_u32(b + 8, 1);
    put_u32(b + 12, HEADER_BYTES);
    put_u64(b + 16, seq);
    put_u32(b + 32, ordo_crc32c(0, b, 32));
    put_u32(b + 36, 0);
}

static void fix_frames(unsigned char *b, size_t n)
{
    if (n < HEADER_BYTES)
        return;
    uint64_t salt = get_u64(b + 24);
    for (size_t off = HEADER_BYTES; n - off >= WAL_FRAME_BYTES;) {
        uint32_t len = get_u32(b + off);
        if (len > n - off - WAL_FRAME_BYTES)
            break;
        unsigned char pre[20];
        put_u64(pre, salt);
        memcpy(pre + 8, b + off + 8, 8);
        put_u32(pre + 16, len);
        put_u32(b + off + 4, ordo_crc32c(ordo_crc32c(0, pre, sizeof pre), b + off + WAL_FRAME_BYTES, len));
        off += WAL_FRAME_BYTES + len;
    }
}

static void write_manifest(const char *dir, uint64_t newest, uint64_t from)
{
    unsigned char m[32] = {0};
    memcpy(m, "ORDOMAN", 8);
    put_u64(m + 8, newest);
    put_u64(m + 16, from);
    put_u32(m + 24, ordo_crc32c(0, m, 24));
    write_file(dir, "manifest", m, sizeof m);
}

static wal_t *open_log(const char *dir, bool repair, replay_t *r, wal_recovery_t *rec, char *err, size_t elen)
{
    wal_options_t opt = {.dir = dir, .policy = WAL_SYNC_NO, .repair = repair};
    r->records = r->last_rev = 0;
    r->hash = 0xcbf29ce484222325ull;
    return wal_open(&opt, r->after_rev, replay, r, rec, err, elen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *dir = fuzz_tmpdir();
    fuzz_clear_dir(dir);
    unsigned mode = data[0];
    size_t at = 1;
    uint64_t seq = (mode & M_SEQ5) ? 5 : 1, first = seq;
    int nsegs = 0;
    while (at < size && nsegs < SEGS_MAX) {
        size_t n = size - at;
        if (n >= 2) {
            size_t want = (size_t)data[at] | (size_t)data[at + 1] << 8;
            at += 2;
            n = want < n - 2 ? want : n - 2;
        }
        unsigned char *b = malloc(n ? n : 1);
        memcpy(b, data + at, n);
        at += n;
        if (mode & M_FIX_HEADER)
            fix_header(b, n, seq);
        if (mode & M_FIX_FRAMES)
            fix_frames(b, n);
        char name[32];
        snprintf(name, sizeof name, "%020" PRIu64 ".wal", seq);
        write_file(dir, name, b, n);
        free(b);
        nsegs++;
        seq += (nsegs == 1 && (mode & M_GAP)) ? 2 : 1;
    }
    if (mode & M_MANIFEST)
        write_manifest(dir, nsegs > 0 ? seq - 1 + ((mode & M_LOST_TAIL) ? 1 : 0) : first, first);

    char err[1024] = "";
    wal_recovery_t rec;
    replay_t r1 = {.after_rev = (mode & M_AFTER) ? 3 : 0};
    wal_t *w = open_log(dir, (mode & M_REPAIR) != 0, &r1, &rec, err, sizeof err);
    if (w == NULL) {
        CHECK(err[0] != '\0');
        return 0;
    }
    CHECK(rec.records == r1.records);
    CHECK(r1.records == 0 || rec.last_rev == r1.last_rev);
    wal_close(w);

    /* Recovery leaves a clean log: the same records, nothing more to cut. */
    replay_t r2 = {.after_rev = r1.after_rev};
    w = open_log(dir, false, &r2, &rec, err, sizeof err);
    if (w == NULL)
        fprintf(stderr, "fuzz_wal: reopen failed: %s\n", err);
    CHECK(w != NULL);
    CHECK(!rec.repaired && rec.truncated_bytes == 0 && rec.truncated_file[0] == '\0');
    CHECK(r2.records == r1.records && r2.last_rev == r1.last_rev && r2.hash == r1.hash);

    /* And it takes a record after them. */
    uint64_t next = (rec.last_rev > r1.after_rev ? rec.last_rev : r1.after_rev) + 1;
    if (next == 0) { /* the log ends at revision UINT64_MAX */
        wal_close(w);
        return 0;
    }
    CHECK(wal_append(w, next, "fuzz", 4) == 0);
    wal_close(w);
    replay_t r3 = {.after_rev = r1.after_rev};
    w = open_log(dir, false, &r3, &rec, err, sizeof err);
    CHECK(w != NULL);
    CHECK(r3.records == r1.records + 1 && r3.last_rev == next);
    wal_close(w);
    return 0;
}

/* Seeds: logs written by the WAL itself (the sample records, one or more
 * segments), read back into this target's input format, with modes that
 * keep their checksums valid under mutation and with none. */
static void seed_log(const char *name, uint64_t segment_bytes, const unsigned modes[], int nmodes)
{
    const char *dir = fuzz_tmpdir();
    fuzz_clear_dir(dir);
    char err[512];
    wal_options_t opt = {.dir = dir, .policy = WAL_SYNC_NO, .segment_bytes = segment_bytes};
    wal_t *w = wal_open(&opt, 0, NULL, NULL, NULL, err, sizeof err);
    CHECK(w != NULL);
    record_t recs[FUZZ_SAMPLE_RECORDS_MAX];
    size_t n = fuzz_sample_records(recs, FUZZ_SAMPLE_RECORDS_MAX);
    for (size_t i = 0; i < n; i++) {
        ordo_buf_t b = ORDO_BUF_INIT;
        record_encode(&recs[i], &b);
        CHECK(wal_append(w, i + 1, b.data, b.len) == 0);
        ordo_buf_free(&b);
    }
    wal_close(w);
    ordo_buf_t in = ORDO_BUF_INIT;
    ordo_buf_append(&in, "", 1);
    for (uint64_t seq = 1; seq <= SEGS_MAX; seq++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%020" PRIu64 ".wal", dir, seq);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            break;
        char buf[65536];
        size_t k = fread(buf, 1, sizeof buf, f);
        fclose(f);
        CHECK(k < sizeof buf);
        unsigned char len16[2] = {(unsigned char)(k & 0xff), (unsigned char)(k >> 8)};
        ordo_buf_append(&in, len16, 2);
        ordo_buf_append(&in, buf, k);
    }
    for (int i = 0; i < nmodes; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s-mode%02x", name, modes[i]);
        in.data[0] = (char)modes[i];
        fuzz_seed(nm, in.data, in.len);
    }
    ordo_buf_free(&in);
}

void fuzz_seeds(void)
{
    static const unsigned modes[] = {0, M_FIX_HEADER | M_FIX_FRAMES, M_FIX_HEADER | M_FIX_FRAMES | M_REPAIR,
                                     M_FIX_HEADER | M_FIX_FRAMES | M_MANIFEST | M_AFTER};
    seed_log("one-segment", 0, modes, 4);
    seed_log("segments", 400, modes, 4);
    static const unsigned gap[] = {M_FIX_HEADER | M_FIX_FRAMES | M_GAP | M_MANIFEST,
                                   M_FIX_HEADER | M_FIX_FRAMES | M_LOST_TAIL | M_MANIFEST | M_REPAIR};
    seed_log("gap", 400, gap, 2);
}
