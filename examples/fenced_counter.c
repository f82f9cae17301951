/*
 * fenced_counter.c -- a lock held while working (ordo_lock_holder_*): wait
 * for the lock, keep it alive automatically, fence every write with its
 * token.
 *
 *   fenced_counter -p PORT -n ROUNDS [-t TTL_MS]
 *
 * Holds lock "counter-lock" for ROUNDS increments of key "counter", each
 * a read then a KV.PUT ... FENCE counter-lock <token>, with a little work
 * between them, so the whole holding lasts several TTLs and lives only by
 * the automatic extension. Several copies run at once: each waits its
 * turn. A write refused (-NOTHOLDER) or a holding found lost prints
 * "LOST" and exits 3; at the end prints "done TOKEN".
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOCK "counter-lock"
#define KEY "counter"
/* Work per increment, so a holding spans several TTLs. */
#define WORK_MS 20
/* Waiting for the lock: longer than every other copy's whole holding. */
#define WAIT_MS 60000

int main(int argc, char **argv)
{
    ordo_client_opts_t co = { 0 };
    long rounds = 10, ttl = 300;
    int opt;
    while ((opt = getopt(argc, argv, "p:n:t:")) != -1) {
        switch (opt) {
        case 'p': co.port = atoi(optarg); break;
        case 'n': rounds = atol(optarg); break;
        case 't': ttl = atol(optarg); break;
        default: return 2;
        }
    }
    ordo_lock_holder_t *h;
    int rc = ordo_lock_holder_new(&h, &co, LOCK, ttl, WAIT_MS);
    if (rc != ORDO_OK)
        return fprintf(stderr, "fenced_counter: lock: %s\n", ordo_strerror(rc)), 1;
    int64_t token = ordo_lock_holder_token(h);
    ordo_client_t *c;
    if (ordo_client_new(&c, &co) != ORDO_OK) {
        ordo_lock_holder_free(h);
        return 1;
    }
    int status = 0;
    for (long i = 0; i < rounds && status == 0; i++) {
        ordo_kv_t kv;
        rc = ordo_kv_get(c, KEY, strlen(KEY), 0, &kv);
        long v = rc == ORDO_OK ? atol(kv.value) : 0;
        if (rc == ORDO_OK)
            ordo_kv_clear(&kv);
        nanosleep(&(struct timespec){ 0, WORK_MS * 1000000L }, NULL);
        if (!ordo_lock_holder_valid(h)) {
            printf("LOST before round %ld\n", i);
            status = 3;
            break;
        }
        char buf[24];
        snprintf(buf, sizeof buf, "%ld", v + 1);
        ordo_kv_cond_t cond = { .ifrev = -1, .fence_lock = LOCK, .fence_token = token };
        rc = ordo_kv_put(c, KEY, strlen(KEY), buf, strlen(buf), &cond, NULL);
        if (rc != ORDO_OK) {
            printf("LOST at round %ld: %s\n", i, ordo_strerror(rc));
            status = 3;
        }
    }
    ordo_client_free(c);
    rc = ordo_lock_holder_release(h);
    ordo_lock_holder_free(h);
    if (rc != ORDO_OK && status == 0) {
        printf("LOST at release: %s\n", ordo_strerror(rc));
        status = 3;
    }
    if (status == 0)
        printf("done %" PRId64 "\n", token);
    return status;
}
