/*
 * producer.c -- the batching, idempotent producer (ordo_producer_*, see
 * ordo/client.h for the contract; spill.h for the file format).
 *
 * State, under mu: the list head..tail holds every accepted, unreported
 * message in sequence order; `count` is its length (bounded by
 * buffer_max). Only the sender thread removes messages, always from the
 * head, so the messages it is sending cannot be freed under it; send()
 * only appends at the tail. reported_seq is the highest sequence number
 * whose report has been delivered (reports go out in sequence order).
 *
 * A batch of more than one message is one transaction (MULTI, the pushes,
 * EXEC), so a batch is applied whole or not at all. A plain pipeline of
 * pushes was not safe in a cluster: a member that was a follower when the
 * first push arrived answers it -NOTLEADER, and if it wins an election
 * before the later pushes of the same pipeline are read, it applies them;
 * the refused push, resent later, then lands after a later push of its own
 * key. A transaction cannot be split that way: a follower refuses each
 * push it queues, which aborts the EXEC even if it leads by then (the
 * server answers MULTI on a follower for that reason: it reads no state),
 * and a leader applies the EXEC as one record. A batch of one message is a
 * plain Q.PUSH, which has nothing to be reordered with. When the
 * transaction is refused because of one push (-CONFLICT i: no room for
 * push i; -EXECABORT: push i was refused as it was queued, for instance
 * past max-multi-bytes), the next batch is the pushes before it, down to a
 * single plain push that gets the push's own answer; a batch that applies
 * lets the next one grow back to batch_max.
 *
 * Invariant of the spill file: every message in the list is in the file
 * (written before send() returned), and the file's last 'A' record is at
 * most reported_seq, so a restart resends a superset of what was not yet
 * reported -- the superset is harmless, as the server drops repeated ids.
 */
#include "client_int.h"
#include "spill.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Keys and payloads are limited as ordod's default max-bulk-bytes (16 MiB):
 * a larger argument makes the server close the connection, which a
 * retrying producer would repeat forever. */
#define ORDO_PRODUCER_MSG_MAX ((size_t)16 * 1024 * 1024)
/* Retry pause after a failed batch: doubled up to the max. */
#define PRODUCER_RETRY_MIN_MS 10
#define PRODUCER_RETRY_MAX_MS 1000
/* ... but after a leader change (-NOTLEADER, a broken connection) at most
 * this long: the client already moved to another member, and a new leader
 * is usually there within an election timeout, so waiting a whole second
 * would double the time to the next acknowledged batch. */
#define PRODUCER_FAILOVER_RETRY_MAX_MS 100
/* A batch's transaction holds at most this many bytes of arguments, a
 * quarter of ordod's default max-multi-bytes (16 MiB, which also counts 96
 * bytes per argument): a batch that still passes a smaller setting is cut
 * down by the -EXECABORT rule above. A larger message goes alone. */
#define PRODUCER_TXN_BYTES_MAX ((size_t)4 * 1024 * 1024)
/* What a push costs against max-multi-bytes besides its key and payload:
 * its six arguments at 96 bytes, the queue name and the id (bounded). */
#define PRODUCER_TXN_PUSH_OVERHEAD (6 * 96 + 64)

typedef struct pmsg {
    struct pmsg *next;
    uint64_t seq;
    void *opaque;
    int recovered;
    int64_t accepted_ms;
    uint32_t key_len, payload_len;
    char data[]; /* key, then payload */
} pmsg_t;

struct ordo_producer {
    ordo_producer_opts_t o;
    char *queue, *host, *addrs, *password, *user, *spill_path;
    char pid[ORDO_PRODUCER_ID_MAX + 1];

    pthread_mutex_t mu;
    pthread_cond_t sender_cv, space_cv, flushed_cv;
    pmsg_t *head, *tail;
    size_t count;
    uint64_t next_seq, reported_seq;
    int flush_waiters;
    /* Set together by ordo_producer_close(), under mu (so a waiter that
     * checked them cannot miss the broadcast), and read from other
     * threads: atomics with explicit loads and stores. closing: send()
     * accepts no more; stop: the sender ends. */
    atomic_bool closing, stop;

    int spill_fd;
    int64_t spill_bytes;
    int unsynced;
    int64_t last_sync_ms;

    pthread_t th;
    int started;
    int joined;      /* ordo_producer_close() has stopped and joined the sender */
};

/* ---- spill file ------------------------------------------------------------ */

static int spill_write(ordo_producer_t *p, const char *rec, size_t n)
{
    assert(p->spill_fd >= 0 && rec != NULL && n > 0);
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(p->spill_fd, rec + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            /* Cut the torn record off so the file stays a valid log. */
            if (off && ftruncate(p->spill_fd, p->spill_bytes) != 0)
                return -1;
            return -1;
        }
        off += (size_t)k;
    }
    p->spill_bytes += (int64_t)n;
    return 0;
}

static size_t body_header(char *b, const ordo_producer_t *p)
{
    size_t il = strlen(p->pid), ql = strlen(p->queue);
    b[0] = 'H';
    b[1] = (char)il;
    b[2] = (char)(il >> 8);
    memcpy(b + 3, p->pid, il);
    b[3 + il] = (char)ql;
    b[4 + il] = (char)(ql >> 8);
    memcpy(b + 5 + il, p->queue, ql);
    return 5 + il + ql;
}

static void le64(char *o, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        o[i] = (char)(v >> (8 * i));
}

static void le32(char *o, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        o[i] = (char)(v >> (8 * i));
}

/* Append an 'M' record for m. 0 or -1. */
static int spill_msg(ordo_producer_t *p, const pmsg_t *m)
{
    assert(p->spill_fd >= 0 && m != NULL);
    size_t body = 17 + (size_t)m->key_len + m->payload_len;
    char *rec = malloc(8 + body);
    if (rec == NULL)
        return -1;
    char *b = rec + 8;
    b[0] = 'M';
    le64(b + 1, m->seq);
    le32(b + 9, m->key_len);
    le32(b + 13, m->payload_len);
    memcpy(b + 17, m->data, (size_t)m->key_len + m->payload_len);
    /* frame in place: length and crc before the body */
    le32(rec, (uint32_t)body);
    le32(rec + 4, spill_crc32(b, body));
    int rc = spill_write(p, rec, 8 + body);
    free(rec);
    return rc;
}

static int spill_ack(ordo_producer_t *p, uint64_t seq)
{
    char body[9], rec[17];
    body[0] = 'A';
    le64(body + 1, seq);
    size_t n = spill_frame(rec, body, 9);
    return spill_write(p, rec, n);
}

static void spill_sync(ordo_producer_t *p)
{
    if (p->spill_fd >= 0 && p->unsynced) {
        fdatasync(p->spill_fd);
        p->unsynced = 0;
    }
    p->last_sync_ms = client_now_ms();
}

/* spill_rewrite() -- replace the file by magic + header + the unreported
 * messages (under mu). On any failure the old file stays in use. */
static void spill_rewrite(ordo_producer_t *p)
{
    assert(p->spill_path != NULL && p->spill_fd >= 0);
    size_t plen = strlen(p->spill_path);
    char *tmp = malloc(plen + 5);
    if (tmp == NULL)
        return;
    snprintf(tmp, plen + 5, "%s.tmp", p->spill_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        goto out_free;
    int old_fd = p->spill_fd;
    int64_t old_bytes = p->spill_bytes;
    p->spill_fd = fd;
    p->spill_bytes = 0;
    char hb[8 + 5 + 2 * (ORDO_PRODUCER_ID_MAX + 256)], body[5 + ORDO_PRODUCER_ID_MAX + 256 + 256];
    size_t bn = body_header(body, p);
    int bad = spill_write(p, SPILL_MAGIC, SPILL_MAGIC_LEN) != 0 ||
              spill_write(p, hb, spill_frame(hb, body, (uint32_t)bn)) != 0 ||
              (p->reported_seq && spill_ack(p, p->reported_seq) != 0);
    for (pmsg_t *m = p->head; m && !bad; m = m->next)
        bad = spill_msg(p, m) != 0;
    if (!bad)
        bad = fsync(fd) != 0 || rename(tmp, p->spill_path) != 0;
    if (bad || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        unlink(tmp);
        p->spill_fd = old_fd;
        p->spill_bytes = old_bytes;
        goto out_free;
    }
    close(old_fd);
    p->unsynced = 0;
out_free:
    free(tmp);
}

/* append_msg() -- m at the tail of p's pending list (p->mu held, or
 * before the sender starts). */
static void append_msg(ordo_producer_t *p, pmsg_t *m)
{
    assert(m != NULL && m->next == NULL);
    assert((p->head == NULL) == (p->tail == NULL) && (p->head == NULL) == (p->count == 0));
    if (p->tail)
        p->tail->next = m;
    else
        p->head = m;
    p->tail = m;
    p->count++;
}

static void recover_msg(void *arg, const spill_msg_t *sm)
{
    ordo_producer_t *p = arg;
    pmsg_t *m = malloc(sizeof *m + sm->key_len + sm->payload_len);
    if (m == NULL)
        return; /* counted below: recovery then fails with ENOMEM */
    *m = (pmsg_t){ .seq = sm->seq, .recovered = 1, .key_len = sm->key_len,
                   .payload_len = sm->payload_len, .accepted_ms = client_now_ms() };
    memcpy(m->data, sm->key, sm->key_len);
    memcpy(m->data + sm->key_len, sm->payload, sm->payload_len);
    append_msg(p, m);
    if (sm->seq >= p->next_seq)
        p->next_seq = sm->seq + 1;
}

static void random_id(char *out, size_t cap)
{
    unsigned char r[8] = { 0 };
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)getpid() << 48;
        memcpy(r, &v, sizeof r);
    }
    if (fd >= 0)
        close(fd);
    snprintf(out, cap, "p%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

/* spill_open() -- open (and lock) the spill file, recover its unreported
 * messages into the list, fix the producer id, and truncate a torn tail. */
static int spill_open(ordo_producer_t *p)
{
    int fd = open(p->spill_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return ORDO_ESYS;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return ORDO_EBUSY;
    }
    p->spill_fd = fd;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return ORDO_ESYS;
    size_t len = (size_t)st.st_size;
    char *buf = len ? malloc(len) : NULL;
    if (len && buf == NULL)
        return ORDO_ENOMEM;
    size_t got = 0;
    while (got < len) {
        ssize_t k = pread(fd, buf + got, len - got, (off_t)got);
        if (k <= 0) {
            free(buf);
            return ORDO_ESYS;
        }
        got += (size_t)k;
    }
    size_t valid;
    uint64_t acked;
    const char *id, *queue;
    size_t id_len, queue_len;
    if (spill_scan(buf, len, &valid, &acked, &id, &id_len, &queue, &queue_len, recover_msg, p) != 0 ||
        (len && id == NULL) || (id && (queue_len != strlen(p->queue) || memcmp(queue, p->queue, queue_len) != 0)) ||
        id_len > ORDO_PRODUCER_ID_MAX) {
        free(buf);
        return ORDO_EPROTO;
    }
    if (id) {
        memcpy(p->pid, id, id_len);
        p->pid[id_len] = '\0';
    }
    free(buf);
    /* Drop what was already reported: it is at the head (file order is
     * sequence order). */
    while (p->head && p->head->seq <= acked) {
        pmsg_t *m = p->head;
        p->head = m->next;
        p->count--;
        free(m);
    }
    if (p->head == NULL)
        p->tail = NULL;
    if (acked >= p->next_seq)
        p->next_seq = acked + 1;
    p->reported_seq = acked;
    if (ftruncate(fd, (off_t)valid) != 0 || lseek(fd, 0, SEEK_END) < 0)
        return ORDO_ESYS;
    p->spill_bytes = (int64_t)valid;
    if (valid == 0) { /* new file */
        char hb[8 + 5 + 2 * (ORDO_PRODUCER_ID_MAX + 256)], body[5 + ORDO_PRODUCER_ID_MAX + 256 + 256];
        size_t bn = body_header(body, p);
        if (spill_write(p, SPILL_MAGIC, SPILL_MAGIC_LEN) != 0 ||
            spill_write(p, hb, spill_frame(hb, body, (uint32_t)bn)) != 0 || fsync(fd) != 0)
            return ORDO_ESYS;
    }
    p->last_sync_ms = client_now_ms();
    return ORDO_OK;
}

/* ---- the sender ------------------------------------------------------------ */

static int transient(int err)
{
    return err != ORDO_ESERVER; /* -ERR is final; everything else may pass */
}

/* Append the Q.PUSH of m. */
static int append_push(ordo_producer_t *p, ordo_client_t *c, const pmsg_t *m)
{
    char idbuf[ORDO_PRODUCER_ID_MAX + 24];
    int il = snprintf(idbuf, sizeof idbuf, "%s:%" PRIu64, p->pid, m->seq);
    const char *argv[] = { "Q.PUSH", p->queue, m->data, m->data + m->key_len, "ID", idbuf };
    size_t lens[] = { 6, strlen(p->queue), m->key_len, m->payload_len, 2, (size_t)il };
    return ordo_client_append(c, 6, argv, lens);
}

/* The outcome of one push reply r: ORDO_OK (*id set) or its error. */
static int push_outcome(ordo_client_t *c, const ordo_reply_t *r, int64_t *id)
{
    if (r->type == ORDO_REPLY_INTEGER) {
        *id = r->integer;
        return ORDO_OK;
    }
    return r->type == ORDO_REPLY_ERROR ? ordo_client_reply_error(c, r) : ORDO_EPROTO;
}

/* Read and drop the replies still pending on c (after a failed append). */
static void drain_pending(ordo_client_t *c)
{
    while (ordo_client_pending(c) > 0) {
        ordo_reply_t *r;
        if (ordo_client_get_reply(c, 0, &r) != ORDO_OK)
            return;
        ordo_reply_free(r);
    }
}

/* send_one() -- a batch of one: a plain Q.PUSH. Returns 1 if it finished
 * (ok or a final error in errs[0]), else 0 with *why. */
static size_t send_one(ordo_producer_t *p, ordo_client_t *c, pmsg_t *m, int64_t *ids, int *errs, int *why)
{
    ordo_reply_t *r;
    if ((*why = append_push(p, c, m)) != ORDO_OK)
        return 0;
    if ((*why = ordo_client_get_reply(c, 0, &r)) != ORDO_OK)
        return 0; /* connection gone: unknown, resent later */
    ids[0] = 0;
    int e = push_outcome(c, r, &ids[0]);
    ordo_reply_free(r);
    if (e != ORDO_OK && transient(e)) {
        *why = e;
        return 0;
    }
    errs[0] = e;
    return 1;
}

/* send_batch() -- push batch[0..n) as one transaction (n > 1; see the
 * head). Fills ids[] and errs[] and returns how many leading messages
 * finished (ok or final error): n when the EXEC applied, else 0, with
 * *why the error and *fit (output) the size of a batch that would get
 * further (the pushes before the one that stopped this one), or n if none
 * did. A -NOTLEADER reply moves the client: the resend goes to the leader
 * it named, never again to this follower (conn.c, ordo_client_get_reply()). */
static size_t send_batch(ordo_producer_t *p, ordo_client_t *c, pmsg_t **batch, size_t n, int64_t *ids,
                         int *errs, int *why, size_t *fit)
{
    *why = ORDO_OK;
    *fit = n;
    assert(c != NULL && n > 1 && n <= (size_t)p->o.batch_max);
    const char *multi[] = { "MULTI" }, *exec[] = { "EXEC" };
    int rc = ordo_client_append(c, 1, multi, NULL);
    for (size_t i = 0; rc == ORDO_OK && i < n; i++)
        rc = append_push(p, c, batch[i]);
    if (rc == ORDO_OK)
        rc = ordo_client_append(c, 1, exec, NULL);
    if (rc != ORDO_OK) {
        /* Not all of it was appended; no EXEC went out, or the connection
         * failed. Either way nothing applies: drop the connection's rest. */
        drain_pending(c);
        *why = rc;
        return 0;
    }
    /* MULTI's +OK, then a +QUEUED or the refusal of each push. */
    size_t refused_at = n;
    int refused = ORDO_OK;
    for (size_t i = 0; i <= n; i++) {
        ordo_reply_t *r;
        if ((rc = ordo_client_get_reply(c, 0, &r)) != ORDO_OK) {
            *why = rc;
            return 0; /* connection gone: the rest is unknown, resent later */
        }
        if (r->type == ORDO_REPLY_ERROR && refused == ORDO_OK) {
            refused = ordo_client_reply_error(c, r);
            refused_at = i == 0 ? 0 : i - 1; /* MULTI refused (an old server's follower): all of it */
        }
        ordo_reply_free(r);
    }
    ordo_reply_t *r;
    if ((rc = ordo_client_get_reply(c, 0, &r)) != ORDO_OK) {
        *why = rc;
        return 0;
    }
    size_t done = 0;
    if (r->type == ORDO_REPLY_ARRAY && r->n == n) {
        /* Applied as one record; an error inside is a push's own answer. */
        for (size_t i = 0; i < n; i++) {
            ids[i] = 0;
            errs[i] = push_outcome(c, r->elem[i], &ids[i]);
            if (errs[i] != ORDO_OK && transient(errs[i])) {
                *why = errs[i];
                break;
            }
            done = i + 1;
        }
    } else if (r->type == ORDO_REPLY_ERROR) {
        int e = ordo_client_reply_error(c, r);
        *why = refused != ORDO_OK ? refused : e;
        if (refused != ORDO_OK && refused != ORDO_ENOTLEADER && refused_at > 0)
            *fit = refused_at; /* -EXECABORT for push refused_at (a limit, a bad argument) */
        else if (refused != ORDO_OK && refused != ORDO_ENOTLEADER)
            *fit = 1; /* the first push alone gets its own answer */
        else if (e == ORDO_ECONFLICT && r->str != NULL) {
            unsigned long i = strtoul(r->str + (strncmp(r->str, "CONFLICT ", 9) == 0 ? 9 : 0), NULL, 10);
            *fit = i > 1 && i <= n ? i - 1 : 1; /* no room for push i (1-based) */
        }
    } else {
        *why = ORDO_EPROTO;
    }
    ordo_reply_free(r);
    return done;
}

static void *sender_main(void *arg)
{
    ordo_producer_t *p = arg;
    ordo_client_opts_t co = p->o.conn;
    co.host = p->host;
    co.addrs = p->addrs;
    co.password = p->password;
    co.user = p->user;
    co = client_sliced(co);
    ordo_client_t *c = NULL;
    (void)ordo_client_new(&c, &co); /* NULL: out of memory, the loop below does not run */
    size_t cap = (size_t)p->o.batch_max;
    pmsg_t **batch = calloc(cap, sizeof *batch);
    int64_t *ids = calloc(cap, sizeof *ids);
    int *errs = calloc(cap, sizeof *errs);
    int retry_ms = 0;
    size_t fit = cap; /* the batch size that can pass (send_batch()'s *fit) */
    pthread_mutex_lock(&p->mu);
    while (c && batch && ids && errs && !atomic_load(&p->stop)) {
        int64_t now = client_now_ms();
        if (p->spill_fd >= 0 && p->unsynced && now >= p->last_sync_ms + p->o.spill_sync_every_ms)
            spill_sync(p);
        int64_t sync_at = p->unsynced ? p->last_sync_ms + p->o.spill_sync_every_ms : INT64_MAX;
        if (p->count == 0) {
            if (sync_at == INT64_MAX)
                pthread_cond_wait(&p->sender_cv, &p->mu);
            else
                client_cond_wait_until(&p->sender_cv, &p->mu, sync_at);
            continue;
        }
        int64_t due = p->head->accepted_ms + (p->o.linger_ms > 0 ? p->o.linger_ms : 0);
        if (p->count < cap && !p->flush_waiters && !atomic_load(&p->closing) && now < due) {
            client_cond_wait_until(&p->sender_cv, &p->mu, due < sync_at ? due : sync_at);
            continue;
        }
        size_t n = 0, bytes = 0;
        for (pmsg_t *m = p->head; m && n < fit; m = m->next) {
            bytes += (size_t)m->key_len + m->payload_len + PRODUCER_TXN_PUSH_OVERHEAD;
            if (n > 0 && bytes > PRODUCER_TXN_BYTES_MAX)
                break;
            batch[n++] = m;
        }
        pthread_mutex_unlock(&p->mu);

        int why;
        size_t next_fit = cap;
        size_t done = n == 1 ? send_one(p, c, batch[0], ids, errs, &why)
                             : send_batch(p, c, batch, n, ids, errs, &why, &next_fit);
        fit = done == n ? cap : next_fit < n ? next_fit : n;

        pthread_mutex_lock(&p->mu);
        assert(done <= n && done <= p->count);
        for (size_t i = 0; i < done; i++) {
            assert(p->head == batch[i]);
            p->head = p->head->next;
            p->count--;
        }
        if (p->head == NULL)
            p->tail = NULL;
        if (done && p->spill_fd >= 0) {
            spill_ack(p, batch[done - 1]->seq);
            if (p->spill_bytes > p->o.spill_max_bytes)
                spill_rewrite(p);
        }
        pthread_cond_broadcast(&p->space_cv);
        pthread_mutex_unlock(&p->mu);
        uint64_t last_seq = done ? batch[done - 1]->seq : 0;
        for (size_t i = 0; i < done; i++) {
            pmsg_t *m = batch[i];
            if (p->o.report) {
                ordo_delivery_t d = { .seq = m->seq, .key = m->data, .key_len = m->key_len, .id = ids[i],
                                      .err = errs[i], .opaque = m->opaque, .recovered = m->recovered };
                p->o.report(p->o.report_arg, &d);
            }
            free(m);
        }
        pthread_mutex_lock(&p->mu);
        if (done) {
            p->reported_seq = last_seq;
            pthread_cond_broadcast(&p->flushed_cv);
            retry_ms = 0;
        }
        if (done < n) { /* a transient failure: pause, then resend the rest */
            int max_ms = why == ORDO_ENOTLEADER || why == ORDO_ECONN ? PRODUCER_FAILOVER_RETRY_MAX_MS
                                                                    : PRODUCER_RETRY_MAX_MS;
            retry_ms = retry_ms ? retry_ms * 2 : PRODUCER_RETRY_MIN_MS;
            if (retry_ms > max_ms)
                retry_ms = max_ms;
            client_cond_wait_until(&p->sender_cv, &p->mu, client_now_ms() + retry_ms);
        }
    }
    spill_sync(p);
    pthread_mutex_unlock(&p->mu);
    free(batch);
    free(ids);
    free(errs);
    ordo_client_free(c);
    return NULL;
}

/* ---- public ------------------------------------------------------------ */

static void producer_free(ordo_producer_t *p)
{
    while (p->head) {
        pmsg_t *m = p->head;
        p->head = m->next;
        free(m);
    }
    if (p->spill_fd >= 0)
        close(p->spill_fd);
    pthread_cond_destroy(&p->sender_cv);
    pthread_cond_destroy(&p->space_cv);
    pthread_cond_destroy(&p->flushed_cv);
    pthread_mutex_destroy(&p->mu);
    free(p->queue);
    free(p->host);
    free(p->addrs);
    free(p->password);
    free(p->user);
    free(p->spill_path);
    free(p);
}

int ordo_producer_new(ordo_producer_t **out, const ordo_producer_opts_t *o)
{
    assert(out != NULL);
    *out = NULL;
    if (o == NULL || o->queue == NULL || o->batch_max < 0 || o->buffer_max < 0 ||
        strlen(o->queue) > 256 || (o->producer_id && strlen(o->producer_id) > ORDO_PRODUCER_ID_MAX))
        return ORDO_EINVAL;
    client_members_t check; /* the sender connects later: judge the addresses now */
    if (client_members_init(&check, o->conn.addrs, o->conn.host, o->conn.port) != ORDO_OK)
        return ORDO_EINVAL;
    ordo_producer_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return ORDO_ENOMEM;
    p->o = *o;
    p->spill_fd = -1;
    p->next_seq = 1;
    if (p->o.linger_ms == 0)
        p->o.linger_ms = ORDO_PRODUCER_LINGER_MS_DEFAULT;
    if (p->o.batch_max == 0)
        p->o.batch_max = ORDO_PRODUCER_BATCH_MAX_DEFAULT;
    if (p->o.buffer_max == 0)
        p->o.buffer_max = ORDO_PRODUCER_BUFFER_MAX_DEFAULT;
    if (p->o.spill_sync_every_ms == 0)
        p->o.spill_sync_every_ms = ORDO_PRODUCER_SPILL_SYNC_MS_DEFAULT;
    if (p->o.spill_sync_every_msgs == 0)
        p->o.spill_sync_every_msgs = ORDO_PRODUCER_SPILL_SYNC_MSGS_DEFAULT;
    if (p->o.spill_max_bytes == 0)
        p->o.spill_max_bytes = ORDO_PRODUCER_SPILL_MAX_BYTES_DEFAULT;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->sender_cv, NULL);
    pthread_cond_init(&p->space_cv, NULL);
    pthread_cond_init(&p->flushed_cv, NULL);
    int rc = ORDO_ENOMEM;
    p->queue = strdup(o->queue);
    p->host = o->conn.host ? strdup(o->conn.host) : NULL;
    p->addrs = o->conn.addrs ? strdup(o->conn.addrs) : NULL;
    p->password = o->conn.password ? strdup(o->conn.password) : NULL;
    p->user = o->conn.user ? strdup(o->conn.user) : NULL;
    p->spill_path = o->spill_path ? strdup(o->spill_path) : NULL;
    if (!p->queue || (o->conn.host && !p->host) || (o->conn.addrs && !p->addrs) || (o->conn.password && !p->password) || (o->conn.user && !p->user) ||
        (o->spill_path && !p->spill_path))
        goto fail;
    if (o->producer_id)
        snprintf(p->pid, sizeof p->pid, "%s", o->producer_id);
    else
        random_id(p->pid, sizeof p->pid);
    if (p->spill_path && (rc = spill_open(p)) != ORDO_OK)
        goto fail;
    rc = ORDO_ESYS;
    if (pthread_create(&p->th, NULL, sender_main, p) != 0)
        goto fail;
    p->started = 1;
    *out = p;
    return ORDO_OK;
fail:
    producer_free(p);
    return rc;
}

static void deadline_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline)
{
    if (deadline < 0)
        pthread_cond_wait(cv, mu);
    else
        client_cond_wait_until(cv, mu, deadline);
}

int ordo_producer_send(ordo_producer_t *p, const void *key, size_t key_len, const void *payload,
                       size_t payload_len, void *opaque, int timeout_ms, uint64_t *seq)
{
    assert(p != NULL);
    if (key_len > ORDO_PRODUCER_MSG_MAX || payload_len > ORDO_PRODUCER_MSG_MAX)
        return ORDO_ELIMIT;
    pmsg_t *m = malloc(sizeof *m + key_len + payload_len);
    if (m == NULL)
        return ORDO_ENOMEM;
    *m = (pmsg_t){ .opaque = opaque, .key_len = (uint32_t)key_len, .payload_len = (uint32_t)payload_len };
    memcpy(m->data, key, key_len);
    if (payload_len)
        memcpy(m->data + key_len, payload, payload_len);
    int64_t deadline = timeout_ms == ORDO_WAIT_FOREVER ? -1 : client_now_ms() + timeout_ms;
    int rc = ORDO_OK;
    pthread_mutex_lock(&p->mu);
    while (!atomic_load(&p->closing) && p->count >= (size_t)p->o.buffer_max) {
        if (timeout_ms == 0) {
            rc = ORDO_EFULL;
            goto out;
        }
        if (deadline >= 0 && client_now_ms() >= deadline) {
            rc = ORDO_ETIMEDOUT;
            goto out;
        }
        deadline_wait(&p->space_cv, &p->mu, deadline);
    }
    if (atomic_load(&p->closing)) {
        rc = ORDO_ESTOPPED;
        goto out;
    }
    m->seq = p->next_seq;
    m->accepted_ms = client_now_ms();
    if (p->spill_fd >= 0) {
        if (spill_msg(p, m) != 0) {
            rc = ORDO_ESYS;
            goto out;
        }
        if (++p->unsynced >= p->o.spill_sync_every_msgs)
            spill_sync(p);
    }
    p->next_seq++;
    append_msg(p, m);
    if (seq)
        *seq = m->seq;
    m = NULL;
    if (p->count == 1 || p->count >= (size_t)p->o.batch_max || p->o.linger_ms < 0)
        pthread_cond_signal(&p->sender_cv);
out:
    pthread_mutex_unlock(&p->mu);
    free(m);
    return rc;
}

int ordo_producer_flush(ordo_producer_t *p, int timeout_ms)
{
    assert(p != NULL);
    int64_t deadline = timeout_ms == ORDO_WAIT_FOREVER ? -1 : client_now_ms() + timeout_ms;
    int rc = ORDO_OK;
    pthread_mutex_lock(&p->mu);
    uint64_t target = p->next_seq - 1;
    p->flush_waiters++;
    pthread_cond_signal(&p->sender_cv);
    while (p->reported_seq < target) {
        if (atomic_load(&p->stop)) {
            rc = ORDO_ESTOPPED; /* closed: nothing will be reported any more */
            break;
        }
        if (deadline >= 0 && client_now_ms() >= deadline) {
            rc = ORDO_ETIMEDOUT;
            break;
        }
        deadline_wait(&p->flushed_cv, &p->mu, deadline);
    }
    p->flush_waiters--;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

uint64_t ordo_producer_next_seq(ordo_producer_t *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->next_seq;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t ordo_producer_buffered(ordo_producer_t *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->count;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t ordo_producer_close(ordo_producer_t *p, int timeout_ms)
{
    assert(p != NULL);
    if (!p->joined) {
        (void)ordo_producer_flush(p, timeout_ms);
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->closing, true);
        atomic_store(&p->stop, true);
        pthread_cond_broadcast(&p->sender_cv);
        pthread_cond_broadcast(&p->space_cv);
        pthread_cond_broadcast(&p->flushed_cv);
        pthread_mutex_unlock(&p->mu);
        if (p->started)
            pthread_join(p->th, NULL);
        p->joined = 1;
    }
    return p->count; /* the sender is gone: nothing changes count now */
}

void ordo_producer_free(ordo_producer_t *p)
{
    if (p == NULL)
        return;
    (void)ordo_producer_close(p, 0);
    producer_free(p);
}
