"""KV history bounded by KV (issue 24, "Watch history is eaten by queue
traffic"): the watch resume window counts key changes (history-revs) and
their bytes (history-bytes), not global revisions, so a watcher resumes
after any amount of queue traffic with no RESET when no change it needs
fell out of the window; a deletion inside the gap arrives as an event.
Q.WATCH's history has its own bound (queue-watch-history-bytes). Both
windows are in INFO kv and /metrics as the oldest resumable revision.

The suite scales the window down (history-revs 50, a few thousand queue
operations); bench/watch_history.sh runs the same with 1M operations.
"""
import urllib.request

from resp import RespError
from watchlib import WatchConn

QUEUE_MESSAGES = 3000   # each a push, a delivery and an ack: 9000 revisions, 180 windows of 50


def queue_traffic(r, n):
    """n messages pushed, pulled and acked: 3n revisions, no key change."""
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.execute_command("Q.PUSH", "jobs", "k%d" % i, "payload")
    p.execute()
    done = 0
    while done < n:
        msgs = r.execute_command("Q.PULL", "jobs", "COUNT", 500)
        assert msgs, "the queue ran dry at %d of %d" % (done, n)
        p = r.pipeline(transaction=False)
        for m in msgs:
            p.execute_command("Q.ACK", "jobs", m[0], m[4])
        assert all(v == 1 for v in p.execute())
        done += len(msgs)


def info_kv(srv):
    return {k: int(v) for k, v in srv.info("kv").items()}


def test_watch_resumes_after_queue_traffic(ordod_factory):
    srv = ordod_factory("--history-revs", "50")
    r = srv.client()
    w = WatchConn(srv.port)
    w.watch("w/", "PREFIX")
    r.set("w/a", "1")
    r.set("w/b", "2")
    last = None
    while last is None or last[4] != b"w/b":
        last = w.next_event()
    seen = last[2]
    w.close()
    # while the watcher is away: a deletion it must see, queue traffic,
    # then 30 changes of keys it does not watch (inside the window of 50;
    # automatic compaction runs on key changes, so these come last)
    r.delete("w/a")
    queue_traffic(r, QUEUE_MESSAGES)
    for i in range(30):
        r.set("other/%d" % i, i)
    inf = info_kv(srv)
    assert inf["revision"] > seen + 3 * QUEUE_MESSAGES
    assert inf["history_changes"] == 33 and inf["watch_resumable_revision"] <= seen, inf
    w = WatchConn(srv.port)
    w.watch("w/", "PREFIX", "FROM", seen)
    e = w.next_event()
    assert e[0] == b"watch" and e[3] == b"del" and e[4] == b"w/a", e  # the deletion, not a reset
    r.set("w/c", "3")
    e = w.next_event()
    assert e[3] == b"put" and e[4] == b"w/c", e
    w.close()


def test_window_counts_key_changes(ordod_factory):
    """Past the window of key changes a FROM is COMPACTED as before; the
    byte bound trims a history of large values sooner."""
    srv = ordod_factory("--history-revs", "50", "--history-bytes", "10k")
    r = srv.client()
    first = r.execute_command("KV.PUT", "k", "v")
    for i in range(60):
        r.set("n/%d" % i, i)
    w = WatchConn(srv.port)
    e = w.cmd("KV.WATCH", "k", "FROM", first - 1)
    assert isinstance(e, RespError) and e.code == "COMPACTED", e
    w.close()
    inf = info_kv(srv)
    assert inf["history_changes"] == 50 and inf["history_bytes_max"] == 10240, inf
    # trimmed a bounded step per write: after a burst, the next writes
    # bring the history back under the bound
    for i in range(40):
        r.set("big/%d" % i, "x" * 2000)
    inf = info_kv(srv)
    assert inf["history_bytes"] <= 10240 and inf["history_changes"] <= 5, inf


def test_resumable_revisions_in_info_and_metrics(ordod_factory):
    srv = ordod_factory("--history-revs", "5", "--queue-watch-history-bytes", "1k")
    r = srv.client()
    for i in range(10):
        r.set("k%d" % i, i)
    queue_traffic(r, 50)
    inf = info_kv(srv)
    assert inf["watch_resumable_revision"] == inf["oldest_revision"] - 1
    assert 0 < inf["qwatch_history_bytes"] <= 1024 and inf["qwatch_history_bytes_max"] == 1024, inf
    assert 0 < inf["qwatch_resumable_revision"] < inf["revision"], inf
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % srv.http_port, timeout=10).read().decode()
    metrics = {l.split()[0]: float(l.split()[1]) for l in body.splitlines() if l and not l.startswith("#")}
    assert metrics["ordo_kv_watch_resumable_revision"] == inf["watch_resumable_revision"]
    assert metrics["ordo_qwatch_resumable_revision"] == inf["qwatch_resumable_revision"]
    assert metrics["ordo_kv_history_changes"] == 5
    # Q.WATCH FROM the floor is accepted; before it, COMPACTED
    w = WatchConn(srv.port)
    assert not isinstance(w.cmd("Q.WATCH", "jobs", "FROM", inf["qwatch_resumable_revision"]), RespError)
    w.close()
    w = WatchConn(srv.port)
    e = w.cmd("Q.WATCH", "jobs", "FROM", inf["qwatch_resumable_revision"] - 1)
    assert isinstance(e, RespError) and e.code == "COMPACTED", e
    w.close()
