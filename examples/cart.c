/*
 * cart.c -- the cart service with a limit: add an item to a user's cart
 * unless the cart already holds LIMIT items, safely under any number of
 * concurrent adders, with a compare-and-set on the cart's revision.
 *
 *   cart -p PORT add USER ITEM [LIMIT]     prints "added N" or "full N"
 *   cart -p PORT show USER                 prints the items, one a line
 *
 * The cart is the key "cart/USER", its value the items joined by '\n'.
 * An add reads the cart (value and mod revision), refuses if it is full,
 * else writes the new value with IFREV = the revision it read (0: absent).
 * A concurrent change makes the write fail with -CONFLICT and the add
 * starts again from a fresh read: the limit holds without a lock.
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Retries after conflicts before giving up; each conflict means another
 * adder made progress, so this bounds only pathological contention. */
#define CART_CAS_TRIES_MAX 1000

static size_t count_items(const char *v, size_t n)
{
    if (n == 0)
        return 0;
    size_t k = 1;
    for (size_t i = 0; i < n; i++)
        k += v[i] == '\n';
    return k;
}

static int add(ordo_client_t *c, const char *key, const char *item, size_t limit)
{
    for (int attempt = 0; attempt < CART_CAS_TRIES_MAX; attempt++) {
        ordo_kv_t kv;
        int rc = ordo_kv_get(c, key, strlen(key), 0, &kv);
        if (rc != ORDO_OK && rc != ORDO_ENOTFOUND)
            return fprintf(stderr, "cart: get: %s\n", ordo_strerror(rc)), 1;
        size_t n = rc == ORDO_OK ? count_items(kv.value, kv.value_len) : 0;
        if (n >= limit) {
            printf("full %zu\n", n);
            ordo_kv_clear(&kv);
            return 0;
        }
        size_t il = strlen(item), nl = (n ? kv.value_len + 1 : 0) + il;
        char *nv = malloc(nl + 1);
        if (nv == NULL)
            return 1;
        if (n) {
            memcpy(nv, kv.value, kv.value_len);
            nv[kv.value_len] = '\n';
        }
        memcpy(nv + (n ? kv.value_len + 1 : 0), item, il);
        int64_t rev;
        rc = ordo_kv_cas(c, key, strlen(key), nv, nl, rc == ORDO_OK ? kv.mod_rev : 0, &rev);
        free(nv);
        ordo_kv_clear(&kv);
        if (rc == ORDO_OK) {
            printf("added %zu\n", n + 1);
            return 0;
        }
        if (rc != ORDO_ECONFLICT)
            return fprintf(stderr, "cart: put: %s\n", ordo_strerror(rc)), 1;
    }
    fprintf(stderr, "cart: too much contention\n");
    return 1;
}

int main(int argc, char **argv)
{
    ordo_client_opts_t co = { 0 };
    int opt;
    while ((opt = getopt(argc, argv, "p:h:")) != -1) {
        if (opt == 'p')
            co.port = atoi(optarg);
        else if (opt == 'h')
            co.host = optarg;
        else
            return 2;
    }
    argc -= optind;
    argv += optind;
    if (argc < 2)
        return fprintf(stderr, "usage: cart [-p PORT] add USER ITEM [LIMIT] | show USER\n"), 2;
    char key[300];
    snprintf(key, sizeof key, "cart/%s", argv[1]);
    ordo_client_t *c;
    if (ordo_client_new(&c, &co) != ORDO_OK)
        return 1;
    int rc = 2;
    if (strcmp(argv[0], "add") == 0 && argc >= 3) {
        rc = add(c, key, argv[2], argc > 3 ? (size_t)atol(argv[3]) : 10);
    } else if (strcmp(argv[0], "show") == 0) {
        ordo_kv_t kv;
        int g = ordo_kv_get(c, key, strlen(key), 0, &kv);
        rc = g == ORDO_OK || g == ORDO_ENOTFOUND ? 0 : 1;
        if (g == ORDO_OK) {
            printf("%.*s\n", (int)kv.value_len, kv.value);
            ordo_kv_clear(&kv);
        }
    }
    ordo_client_free(c);
    return rc;
}
