/*
 * fuzz_raft_entry.c -- libFuzzer target for how a committed raft entry's
 * bytes become records on a follower (log/raft_log.c: raft_entry_batch(),
 * then log_batch_next() over the batch and record_decode() of each
 * record, as writer/cluster.c's deliver hook does through
 * persist_apply_stored()). Applying them is not fuzzed here: core_apply()
 * asserts preconditions the command layer guarantees (a lease's ttl > 0,
 * ...), which a well-formed record of random fields breaks at once.
 *
 * Input: the entry's bytes, "ORDB" | batch length u32 | batch | padding.
 *
 * Checked (abort on violation):
 *   - an entry that is taken has its batch inside the input, right after
 *     the 8-byte header; walking it yields exactly out->records records,
 *     the last of revision out->last_rev, each inside the batch;
 *   - round trip: when its revisions do not decrease, the same records
 *     framed again by the writer's log_batch_begin()/log_batch_end() give
 *     the input's batch byte for byte, but for the 4 bytes each frame
 *     keeps for the log (the writer leaves them zero);
 *   - every record that decodes is valid and, read in format 3,
 *     re-encodes to its own bytes; delivery stops at the first record
 *     that does not decode (a follower stops there).
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=raft_entry).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "core/core.h"
#include "core/record.h"
#include "fuzz.h"
#include "fuzz_records.h"
#include "log/log.h"
#include "log/raft_log.h"

#define ENTRY_HEADER_BYTES 8
/* Retained history of the follower's core: any will do. */
#define HISTORY_REVS 1000

static int inside(const void *p, size_t n, const void *base, size_t len)
{
    const char *q = p, *b = base;
    return q >= b && n <= len && (size_t)(q - b) <= len - n;
}

/* Frame the batch's records again as the writer does; compare. */
static void check_reframed(const log_batch_t *in)
{
    log_batch_t out = {ORDO_BUF_INIT, 0, 0};
    size_t pos = 0, len;
    uint64_t rev;
    const void *rec;
    while (log_batch_next(in, &pos, &rev, &rec, &len)) {
        size_t at = log_batch_begin(&out, rev);
        ordo_buf_append(&out.buf, rec, len);
        CHECK(log_batch_end(&out, at) == len);
    }
    CHECK(out.records == in->records && out.last_rev == in->last_rev && out.buf.len == in->buf.len);
    for (size_t off = 0; off < out.buf.len;) {
        uint32_t n = get_u32(in->buf.data + off);
        CHECK(memcmp(out.buf.data + off, in->buf.data + off, 4) == 0);
        CHECK(memcmp(out.buf.data + off + 8, in->buf.data + off + 8, LOG_ENTRY_HEADER_BYTES - 8 + n) == 0);
        off += LOG_ENTRY_HEADER_BYTES + n;
    }
    log_batch_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_batch_t b;
    int rc = raft_entry_batch(data, size, &b);
    CHECK(rc == 0 || rc == RAFT_ENTRY_FOREIGN || rc == RAFT_ENTRY_MALFORMED);
    if (rc != 0)
        return 0;
    CHECK(b.buf.data == (const char *)data + ENTRY_HEADER_BYTES);
    CHECK(b.buf.len <= size - ENTRY_HEADER_BYTES);

    size_t pos = 0, len;
    uint64_t rev, last = 0, prev = 0;
    const void *rec;
    uint32_t n = 0;
    bool ordered = true, delivering = true;
    while (log_batch_next(&b, &pos, &rev, &rec, &len)) {
        CHECK(inside(rec, len, b.buf.data, b.buf.len) && pos <= b.buf.len);
        ordered &= n == 0 || rev >= prev;
        prev = last = rev;
        n++;
        record_t r;
        if (delivering && record_decode(rec, len, &r) == 0) {
            CHECK(record_valid(&r));
            if (record_format(rec, len) == RECORD_FORMAT) {
                ordo_buf_t enc = ORDO_BUF_INIT;
                record_encode(&r, &enc);
                CHECK(enc.len == len && memcmp(enc.data, rec, len) == 0);
                ordo_buf_free(&enc);
            }
        } else {
            delivering = false;
        }
    }
    CHECK(n == b.records && (n == 0 || last == b.last_rev));
    if (ordered)
        check_reframed(&b);
    return 0;
}

/* Seeds: entries as the leader proposes them (raft_log.c, propose_entry):
 * the sample records applied in order, each tagged with the revision it
 * reached, the first 1, 8 and all of them; and an entry without records. */
static void seed_entry(const char *name, size_t count)
{
    record_t recs[FUZZ_SAMPLE_RECORDS_MAX];
    size_t n = fuzz_sample_records(recs, FUZZ_SAMPLE_RECORDS_MAX);
    if (count > n)
        count = n;
    core_t *core = core_create(HISTORY_REVS);
    log_batch_t b = {ORDO_BUF_INIT, 0, 0};
    for (size_t i = 0; i < count; i++) {
        apply_result_t res;
        core_apply(core, &recs[i], &res);
        size_t at = log_batch_begin(&b, core_rev(core));
        record_encode(&recs[i], &b.buf);
        log_batch_end(&b, at);
    }
    core_destroy(core);
    ordo_buf_t e = ORDO_BUF_INIT;
    ordo_buf_append(&e, "ORDB", 4);
    put_u32(ordo_buf_reserve(&e, 4), (uint32_t)b.buf.len);
    e.len += 4;
    ordo_buf_append(&e, b.buf.data, b.buf.len);
    while (e.len % 8 != 0)
        ordo_buf_append(&e, "", 1);
    fuzz_seed(name, e.data, e.len);
    ordo_buf_free(&e);
    log_batch_free(&b);
}

void fuzz_seeds(void)
{
    seed_entry("empty", 0);
    seed_entry("one", 1);
    seed_entry("eight", 8);
    seed_entry("all", FUZZ_SAMPLE_RECORDS_MAX);
}
