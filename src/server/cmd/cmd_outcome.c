/*
 * cmd_outcome.c -- outcomes as RESP: the one place where what the writer
 * tells a client (writer/outcome.h) becomes bytes. The writer's answer
 * hook (server.h) is net's (net.c: net_answer()), which renders here into
 * the connection's output.
 *
 * Handlers render their immediate replies of the same shapes here too
 * (a pull's messages, a message's fate, a won campaign, an observer's
 * first event), so each shape is written once, for a parked client and
 * for one answered at once alike.
 *
 * Counting: an error outcome counts in errors_total (not by code: the
 * writer's answers, TIMEOUT, DEADLETTER and the like, are not the command
 * layer's errors, cmd.h); an event counts in watch_events_total.
 */
#include "cmd.h"
#include "writer/outcome.h"

#include <assert.h>
#include <string.h>

/* Q.WATCH event names, by enum queue_event_type. */
static const char *const qev_names[] = {
    [QUEUE_EV_PUSHED] = "pushed", [QUEUE_EV_DELIVERED] = "delivered", [QUEUE_EV_ACKED] = "acked",
    [QUEUE_EV_NACKED] = "nacked", [QUEUE_EV_DEADLETTERED] = "deadlettered", [QUEUE_EV_PARKED] = "parked",
};

/* One delivered message: [id, key, payload, attempt, token]. */
void cmd_render_message(ordo_buf_t *out, const queue_delivery_t *d)
{
    resp_add_array(out, 5);
    resp_add_uint(out, d->id);
    resp_add_bulk(out, d->key, d->klen);
    resp_add_bulk(out, d->payload, d->plen);
    resp_add_uint(out, d->attempt);
    resp_add_uint(out, d->token);
}

/* A message's fate: the kept result (DONE), -DEADLETTER with its reason,
 * -CANCELLED, or nil (done without a result, or none kept). */
static void render_fate(server_t *s, ordo_buf_t *out, int proto, uint64_t id, int fate, const queue_result_t *r)
{
    if (fate == QUEUE_FATE_DEADLETTER) {
        s->stats.errors_total++;
        bool why = r != NULL && r->fate == QUEUE_FATE_DEADLETTER && r->rlen > 0;
        const char *reason = !why                                                        ? "exhausted its attempts"
                             : r->rlen == strlen(QUEUE_REASON_MAXAGE) &&
                                       memcmp(r->result, QUEUE_REASON_MAXAGE, r->rlen) == 0 ? "passed MAXAGE"
                                                                                            : "waited past MAXWAIT";
        resp_add_errorf(out, "DEADLETTER message %llu %s", (unsigned long long)id, reason);
    } else if (fate == QUEUE_FATE_CANCELLED) {
        s->stats.errors_total++;
        resp_add_errorf(out, "CANCELLED message %llu was cancelled before any delivery (Q.CANCEL)",
                        (unsigned long long)id);
    } else if (fate == QUEUE_FATE_DONE && r != NULL && r->fate == QUEUE_FATE_DONE) {
        resp_add_bulk(out, r->result, r->rlen);
    } else {
        resp_add_null(out, proto);
    }
}

/* A won campaign: the term, or with HANDOVER [term, value] (nil: none),
 * or [term, lapsed term's last value, 0] when the value was not handed
 * over but left by a term that lapsed. */
static void render_campaign(ordo_buf_t *out, int proto, const outcome_t *o)
{
    if (!o->campaign.handover) {
        resp_add_uint(out, o->campaign.term);
        return;
    }
    resp_add_array(out, o->campaign.lapsed ? 3 : 2);
    resp_add_uint(out, o->campaign.term);
    if (o->campaign.value == NULL)
        resp_add_null(out, proto);
    else
        resp_add_bulk(out, o->campaign.value, o->campaign.vlen);
    if (o->campaign.lapsed)
        resp_add_int(out, 0);
}

/* ["leader", name, term, value] (term 0 and nil: vacant). */
static void render_leader(ordo_buf_t *out, int proto, const outcome_t *o)
{
    resp_add_push(out, proto, 4);
    resp_add_bulk_str(out, "leader");
    resp_add_bulk(out, o->leader.name, o->leader.nlen);
    resp_add_uint(out, o->leader.term);
    if (o->leader.term == 0)
        resp_add_null(out, proto);
    else
        resp_add_bulk(out, o->leader.value, o->leader.vlen);
}

/* ["qwatch", id, rev, event, queue, key, msg_id, detail]: detail is the
 * payload (pushed), the attempt (delivered), the result or nil (acked),
 * when the next attempt may start, 0 for at once (nacked),
 * the dead-letter queue's message id or 0 (deadlettered), nil otherwise. */
static void render_qevent(ordo_buf_t *out, int proto, const outcome_t *o)
{
    const queue_event_t *ev = o->qevent.ev;
    assert(ev->type >= QUEUE_EV_PUSHED && ev->type <= QUEUE_EV_PARKED);
    resp_add_push(out, proto, 8);
    resp_add_bulk_str(out, "qwatch");
    resp_add_uint(out, o->qevent.watch_id);
    resp_add_uint(out, o->qevent.rev);
    resp_add_bulk_str(out, qev_names[ev->type]);
    resp_add_bulk(out, ev->queue, ev->qlen);
    resp_add_bulk(out, ev->key, ev->klen);
    resp_add_uint(out, ev->id);
    switch (ev->type) {
    case QUEUE_EV_PUSHED:
        resp_add_bulk(out, ev->data, ev->dlen);
        break;
    case QUEUE_EV_DELIVERED: case QUEUE_EV_DEADLETTERED: case QUEUE_EV_NACKED:
        resp_add_uint(out, ev->n);
        break;
    case QUEUE_EV_ACKED:
        if (ev->data != NULL)
            resp_add_bulk(out, ev->data, ev->dlen);
        else
            resp_add_null(out, proto);
        break;
    default:
        resp_add_null(out, proto);
        break;
    }
}

void cmd_render(server_t *s, ordo_buf_t *out, int proto, const outcome_t *o)
{
    switch (o->kind) {
    case OUTCOME_OK:
        resp_add_simple(out, "OK");
        break;
    case OUTCOME_UINT:
        resp_add_uint(out, o->uint);
        break;
    case OUTCOME_NIL:
        resp_add_null(out, proto);
        break;
    case OUTCOME_MESSAGES:
        resp_add_array(out, o->messages.n);
        for (size_t i = 0; i < o->messages.n; i++)
            cmd_render_message(out, &o->messages.v[i]);
        break;
    case OUTCOME_FATE:
        render_fate(s, out, proto, o->fate.id, o->fate.fate, o->fate.result);
        break;
    case OUTCOME_CAMPAIGN:
        render_campaign(out, proto, o);
        break;
    case OUTCOME_ERROR:
        s->stats.errors_total++;
        resp_add_error(out, o->error.text);
        break;
    case OUTCOME_LEADER:
        render_leader(out, proto, o);
        s->stats.watch_events_total++;
        break;
    case OUTCOME_QEVENT:
        render_qevent(out, proto, o);
        s->stats.watch_events_total++;
        break;
    default:
        assert(!"an outcome of no known kind");
        break;
    }
}
