"""DEBUG DIGEST digests the state raft replicates, not the history window
this member happens to retain. The window is member-local: automatic
compaction follows this member's history-revs and history-bytes, stops while
this member writes its own snapshot (the pin), and a restart rebuilds it
from the snapshot and the replayed log. Two servers (or one server before
and after a restart) that applied the same writes hold the same keys at
the same revision, and must answer the same digest whatever window each
kept. DEBUG DIGEST HISTORY rev also covers the key changes after rev, and
says COMPACTED when this member no longer holds them.
"""

from ordoproc import poll
from resp import RespError, encode

KEYS = 200          # more than the smaller window, so automatic compaction runs
PINNED_WRITES = 100  # writes applied while a snapshot pins the history


def writes(n, tag):
    """n pipelined KV.PUTs (one send), including overwrites and a delete."""
    batch = []
    for i in range(n):
        batch.append(("KV.PUT", "k%d" % (i % (n // 2)), "%s-%d" % (tag, i)))
    batch.append(("KV.DEL", "k0"))
    return batch


def send_all(c, cmds):
    """Send cmds in one write and read every reply; no reply is an error."""
    c.send_raw(b"".join(encode(*cmd) for cmd in cmds))
    replies = [c.read() for _ in cmds]
    assert not any(isinstance(x, RespError) for x in replies), replies
    return replies


def state(srv):
    """What raft replicates of the store, as clients see it: the revision
    and every live key with its value and revisions."""
    with srv.raw() as c:
        return c.call("KV.REV")[0], c.call("KV.RANGE", "")


def digest(srv, *args):
    with srv.raw() as c:
        d = c.call("DEBUG", "DIGEST", *args)
    assert isinstance(d, bytes) and len(d) == 16, d
    return d


def info_kv(srv):
    return {k: int(v) for k, v in srv.info("kv").items() if str(v).lstrip("-").isdigit()}


def test_digest_ignores_the_history_window(ordod_factory):
    """The same writes on two servers that keep different windows: the
    same keys and revision, hence the same digest."""
    small = ordod_factory("--history-revs", "10")
    large = ordod_factory("--history-revs", "100000")
    batch = writes(KEYS, "v")
    for srv in (small, large):
        with srv.raw() as c:
            send_all(c, batch)
    assert state(small) == state(large)
    assert info_kv(small)["oldest_revision"] > info_kv(large)["oldest_revision"]
    assert digest(small) == digest(large)
    # HISTORY compares the changes from a revision both still hold, and
    # says COMPACTED below the smaller window.
    held = info_kv(small)["oldest_revision"] - 1
    assert digest(small, "HISTORY", held) == digest(large, "HISTORY", held) != digest(small)
    with small.raw() as c:
        e = c.call("DEBUG", "DIGEST", "HISTORY", held - 1)
    assert isinstance(e, RespError) and e.code == "COMPACTED", e
    assert str(held + 1) in str(e), e
    assert len(digest(large, "HISTORY", held - 1)) == 16


def test_digest_same_across_a_restart_that_changes_the_window(ordod_factory):
    """Writes applied while a snapshot pins the history are not trimmed;
    replayed after a crash they are. Same state and revision before and
    after the restart, another window, the same digest."""
    srv = ordod_factory("--history-revs", "50")
    with srv.raw() as c:
        send_all(c, writes(KEYS, "a"))
        oldest = info_kv(srv)["oldest_revision"]
        # SNAPSHOT pins compaction at once; the writes sent with it are
        # applied in the same loop turn, before the snapshot can end.
        send_all(c, [("SNAPSHOT",)] + writes(PINNED_WRITES, "b"))
    assert info_kv(srv)["oldest_revision"] == oldest, "the pinned writes were trimmed"
    poll(lambda: int(srv.info("persistence")["snapshot_in_progress"]) == 0, "the snapshot ends")
    before, d_before = state(srv), digest(srv)
    srv.kill()
    srv.start()
    assert info_kv(srv)["oldest_revision"] > oldest, "the replay did not trim the window"
    assert state(srv) == before
    assert digest(srv) == d_before
