/*
 * expire.c -- the writer's side of key expiry.
 *
 * Expiry: SET PX/EX stores an absolute deadline (the writer's clock) with
 * the put. The expiry timer fires once the earliest deadline has passed
 * and applies one REC_EXPIRE record per due key, through the door, each
 * naming its key; apply deletes the key if it is still live. Dispatch runs
 * expire_due() before every command too (cmd/registry.c), so a command
 * that comes between a deadline and the timer sees the key gone, and no
 * client reads an expired value. Only a writer that makes records expires
 * (writer_makes_records(), apply.h); a refused record ends the pass, and
 * the key stays until writes work or this member leads.
 */
#include "expire.h"

#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "turn.h"

static void on_expire_timer(writer_timer_t *t)
{
    server_t *s = t->data;
    server_tick(s);
    expire_due(s);
    turn_flush(s);
}

/* Expire every key due by the writer's clock, one record per key. "Due" is
 * deadline < now_ms, not <=: the clock is in whole ms, so a SET stamped
 * now_ms arrived up to 1 ms after it, and the key must outlive arrival +
 * TTL in real time (never early; see docs/protocol.md). */
void expire_due(server_t *s)
{
    if (!writer_makes_records(s))
        return; /* keys stay until writes work, or on the leader (apply.h) */
    char stackkey[256];
    uint64_t next;
    while ((next = core_next_expiry(s->core)) != 0 && next < s->now_ms) {
        size_t klen;
        const char *k = core_first_expiring(s->core, &klen);
        char *key = klen <= sizeof stackkey ? stackkey : ordo_xmalloc(klen);
        memcpy(key, k, klen); /* apply frees the expiry entry k points into */
        record_t rec = {.type = REC_EXPIRE, .expire = {.key = key, .klen = (uint32_t)klen}};
        apply_result_t res;
        int verdict = writer_submit(s, &rec, WRITER_SELF, &res, NULL, 0);
        if (verdict == WRITER_APPLIED)
            s->stats.expired_keys_total += res.kv.changed ? 1 : 0;
        if (key != stackkey)
            free(key);
        if (verdict != WRITER_APPLIED)
            return; /* refused (the log failed, or leadership ended): the key stays, and so must the loop */
    }
    expire_schedule(s);
}

void expire_schedule(server_t *s)
{
    uint64_t next = core_next_expiry(s->core);
    if (next == 0 || !writer_makes_records(s)) /* apply.h: cluster.c re-arms this when it leads */
        writer_timer_stop(&s->writer.expire_timer);
    else
        writer_timer_arm_earlier(&s->writer.expire_timer, next); /* a later one re-arms when it fires */
}

void expire_start(server_t *s)
{
    writer_timer_init(&s->writer.expire_timer, s->loop, s, on_expire_timer, s);
}

void expire_close_handles(server_t *s)
{
    writer_timer_close(&s->writer.expire_timer);
}
