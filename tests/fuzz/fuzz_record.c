/*
 * fuzz_record.c -- libFuzzer target for the record decoder
 * (core/record.c: record_decode(), record_txn_next()).
 *
 * Input: the bytes of one record, any format. libFuzzer hands them in a
 * buffer of exactly that size, so ASan catches any read past the end.
 *
 * Checked on every input that decodes (abort on violation):
 *   - the record is record_valid();
 *   - round trip: a format-3 record re-encodes to exactly the input; a
 *     format-1 or 2 record re-encodes (in format 3) to bytes that decode
 *     to a record encoding to the same bytes again;
 *   - the input one byte shorter, or with one byte more, is refused (a
 *     short record, trailing bytes);
 *   - a TXN's sub-records read back one by one, as many as its count,
 *     none a TXN, each re-encoding to its own bytes;
 *   - a queue record's queue name lies inside the input.
 *
 * Build and run: scripts/fuzz.sh (FUZZ_TARGET=record).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "core/record.h"
#include "fuzz.h"
#include "fuzz_records.h"

static int inside(const void *p, size_t n, const uint8_t *base, size_t len)
{
    const uint8_t *q = p;
    return n == 0 || (q >= base && n <= len && (size_t)(q - base) <= len - n);
}

static void check_txn(const record_t *r)
{
    size_t off = 0, prev = 0;
    uint64_t n = 0;
    record_t sub;
    int rc;
    while ((rc = record_txn_next(&r->txn, &off, &sub)) == 1) {
        CHECK(off > prev && off <= r->txn.len);
        CHECK(sub.type != REC_TXN && record_valid(&sub));
        ordo_buf_t b = ORDO_BUF_INIT;
        record_encode(&sub, &b);
        CHECK(b.len == off - prev - 4 && memcmp(b.data, r->txn.recs + prev + 4, b.len) == 0);
        ordo_buf_free(&b);
        prev = off;
        n++;
    }
    CHECK(rc == 0 && off == r->txn.len && n == r->txn.count);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    record_t r;
    if (record_decode(data, size, &r) != 0)
        return 0;
    CHECK(record_valid(&r));
    CHECK(record_format(data, size) == RECORD_FORMAT || record_format(data, size) == RECORD_FORMAT_V2 ||
          record_format(data, size) == RECORD_FORMAT_V1);
    uint32_t qlen = 0;
    const char *q = record_queue(&r, &qlen);
    CHECK(inside(q, qlen, data, size));
    if (r.type == REC_TXN) {
        CHECK(inside(r.txn.recs, r.txn.len, data, size));
        check_txn(&r);
    }

    ordo_buf_t enc = ORDO_BUF_INIT;
    record_encode(&r, &enc);
    if (record_format(data, size) == RECORD_FORMAT) {
        CHECK(enc.len == size && memcmp(enc.data, data, size) == 0);
    } else {
        record_t again;
        CHECK(record_decode(enc.data, enc.len, &again) == 0);
        ordo_buf_t enc2 = ORDO_BUF_INIT;
        record_encode(&again, &enc2);
        CHECK(enc2.len == enc.len && memcmp(enc2.data, enc.data, enc.len) == 0);
        ordo_buf_free(&enc2);
    }
    ordo_buf_free(&enc);

    /* One byte short, one byte more: refused. */
    record_t other;
    CHECK(record_decode(data, size - 1, &other) != 0);
    uint8_t *longer = malloc(size + 1);
    memcpy(longer, data, size);
    longer[size] = 0;
    CHECK(record_decode(longer, size + 1, &other) != 0);
    free(longer);
    return 0;
}

/* Seeds: every sample record in format 3, and a PUT and a Q_PUSH in the
 * fixed layouts of formats 2 and 1 (record.h). */
static void legacy_seed(const char *name, int format, uint8_t type, uint8_t flags, const char *key,
                        const char *val, const char *nm)
{
    uint8_t b[256] = {0};
    b[0] = (uint8_t)format;
    b[1] = type;
    b[2] = flags;
    put_u64(b + 3, 1700000000000ull);
    size_t at = 68;
    const char *s[4] = {key, val, nm, ""};
    for (int i = 0; i < (format == 1 ? 3 : 4); i++) {
        uint32_t n = (uint32_t)strlen(s[i]);
        put_u32(b + at, n);
        memcpy(b + at + 4, s[i], n);
        at += 4 + n;
    }
    fuzz_seed(name, b, at);
}

void fuzz_seeds(void)
{
    record_t recs[FUZZ_SAMPLE_RECORDS_MAX];
    size_t n = fuzz_sample_records(recs, FUZZ_SAMPLE_RECORDS_MAX);
    for (size_t i = 0; i < n; i++) {
        ordo_buf_t b = ORDO_BUF_INIT;
        record_encode(&recs[i], &b);
        char name[32];
        snprintf(name, sizeof name, "v3-%02zu-type%u", i, recs[i].type);
        fuzz_seed(name, b.data, b.len);
        ordo_buf_free(&b);
    }
    legacy_seed("v2-put", 2, REC_PUT, 0, "key", "value", "");
    legacy_seed("v2-qpush", 2, REC_Q_PUSH, 1, "k", "payload", "q");
    legacy_seed("v1-put", 1, REC_PUT, 0, "key", "value", "");
}
