"""Durability: what ordod acknowledged survives a restart, a SIGKILL, a torn
log tail; a corrupt log is refused; a failing disk makes it read-only
without acknowledging what it could not store; replies wait for the sync.

Every server here runs with `--fsync always` (the default policy; the
fixture's `--fsync no` is overridden) on a data directory the test owns, so
a later server can start on the same directory. Checks compare full dumps
(KV.RANGE of everything, KV.REV), not samples. The log format is parsed
here from the description in src/server/log/wal.c (header 40 bytes; frames of
len u32 | crc u32 | rev u64 | payload) to find record boundaries.
"""
import os
import shutil
import struct
import subprocess
import time

import pytest

from conftest import ORDOD
from ordoproc import poll
from resp import Closed, Conn, RespError
from watchlib import WatchConn

WAL_HEADER = 40
FRAME = 16


# ---- helpers ----------------------------------------------------------------

@pytest.fixture
def durable(ordod_factory):
    """start(data_dir, *flags) -> Server under fsync always on data_dir;
    kill(srv) SIGKILLs it; term(srv) SIGTERMs it and asserts exit 0."""
    class D:
        def start(self, data_dir, *flags):
            return ordod_factory("--dir", str(data_dir), "--fsync", "always", *flags)

        def kill(self, srv):
            srv.kill()

        def term(self, srv):
            rc = srv.stop()
            assert rc == 0, "ordod exited %r:\n%s" % (rc, srv.log_tail(5000))

    return D()


def call(srv, *args):
    with srv.raw() as c:
        return c.call(*args)


def dump(srv):
    """Everything the store shows: [current, oldest], and every live key."""
    with srv.raw() as c:
        rev = c.call("KV.REV")
        rng = c.call("KV.RANGE", "")
    assert isinstance(rev, list) and isinstance(rng, list), (rev, rng)
    return rev, rng


def segments(data_dir):
    wal = os.path.join(str(data_dir), "wal")
    return sorted(os.path.join(wal, f) for f in os.listdir(wal) if f.endswith(".wal"))


def frames(path):
    """[(offset, end, rev)] of the records of a segment (all good ones)."""
    b = open(path, "rb").read()
    out, off = [], WAL_HEADER
    while off + FRAME <= len(b):
        ln, _crc, rev = struct.unpack_from("<IIQ", b, off)
        end = off + FRAME + ln
        if end > len(b):
            break
        out.append((off, end, rev))
        off = end
    assert off == len(b), "segment %s does not end on a record boundary" % path
    return out


def run_ordod(data_dir, *flags, timeout=20):
    """Run ordod to completion (for a start that must fail)."""
    cmd = [ORDOD, "--port", "0", "--http-port", "0", "--unixsocket", str(data_dir) + ".sock", "--dir", str(data_dir)] + list(flags)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stderr.decode(errors="replace")


# ---- restart keeps everything -------------------------------------------------

def write_mix(srv):
    """A bit of every kind of write; returns the revisions of the KV.PUTs."""
    r = srv.client()
    assert r.set("s1", "a") is True
    assert r.set("s2", "b") is True
    revs = [r.execute_command("KV.PUT", "k", "v%d" % i) for i in range(5)]
    assert r.execute_command("KV.PUT", "k", "v5", "IFREV", revs[-1]) > revs[-1]
    assert r.delete("s2") == 1
    assert r.execute_command("KV.PUT", "s2", "reborn") > 0
    assert r.incr("n") == 1 and r.incr("n") == 2 and r.incrby("n", 40) == 42
    assert r.set("far", "x", px=600000) is True
    assert r.execute_command("KV.DEL", "gone") == 0
    assert r.execute_command("KV.PUT", "gone", "1") > 0
    assert r.execute_command("KV.DEL", "gone") > 0
    r.close()
    return revs


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_keeps_everything(durable, tmp_path, how):
    d = tmp_path / "data"
    srv = durable.start(d)
    revs = write_mix(srv)
    before = dump(srv)
    gets = {k: call(srv, "KV.GET", k) for k in ("s1", "s2", "k", "n", "far", "gone")}
    assert gets["s2"][3] == 1 and gets["k"][3] == 6 and gets["gone"] is None
    (durable.term if how == "sigterm" else durable.kill)(srv)

    srv2 = durable.start(d)
    assert dump(srv2) == before
    for k, v in gets.items():
        assert call(srv2, "KV.GET", k) == v, k
    assert call(srv2, "GET", "n") == b"42"
    # History across the restart: each old revision reads as it did.
    for i, rv in enumerate(revs):
        got = call(srv2, "KV.GET", "k", "REV", rv)
        assert got[0] == b"v%d" % i and got[2] == rv, (rv, got)
    # A watch resumes from an old revision and sees every later change of k.
    w = WatchConn(srv2.port)
    wid = w.watch("k", "FROM", revs[1])
    seen = []
    while len(seen) < 4:
        ev = w.next_event()
        if ev[0] == b"watch":
            seen.append((ev[2], ev[5]))
    assert seen == [(revs[2], b"v2"), (revs[3], b"v3"), (revs[4], b"v4"), (gets["k"][2], b"v5")]
    w.close()
    # The server goes on writing after the revisions it recovered.
    assert call(srv2, "KV.PUT", "k", "after") == before[0][0] + 1
    durable.kill(srv2)
    srv3 = durable.start(d)
    assert call(srv3, "KV.GET", "k")[0] == b"after"
    assert dump(srv3)[0][0] == before[0][0] + 1


def test_expiry_survives_restart(durable, tmp_path):
    d = tmp_path / "data"
    srv = durable.start(d)
    c = srv.client()
    assert c.set("early", "x", px=50) is True
    poll(lambda: call(srv, "GET", "early") is None, "early to expire")
    rev_after_expiry = dump(srv)[0][0]
    ttl_ms = 2500
    set_at = time.time()
    assert c.set("later", "y", px=ttl_ms) is True
    deadline = set_at + ttl_ms / 1000.0
    c.close()
    durable.kill(srv)

    srv2 = durable.start(d)
    assert call(srv2, "GET", "early") is None  # expired before the crash: stays gone
    assert call(srv2, "KV.GET", "early") is None
    assert dump(srv2)[0][0] >= rev_after_expiry + 1
    # "later" is there until its deadline (never early), gone soon after.
    def gone():
        v = call(srv2, "GET", "later")
        now = time.time()
        if v is not None:
            assert v == b"y"
            # 50 ms of slack for the two clocks' reading granularity.
            assert now < deadline + 5.0, "key outlived its deadline by 5 s"
            return False
        assert now >= deadline - 0.05, "expired early: %.3f s before its deadline" % (deadline - now)
        return True
    poll(gone, "later to expire", deadline_s=ttl_ms / 1000.0 + 10)
    assert call(srv2, "EXISTS", "later") == 0
    # The expiry is logged: after another crash the key stays gone.
    durable.kill(srv2)
    srv3 = durable.start(d)
    assert call(srv3, "GET", "later") is None and call(srv3, "DBSIZE") == 0


# ---- snapshots ----------------------------------------------------------------

def test_failed_snapshot_is_reported_and_leaves_no_temporary_file(durable, tmp_path):
    """A snapshot that fails showed only in the log and left snapshot.tmp
    behind. Now INFO persistence says so (snapshots_failed, the status and
    the error), the temporary file is removed, and the next snapshot,
    once possible, succeeds and clears the status."""
    d = tmp_path / "data"
    srv = durable.start(d)
    assert call(srv, "SET", "k", "v") == "OK"
    target = d / "snapshot.ordo"
    target.mkdir()  # the rename onto it fails
    (target / "x").write_text("keep me")  # a non-empty directory: rename(2) refuses it
    assert call(srv, "SNAPSHOT") is not None
    info = poll(lambda: (lambda i: i if i["snapshots_failed"] == "1" else None)(srv.info("persistence")),
                "the snapshot to fail")
    assert info["last_snapshot_status"] == "failed"
    assert "rename" in info["last_snapshot_error"], info
    assert not (d / "snapshot.tmp").exists()
    (target / "x").unlink()
    target.rmdir()
    assert call(srv, "SNAPSHOT") is not None
    info = poll(lambda: (lambda i: i if i["snapshots_taken"] == "1" else None)(srv.info("persistence")),
                "the next snapshot")
    assert info["last_snapshot_status"] == "ok" and info["last_snapshot_error"] == ""
    assert (d / "snapshot.ordo").is_file() and not (d / "snapshot.tmp").exists()


def test_snapshots_bound_the_log_and_restart_matches(durable, tmp_path):
    d = tmp_path / "data"
    # The smallest log the options allow; ~1 KiB values fill a segment
    # every ~60 records, and 100 revisions of history span ~2 segments.
    flags = ("--snapshot-log-bytes", "256k", "--wal-segment-bytes", "64k", "--history-revs", "100")
    srv = durable.start(d, *flags)
    r = srv.client()
    p = r.pipeline(transaction=False)
    pad = "x" * 1000
    for i in range(1500):
        k = "key:%03d" % (i % 120)
        if i % 17 == 0:
            p.delete(k)
        else:
            p.execute_command("KV.PUT", k, "val-%d-%s" % (i, pad))
        if i % 100 == 99:
            p.execute()
        if i == 499:
            # ~500 KB of log, past snapshot-log-bytes: one starts on its own.
            poll(lambda: int(srv.info("persistence")["snapshots_taken"]) >= 1, "an automatic snapshot")
    p.execute()

    def snapped():
        # Ask for one (it covers the compaction point; 0 if one already does).
        assert call(srv, "SNAPSHOT") is not None
        inf = srv.info("persistence")
        oldest = call(srv, "KV.REV")[1]
        return inf["snapshot_in_progress"] == "0" and int(inf["last_snapshot_revision"]) >= oldest and inf

    inf = poll(snapped, "a snapshot at the compaction point")
    # ~1.6 MB of log went through ~25 segments; only those with retained
    # history (or the one being written) remain.
    files = segments(d)
    last_seq = int(os.path.basename(files[-1]).split(".")[0])
    assert last_seq >= 20 and len(files) <= 5, files
    assert os.path.exists(os.path.join(str(d), "snapshot.ordo"))
    before = dump(srv)
    cur, oldest = before[0]
    hist = {rv: call(srv, "KV.RANGE", "", "REV", rv) for rv in range(max(oldest, cur - 20), cur + 1)}
    r.close()

    for how in ("term", "kill"):
        getattr(durable, how)(srv)
        srv = durable.start(d, *flags)
        inf = srv.info("persistence")
        assert int(inf["snapshot_loaded_revision"]) > 0, inf
        assert int(inf["recovered_records"]) < 1500, inf
        after = dump(srv)
        assert after[0][0] == cur and after[1] == before[1]
        # The snapshot carries the retained history: the oldest readable
        # revision is what it was before the restart, and every retained
        # revision reads as it did.
        assert after[0][1] == oldest, (after[0], oldest, inf)
        assert oldest <= int(inf["snapshot_loaded_revision"]) <= cur, inf
        for rv, want in hist.items():
            assert call(srv, "KV.RANGE", "", "REV", rv) == want, rv
    # Writing on after a snapshot-based recovery, and recovering again.
    assert call(srv, "KV.PUT", "key:000", "z") == cur + 1
    durable.kill(srv)
    srv = durable.start(d, *flags)
    assert call(srv, "KV.GET", "key:000")[0] == b"z" and dump(srv)[0][0] == cur + 1


# ---- torn tail ------------------------------------------------------------------

def write_numbered(durable, data_dir, n):
    """SET t1..tn to v1..vn (revisions 1..n) on a new server on data_dir,
    then SIGTERM it; returns the last log segment and its frames."""
    srv = durable.start(data_dir)
    with srv.raw() as c:
        for i in range(1, n + 1):
            assert c.call("SET", "t%d" % i, "v%d" % i) == "OK"
    durable.term(srv)
    seg = segments(data_dir)[-1]
    return seg, frames(seg)


def read_numbered(c, n):
    """GET t1..tn on connection c."""
    return [c.call("GET", "t%d" % i) for i in range(1, n + 1)]


def numbered_prefix(n, whole):
    """What read_numbered must see when only the first `whole` records survived."""
    return [b"v%d" % i if i <= whole else None for i in range(1, n + 1)]


def boot_and_read(durable, data_dir, n):
    srv = durable.start(data_dir)
    with srv.raw() as c:
        rev = c.call("KV.REV")[0]
        vals = read_numbered(c, n)
    durable.term(srv)
    return rev, vals


def test_torn_tail_every_offset(durable, tmp_path):
    d = tmp_path / "data"
    n = 12
    seg, fr = write_numbered(durable, d, n)
    assert [f[2] for f in fr] == list(range(1, n + 1))
    size = os.path.getsize(seg)
    first = fr[-3][0]  # cut anywhere in the last three records
    cases = 0
    for cut in range(first, size):
        case = tmp_path / "cut"
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(d, case)
        with open(segments(case)[-1], "r+b") as f:
            f.truncate(cut)
        whole = sum(1 for (_o, end, _r) in fr if end <= cut)
        rev, vals = boot_and_read(durable, case, n)
        assert rev == whole, "cut at %d: revision %d, expected %d" % (cut, rev, whole)
        assert vals == numbered_prefix(n, whole), cut
        cases += 1
    assert cases == size - first


def test_torn_tail_zeroed_sector(durable, tmp_path):
    d = tmp_path / "data"
    n = 40  # ~3 KiB of records: the last sector starts well after the header
    seg, fr = write_numbered(durable, d, n)
    size = os.path.getsize(seg)
    sector = (size - 1) // 512 * 512
    for extend in (False, True):  # the sector zeroed inside the file / the file grown to the sector's end
        case = tmp_path / ("zero-%d" % extend)
        shutil.copytree(d, case)
        with open(segments(case)[-1], "r+b") as f:
            f.seek(sector)
            f.write(b"\0" * ((sector + 512 if extend else size) - sector))
        whole = sum(1 for (_o, end, _r) in fr if end <= sector)
        assert 0 < whole < n
        srv = durable.start(case)
        assert "torn tail" in srv.log_text()
        with srv.raw() as c:
            assert c.call("KV.REV")[0] == whole
            assert read_numbered(c, n) == numbered_prefix(n, whole)
            # Appending resumes at the cut: the next record is good after a restart.
            assert c.call("KV.PUT", "t1", "new") == whole + 1
        durable.kill(srv)
        srv = durable.start(case)
        assert call(srv, "KV.GET", "t1")[0:3:2] == [b"new", whole + 1]


# ---- mid-log corruption ------------------------------------------------------------

def write_thirty(durable, d):
    """A log of 30 SETs t1..t30 in d, the server stopped; the last segment."""
    srv = durable.start(d)
    with srv.raw() as c:
        for i in range(1, 31):
            assert c.call("SET", "t%d" % i, "v%d" % i) == "OK"
    durable.term(srv)
    return segments(d)[-1]


def flip_byte(path, pos, mask):
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ mask]))


def test_mid_log_corruption_is_refused(durable, tmp_path):
    d = tmp_path / "data"
    seg = write_thirty(durable, d)
    fr = frames(seg)
    for victim, where in ((4, "payload"), (10, "length"), (0, "revision")):
        case = tmp_path / ("corrupt-%d" % victim)
        shutil.copytree(d, case)
        off, end, _ = fr[victim]
        pos = {"payload": end - 2, "length": off + 1, "revision": off + 8}[where]
        path = segments(case)[-1]
        flip_byte(path, pos, 0x40)
        rc, err = run_ordod(case)
        assert rc != 0, err
        assert path in err and ("offset %d" % off) in err, (where, off, err)
        assert os.path.getsize(path) == os.path.getsize(seg)  # refused, not "repaired"


def test_bad_record_in_an_earlier_segment_is_refused(durable, tmp_path):
    d = tmp_path / "data"
    srv = durable.start(d, "--wal-segment-bytes", "64k")
    with srv.raw() as c:
        for i in range(1, 201):
            assert c.call("SET", "t%d" % i, "v%d-%s" % (i, "x" * 1000)) == "OK"
    durable.term(srv)
    segs = segments(d)
    assert len(segs) >= 3
    # The last record of the first segment: nothing good follows it in its
    # file, but it was sealed before the next segment was created.
    off, end, _ = frames(segs[0])[-1]
    flip_byte(segs[0], end - 1, 1)
    rc, err = run_ordod(d)
    assert rc != 0 and segs[0] in err and ("offset %d" % off) in err, err


def write_segments(durable, d, n=200):
    """n SETs t1..tn of ~1 KiB in 64 KiB segments, the server stopped; the
    segments and the revision of the last record of each."""
    srv = durable.start(d, "--wal-segment-bytes", "64k")
    with srv.raw() as c:
        for i in range(1, n + 1):
            assert c.call("SET", "t%d" % i, "v%d-%s" % (i, "x" * 1000)) == "OK"
    durable.term(srv)
    segs = segments(d)
    assert len(segs) >= 3
    return segs, [frames(p)[-1][2] for p in segs]


def test_missing_last_segment_is_refused(durable, tmp_path):
    """With the last segment deleted, ordod once started at an earlier
    revision (and would hand out revisions, ids and tokens again). The
    manifest says which segment is the newest: refused, naming it; with
    --wal-repair yes it starts from what is there and says so."""
    d = tmp_path / "data"
    segs, last_revs = write_segments(durable, d)
    os.rename(segs[-1], str(tmp_path / "kept.wal"))
    rc, err = run_ordod(d)
    assert rc != 0, err
    assert os.path.basename(segs[-1]) in err and "missing" in err and "--wal-repair yes" in err, err
    assert ("revision %d" % last_revs[-2]) in err, err
    srv = durable.start(d, "--wal-repair", "yes")
    assert "going on from revision %d" % last_revs[-2] in srv.log_text()
    assert dump(srv)[0][0] == last_revs[-2]
    durable.term(srv)
    srv = durable.start(d)  # repaired: starts without the option
    assert dump(srv)[0][0] == last_revs[-2]


def test_every_segment_missing_is_refused(durable, tmp_path):
    d = tmp_path / "data"
    segs, _ = write_segments(durable, d)
    for p in segs:
        os.unlink(p)
    rc, err = run_ordod(d)
    assert rc != 0 and "no segment is there" in err and os.path.basename(segs[-1]) in err, err


def test_missing_middle_segment_is_named(durable, tmp_path):
    """A missing middle segment was refused only as a record that does not
    follow; now the gap is named, and --wal-repair yes ends the log before
    it, keeping the later segments aside."""
    d = tmp_path / "data"
    segs, last_revs = write_segments(durable, d)
    os.unlink(segs[1])
    rc, err = run_ordod(d)
    names = [os.path.basename(p) for p in segs]
    assert rc != 0, err
    assert ("%s is missing between %s and %s" % (names[1], names[0], names[2])) in err, err
    assert "--wal-repair yes" in err, err
    srv = durable.start(d, "--wal-repair", "yes")
    assert dump(srv)[0][0] == last_revs[0]
    for p in segs[2:]:
        assert os.path.exists(p + ".cut"), p
    with srv.raw() as c:
        assert c.call("SET", "after", "1") == "OK"
    durable.term(srv)
    srv = durable.start(d)
    assert call(srv, "GET", "after") == b"1"


def test_log_without_manifest_starts_and_gets_one(durable, tmp_path):
    """A data directory written before the manifest existed starts as it
    is, and has a manifest afterwards that catches a deleted last segment."""
    d = tmp_path / "data"
    segs, last_revs = write_segments(durable, d)
    os.unlink(os.path.join(str(d), "wal", "manifest"))
    srv = durable.start(d)
    assert dump(srv)[0][0] == last_revs[-1]
    durable.term(srv)
    assert os.path.exists(os.path.join(str(d), "wal", "manifest"))
    os.unlink(segments(d)[-1])
    rc, err = run_ordod(d)
    assert rc != 0 and "missing" in err, err


def test_wal_repair_cuts_a_corrupt_log_and_keeps_the_cut_bytes(durable, tmp_path):
    """Mid-log corruption: refused without --wal-repair, naming file and
    offset (and the option); with it, ordod starts with exactly the records
    before the bad one, the cut bytes kept beside the log, and says what it
    cut."""
    d = tmp_path / "data"
    seg = write_thirty(durable, d)
    fr = frames(seg)
    off, end, _ = fr[10]
    flip_byte(seg, end - 2, 0x40)
    bad = open(seg, "rb").read()
    rc, err = run_ordod(d)
    assert rc != 0 and seg in err and ("offset %d" % off) in err and "--wal-repair yes" in err, err
    assert open(seg, "rb").read() == bad

    srv = durable.start(d, "--wal-repair", "yes")
    last_good = fr[9][2]
    log = srv.log_text()
    assert ("cut %s at byte offset %d, %d bytes" % (seg, off, len(bad) - off)) in log, log
    assert ("ends at revision %d" % last_good) in log, log
    saved = "%s.cut-at-%d" % (seg, off)
    assert saved in log, log
    assert open(saved, "rb").read() == bad[off:]
    assert os.path.getsize(seg) == off
    assert dump(srv)[0][0] == last_good
    with srv.raw() as c:
        for i in range(1, 31):
            want = ("v%d" % i).encode() if i <= 10 else None
            assert c.call("GET", "t%d" % i) == want, i
        assert c.call("DBSIZE") == 10
        assert c.call("SET", "after", "1") == "OK"
    durable.kill(srv)
    srv = durable.start(d)  # the repaired log starts without the option
    assert call(srv, "GET", "after") == b"1" and call(srv, "DBSIZE") == 11
    assert open(saved, "rb").read() == bad[off:]


# ---- I/O faults ---------------------------------------------------------------------

@pytest.mark.parametrize("fault,reason", [("write-eio:6", "Input/output error"),
                                          ("write-enospc:6", "No space left on device"),
                                          ("sync-eio:6", "Input/output error")])
def test_io_fault_makes_readonly_and_loses_no_ack(durable, tmp_path, fault, reason):
    d = tmp_path / "data"
    srv = durable.start(d, "--debug-wal-fault", fault)
    acked, refused, unknown = {}, [], []
    c = srv.raw()
    failed = False
    for i in range(30):
        k, v = "f%d" % i, "v%d" % i
        try:
            rep = c.call("SET", k, v)
        except (Closed, ConnectionResetError, OSError):
            rep = None
        if rep == "OK":
            assert not failed, "a write was acknowledged after the log failed: %s" % k
            acked[k] = v
            continue
        if isinstance(rep, RespError):
            assert rep.code == "READONLY" and reason in rep.msg, rep
            # The write that hit the fault may itself get -READONLY.
            (refused if failed else unknown).append(k)
        else:
            unknown.append(k)  # connection dropped: not acknowledged
            c.close()
            c = srv.raw()
        failed = True
    c.close()
    assert len(acked) >= 2, acked  # writes worked until the fault
    assert len(unknown) == 1 and len(refused) == 29 - len(acked), (acked, unknown, refused)
    inf = srv.info("persistence")
    assert inf["readonly"] == "yes" and reason in inf["readonly_reason"], inf
    assert call(srv, "PING") == "PONG"
    # Reads of state the log may not hold are refused too, never answered.
    got = call(srv, "GET", sorted(acked)[0])
    assert isinstance(got, RespError) and got.code == "READONLY", got
    assert "readonly" in srv.log_text().lower() or "READONLY" in srv.log_text()
    durable.term(srv)

    srv2 = durable.start(d)  # no fault
    for k, v in acked.items():
        assert call(srv2, "GET", k) == v.encode(), k
    for k in refused:
        assert call(srv2, "GET", k) is None, k  # never applied
    rev = dump(srv2)[0][0]
    assert len(acked) <= rev <= len(acked) + 1
    assert srv2.info("persistence")["readonly"] == "no"
    assert call(srv2, "SET", "again", "1") == "OK"


def test_io_fault_pipelined_and_concurrent(durable, tmp_path):
    """Many connections pipelining when the sync fails: no OK for anything
    the log did not store, and the server keeps answering."""
    d = tmp_path / "data"
    srv = durable.start(d, "--debug-wal-fault", "sync-eio:20")
    conns = [srv.raw() for _ in range(4)]
    acked = {}
    for rnd in range(20):
        for ci, c in enumerate(conns):
            if c is None:
                continue
            try:
                c.send_raw(b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nx\r\n" % (len(k), k)
                                    for k in [b"p%d-%d-%d" % (ci, rnd, j) for j in range(5)]))
            except OSError:
                conns[ci] = None
        for ci, c in enumerate(conns):
            if c is None:
                continue
            for j in range(5):
                try:
                    rep = c.read()
                except (Closed, ConnectionResetError, OSError):
                    conns[ci] = None
                    break
                if rep == "OK":
                    acked["p%d-%d-%d" % (ci, rnd, j)] = True
                else:
                    assert isinstance(rep, RespError) and rep.code == "READONLY", rep
    for c in conns:
        if c is not None:
            c.close()
    assert srv.info("persistence")["readonly"] == "yes"
    durable.term(srv)
    srv2 = durable.start(d)
    with srv2.raw() as c:
        for k in acked:
            assert c.call("GET", k) == b"x", k


# ---- reply gating ---------------------------------------------------------------------

def test_reply_waits_for_durable_revision(durable, tmp_path):
    d = tmp_path / "data"
    srv = durable.start(d)
    with srv.raw() as c, srv.raw() as c2:
        for i in range(50):
            rv = c.call("KV.PUT", "g%d" % (i % 5), "v%d" % i)
            inf = c2.call("INFO", "persistence").decode()
            dur = int([l for l in inf.splitlines() if l.startswith("durable_revision:")][0].split(":")[1])
            assert dur >= rv, (rv, dur)
        # Pipelined: every reply comes after its own record's sync.
        c.send_raw(b"".join(b"*3\r\n$6\r\nKV.PUT\r\n$2\r\npp\r\n$1\r\n%d\r\n" % (i % 10) for i in range(200)))
        revs = [c.read() for _ in range(200)]
        inf = c2.call("INFO", "persistence").decode()
        dur = int([l for l in inf.splitlines() if l.startswith("durable_revision:")][0].split(":")[1])
        assert dur >= max(revs) and revs == sorted(revs)
        p = srv.info("persistence")
        assert int(p["wal_syncs"]) >= 1
        # The time spent inside those syncs is counted beside them (0 is
        # possible on a file system whose sync returns at once).
        assert int(p["wal_sync_us_sum"]) >= 0, p
        assert 0 <= int(p["wal_syncs_overlapped"]) <= int(p["wal_syncs"]), p


# ---- back-pressure -------------------------------------------------------------------

BP_LIMIT = 128 * 1024
BP_VALUE = 1000
BP_COMMANDS = 8000  # ~8 MiB offered: far more than the limit and the socket buffers


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_stalled_disk_bounds_pending_log_bytes_and_loses_no_ack(durable, tmp_path, fsync):
    """The disk stalls (debug-wal-stall) under a client that keeps writing:
    ordod stops reading once wal-pending-max-bytes of records wait, so the
    records waiting never pass the limit by more than one read; once the
    disk moves, every command is answered and every acknowledged write
    survives a SIGKILL."""
    import threading
    d = tmp_path / "data"
    stall = tmp_path / "stall"
    # fsync-inline-max 0: a lone record would otherwise be synced by the
    # main thread itself, which then waits out the stall inside the seam
    # (reading nothing, so bounded too, but not what this test watches).
    srv = durable.start(d, "--fsync", fsync, "--verbose", "yes", "--wal-pending-max-bytes", str(BP_LIMIT),
                        "--debug-wal-stall", str(stall), "--fsync-inline-max", "0")
    assert call(srv, "SET", "before", "1") == "OK"
    stall.touch()
    c = srv.raw(timeout=60)
    value = b"v" * BP_VALUE
    sent = [0]

    def sender():
        for i in range(BP_COMMANDS):
            k = b"bp%05d" % i
            cmd = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(value), value)
            c.sock.sendall(cmd)
            sent[0] += len(cmd)

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    poll(lambda: "not reading clients" in srv.log_text(), "back-pressure to engage")
    # The client goes on sending into the socket buffers while ordod reads
    # nothing: well past what the limit lets the log hold.
    poll(lambda: sent[0] >= 8 * BP_LIMIT, "the client to send past the limit")
    stall.unlink()
    replies = [c.read() for _ in range(BP_COMMANDS)]
    t.join(timeout=60)
    assert not t.is_alive()
    c.close()
    assert all(r == "OK" for r in replies), [r for r in replies if r != "OK"][:3]
    inf = srv.info("persistence")
    # One read of one connection (16 KiB of commands) may land past the limit.
    slack = 16 * 1024 + 16 * 1024 // BP_VALUE * 64 + BP_VALUE + 256
    assert BP_LIMIT < int(inf["wal_pending_bytes_peak"]) <= BP_LIMIT + slack, inf
    assert int(inf["wal_backpressure_events"]) >= 1 and inf["wal_backpressure"] == "0", inf
    assert int(inf["wal_backpressure_ms"]) > 0, inf
    assert int(inf["wal_pending_max_bytes"]) == BP_LIMIT
    poll(lambda: srv.info("persistence")["wal_pending_bytes"] == "0", "the log to drain")
    durable.kill(srv)
    srv2 = durable.start(d, "--fsync", fsync)
    with srv2.raw() as c2:
        for i in range(0, BP_COMMANDS, 97):
            assert c2.call("GET", "bp%05d" % i) == value, i
        assert c2.call("DBSIZE") == BP_COMMANDS + 1


@pytest.mark.parametrize("fsync", ["everysec", "no"])
@pytest.mark.parametrize("inline", ["0", "1"])
def test_relaxed_fsync_acks_only_written_records(durable, tmp_path, fsync, inline):
    """Under everysec and no a reply still waits until its record is written
    to the OS (by the log thread, or by the main thread when inline), so a
    crash of the process loses nothing acknowledged: while the disk stalls
    no OK comes back; once it moves the OK comes, and survives SIGKILL."""
    import socket
    d = tmp_path / "data"
    stall = tmp_path / "stall"
    srv = durable.start(d, "--fsync", fsync, "--fsync-inline-max", inline, "--debug-wal-stall", str(stall))
    assert call(srv, "SET", "before", "1") == "OK"
    stall.touch()
    c = srv.raw(timeout=60)
    c.send("SET", "during", "2")
    c.settimeout(0.5)
    with pytest.raises(socket.timeout):
        c.read()  # an acknowledgement now would name a record the OS never got
    c.settimeout(60)
    stall.unlink()
    assert c.read() == "OK"
    c.close()
    durable.kill(srv)
    srv2 = durable.start(d, "--fsync", fsync)
    with srv2.raw() as c2:
        assert c2.call("MGET", "before", "during") == [b"1", b"2"]


def test_compaction_waits_for_a_snapshot_being_written(durable, tmp_path):
    """KV.COMPACT past the point of a snapshot still being written freed the
    history it copies (the snapshot codec then aborted the server on a base
    above its point). It is refused while the snapshot runs, then works."""
    d = tmp_path / "data"
    srv = durable.start(d, "--fsync", "no")
    with srv.raw() as c:
        c.send_raw(b"".join(b"SET k%05d v\r\n" % i for i in range(6000)))  # > one 2048-key slice
        for _ in range(6000):
            assert c.read() == "OK"
        cur = c.call("KV.REV")[0]
        # one read batch: the snapshot begins, then the compaction comes
        c.send_raw(b"SNAPSHOT\r\nKV.COMPACT %d\r\n" % cur)
        assert c.read() is not None
        e = c.read()
        assert isinstance(e, RespError) and e.code == "BUSY", e
    poll(lambda: srv.info("persistence")["snapshots_taken"] == "1", "the snapshot written")
    assert call(srv, "KV.COMPACT", str(cur)) == "OK"
    durable.term(srv)
    srv = durable.start(d)  # the snapshot loads
    assert call(srv, "GET", "k05999") == b"v"


def test_compaction_recovers_where_the_replay_trimmed_further(durable, tmp_path):
    """Writes applied while a snapshot pins the history are not trimmed,
    so a KV.COMPACT after them moved a point the replay of a crash has
    already passed (the replay trims as it goes): the replayed compaction
    took no revision there, and the log no longer followed (the server
    could not start). A logged compaction takes its revision wherever it
    applies."""
    d = tmp_path / "data"
    srv = durable.start(d, "--fsync", "no", "--history-revs", "50")
    with srv.raw() as c:
        c.send_raw(b"".join(b"KV.PUT k%d v%d\r\n" % (i % 100, i) for i in range(200)))
        assert not any(isinstance(c.read(), RespError) for _ in range(200))
        oldest = c.call("KV.REV")[1]
        # one read batch: SNAPSHOT pins the history, then 100 writes in the same turn
        c.send_raw(b"SNAPSHOT\r\n" + b"".join(b"KV.PUT k%d w%d\r\n" % (i % 100, i) for i in range(100)))
        assert not any(isinstance(c.read(), RespError) for _ in range(101))
        assert c.call("KV.REV")[1] == oldest, "the pinned writes were trimmed"
    poll(lambda: srv.info("persistence")["snapshot_in_progress"] == "0", "the snapshot ends")
    assert call(srv, "KV.COMPACT", str(oldest + 20)) == "OK"
    before = dump(srv)
    assert before[0][1] == oldest + 20
    durable.kill(srv)
    srv = durable.start(d, "--fsync", "no", "--history-revs", "50")
    after = dump(srv)
    assert after[1] == before[1] and after[0][0] == before[0][0], (before[0], after[0])
    assert after[0][1] > oldest + 20  # the replay trimmed past the compaction's point


def test_keys_due_after_the_log_failed_leave_the_server_answering(ordod_factory):
    """The log refuses the first expiry of two due keys: the server turns
    read-only and keeps answering. (The writer's door refuses every record
    once the log failed, so a loop that went on expiring while keys were
    due would spin for ever, the loop thread with it.)"""
    srv = ordod_factory("--debug-wal-fault", "append-eio:3")
    with srv.raw() as c, srv.raw() as other:
        assert c.call("SET", "a", "1", "PX", "50") == "OK"
        assert c.call("SET", "b", "1", "PX", "50") == "OK"
        due = time.monotonic() + 0.2  # both deadlines passed, by the writer's clock too
        poll(lambda: time.monotonic() >= due, "the keys' deadlines to pass")
        c.settimeout(5.0)
        other.settimeout(5.0)
        r = c.call("GET", "x")  # expires the due keys first: the log refuses the first
        assert isinstance(r, RespError) and r.code == "READONLY", r
        assert other.call("PING") == "PONG"
    assert srv.info("persistence")["readonly"] == "yes"
