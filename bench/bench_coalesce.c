/*
 * bench_coalesce.c -- cost of the coalescing FIFO's put and take as the
 * number of distinct waiting keys grows (1k, 100k, 1M). Both are O(1), so
 * the figures should stay roughly flat; what growth there is comes from
 * cache misses on a larger table and list.
 *
 * One thread. The queue is first filled with every key (8-byte binary
 * keys), then each round times two loops of OPS operations:
 *   put        a put of a pseudo-random key, which is always waiting, so it
 *              coalesces (replace in place, old item handed back);
 *   take+put   take the oldest entry and put its key back at the tail (an
 *              insert), so the queue stays populated with all keys.
 * Each figure is ns per operation; the report gives the median of ROUNDS
 * rounds with the min and max. Total runtime is a few seconds.
 *
 * Usage: bench_coalesce [ops_per_round]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ordo/coalesce.h"
#include "lib/sync.h"

#define ROUNDS 5
#define OPS_DEFAULT 1000000u

typedef struct {
    double put_ns[ROUNDS];
    double cycle_ns[ROUNDS];
} results_t;

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "bench_coalesce: %s: %s\n", what, ordo_strerror(rc));
        exit(1);
    }
}

static double time_puts(ordo_coalesce_t *q, uint64_t nkeys, unsigned ops, uint64_t *rnd)
{
    uint64_t t0 = ordo_now_ns();
    for (unsigned i = 0; i < ops; i++) {
        uint64_t k = xorshift(rnd) % nkeys;
        void *old;
        int rc = ordo_coalesce_put(q, &k, sizeof k, (void *)(uintptr_t)i, 0, &old);
        if (rc != ORDO_COALESCE_REPLACED)
            check(rc < 0 ? rc : ORDO_EINVAL, "coalescing put");
    }
    return (double)(ordo_now_ns() - t0) / ops;
}

static double time_cycles(ordo_coalesce_t *q, unsigned ops)
{
    uint64_t t0 = ordo_now_ns();
    for (unsigned i = 0; i < ops; i++) {
        uint64_t k;
        size_t len;
        void *item;
        check(ordo_coalesce_take(q, 0, &item, &k, sizeof k, &len), "take");
        int rc = ordo_coalesce_put(q, &k, sizeof k, item, 0, NULL);
        if (rc != ORDO_COALESCE_INSERTED)
            check(rc < 0 ? rc : ORDO_EINVAL, "re-put");
    }
    return (double)(ordo_now_ns() - t0) / ops;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, uint64_t nkeys, double *ns)
{
    qsort(ns, ROUNDS, sizeof *ns, cmp_double);
    printf("%-9s keys=%-8" PRIu64 " median %7.1f ns/op  (min %7.1f, max %7.1f)\n", what, nkeys,
           ns[ROUNDS / 2], ns[0], ns[ROUNDS - 1]);
}

static void drop_item(const void *key, size_t key_len, void *item, void *arg)
{
    (void)key, (void)key_len, (void)item, (void)arg; /* items here own nothing */
}

static void run(uint64_t nkeys, unsigned ops)
{
    ordo_coalesce_t *q;
    check(ordo_coalesce_create(NULL, &q), "create");
    for (uint64_t k = 0; k < nkeys; k++)
        check(ordo_coalesce_put(q, &k, sizeof k, NULL, 0, NULL), "fill");
    results_t r;
    uint64_t rnd = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < ROUNDS; i++) {
        r.put_ns[i] = time_puts(q, nkeys, ops, &rnd);
        r.cycle_ns[i] = time_cycles(q, ops);
    }
    if (ordo_coalesce_len(q) != nkeys) {
        fprintf(stderr, "bench_coalesce: queue lost keys\n");
        exit(1);
    }
    report("put", nkeys, r.put_ns);
    report("take+put", nkeys, r.cycle_ns);
    ordo_coalesce_close(q);
    ordo_coalesce_destroy(q, drop_item, NULL);
}

int main(int argc, char **argv)
{
    unsigned ops = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : OPS_DEFAULT;
    if (ops == 0)
        ops = OPS_DEFAULT;
    printf("coalescing FIFO, 1 thread, %u ops per round, %d rounds\n", ops, ROUNDS);
    const uint64_t sizes[] = {1000, 100000, 1000000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        run(sizes[i], ops);
    return 0;
}
