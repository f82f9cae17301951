/*
 * leader.c -- a leader career that hands over (ordo_career_run).
 *
 *   leader (-p PORT | -a H:P,H:P...) -e ELECTION -i ID -n ROUNDS [-t TTL_MS] [-C CA]
 *
 * -C speaks TLS to the servers' tls-ports, verifying them against the CA
 * certificate file CA.
 *
 * Prints "inaugurate ID TERM HANDOVER HOW" (HANDOVER "-" when none; HOW
 * "handed" for a clean hand-over, "left" for a value a leader that died
 * left behind, or none), then
 * "execute ID TERM N" per round; after ROUNDS rounds it hands over the value
 * "ID:ROUNDS", prints "handover ID TERM VALUE" and exits 0. Each round
 * checks and moves a witness key ("leader-witness", the highest term that
 * has executed): finding a higher term than its own means a newer leader
 * executed before this one stopped, printed as "VIOLATION ..." (exit 3).
 * The witness write is a compare-and-set, so two leaders in one term, or
 * an old one after a new one, cannot both pass unseen.
 */
#include "ordo/client.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WITNESS "leader-witness"
/* The pause between rounds stands for the leader's real work. */
#define ROUND_WORK_MS 10

typedef struct app {
    const char *id;
    long rounds, done;
    ordo_client_t *c;
    int violation;
} app_t;

static int inaugurate(void *arg, int64_t term, const char *ho, size_t ho_len, int handed_over)
{
    app_t *a = arg;
    printf("inaugurate %s %" PRId64 " %.*s %s\n", a->id, term, ho ? (int)ho_len : 1, ho ? ho : "-",
           handed_over ? "handed" : "left");
    fflush(stdout);
    a->done = 0;
    return 0;
}

/* Move the witness to term; 0, or 1 if a higher term is there. */
static int witness(app_t *a, int64_t term)
{
    for (;;) {
        ordo_kv_t kv;
        int rc = ordo_kv_get(a->c, WITNESS, strlen(WITNESS), 0, &kv);
        if (rc != ORDO_OK && rc != ORDO_ENOTFOUND)
            return 0; /* unreachable: the keeper decides whether we still lead */
        int64_t seen = rc == ORDO_OK ? strtoll(kv.value, NULL, 10) : 0;
        int64_t rev = rc == ORDO_OK ? kv.mod_rev : 0;
        ordo_kv_clear(&kv);
        if (seen > term) {
            printf("VIOLATION %s term %" PRId64 " executing after term %" PRId64 "\n", a->id, term, seen);
            fflush(stdout);
            return 1;
        }
        if (seen == term)
            return 0;
        char v[24];
        snprintf(v, sizeof v, "%" PRId64, term);
        int64_t nrev;
        rc = ordo_kv_cas(a->c, WITNESS, strlen(WITNESS), v, strlen(v), rev, &nrev);
        if (rc != ORDO_ECONFLICT)
            return 0;
    }
}

static int execute(void *arg, int64_t term)
{
    app_t *a = arg;
    if (witness(a, term)) {
        a->violation = 1;
        return 1;
    }
    a->done++;
    printf("execute %s %" PRId64 " %ld\n", a->id, term, a->done);
    fflush(stdout);
    nanosleep(&(struct timespec){ 0, ROUND_WORK_MS * 1000000L }, NULL);
    return a->done >= a->rounds;
}

static char *hand_over(void *arg, int64_t term, size_t *len)
{
    app_t *a = arg;
    char *v = malloc(64);
    if (v == NULL)
        return NULL;
    *len = (size_t)snprintf(v, 64, "%s:%ld", a->id, a->done);
    printf("handover %s %" PRId64 " %s\n", a->id, term, v);
    fflush(stdout);
    return v;
}

static void lost(void *arg, int64_t term)
{
    app_t *a = arg;
    printf("lost %s %" PRId64 "\n", a->id, term);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    ordo_career_opts_t o = { .inaugurate = inaugurate, .execute = execute, .hand_over = hand_over,
                             .lost = lost };
    app_t a = { .id = "x", .rounds = 10 };
    int opt;
    while ((opt = getopt(argc, argv, "p:a:e:i:n:t:C:")) != -1) {
        switch (opt) {
        case 'p': o.conn.port = atoi(optarg); break;
        case 'a': o.conn.addrs = optarg; break; /* a cluster's members */
        case 'e': o.election = optarg; break;
        case 'i': a.id = optarg; break;
        case 'n': a.rounds = atol(optarg); break;
        case 't': o.ttl_ms = atol(optarg); break;
        case 'C': o.conn.tls = 1; o.conn.tls_ca_file = optarg; break; /* a tls-port, verified against CA */
        default: return 2;
        }
    }
    if (o.election == NULL)
        return fprintf(stderr, "usage: leader (-p PORT | -a H:P,...) -e ELECTION -i ID -n ROUNDS [-t TTL_MS] [-C CA]\n"), 2;
    o.value = a.id;
    o.value_len = strlen(a.id);
    o.arg = &a;
    if (ordo_client_new(&a.c, &o.conn) != ORDO_OK)
        return 1;
    int rc = ordo_career_run(&o, NULL);
    ordo_client_free(a.c);
    if (rc != ORDO_OK)
        fprintf(stderr, "leader: %s\n", ordo_strerror(rc));
    return a.violation ? 3 : rc == ORDO_OK ? 0 : 1;
}
