"""Old log formats: a data directory written by an ordod that logged its
records in format 2 (before typed records; src/server/core/record.h) still
starts, with all its data, and says once that it read older records.

The log is built here by hand: one segment in the format of
src/server/log/wal.c's header comment (40-byte header; frames of len u32 |
crc u32 | rev u64 | payload, crc = CRC-32C of salt || rev || len ||
payload), holding records in format 2's fixed layout, as that ordod's
encoder wrote them -- including the three queue flags that shared bit 0
(COALESCE, NOACK, RESULT), which must come back as what they meant.
"""
import os
import struct
import time

from conftest import ORDOD  # noqa: F401  (the binary under test)

WAL_MAGIC = b"ORDOWAL\0"
SALT = 0x5EED5EED12345678

# enum record_type (core.h)
PUT, DEL, INCR = 1, 2, 3
LEASE_GRANT, LOCK_ACQUIRE, ELECT_CAMPAIGN = 10, 13, 16
Q_PUSH, Q_DELIVER, Q_ACK = 30, 31, 32
BIT0 = 1  # format 2: COALESCE in Q_PUSH, NOACK in Q_DELIVER, RESULT in Q_ACK

LONG_MS = 600000


def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def rec_v2(typ, now, flags=0, lease=0, ifrev=0, expire_at=0, incr=0, arg_rev=0, ttl=0, token=0, kind=0,
           key=b"", val=b"", name=b"", aux=b""):
    """A record in format 2, byte for byte as the format-2 encoder wrote it."""
    b = struct.pack("<BBBQQQQqQQQB", 2, typ, flags, now, lease, ifrev, expire_at, incr, arg_rev, ttl, token, kind)
    assert len(b) == 68
    for f in (key, val, name, aux):
        b += struct.pack("<I", len(f)) + f
    return b


def segment(records):
    """A whole segment file (sequence 1) holding [(rev, payload)]."""
    head = WAL_MAGIC + struct.pack("<IIQQ", 1, 40, 1, SALT)
    head += struct.pack("<II", crc32c(head), 0)
    assert len(head) == 40
    out = head
    for rev, payload in records:
        crc = crc32c(struct.pack("<QQI", SALT, rev, len(payload)) + payload)
        out += struct.pack("<IIQ", len(payload), crc, rev) + payload
    return out


def old_log(now):
    """The format-2 records of a short history, with the revision each
    reaches: keys, a lease and a key on it, a lock, a leader, and a queue
    whose first push coalesces into a second, whose first delivery is acked
    with a result and whose second is NOACK."""
    recs = [
        rec_v2(PUT, now, key=b"a", val=b"1"),                                # 1
        rec_v2(PUT, now, key=b"b", val=b"2", expire_at=now + LONG_MS),       # 2
        rec_v2(INCR, now, key=b"n", incr=5),                                 # 3
        rec_v2(PUT, now, key=b"c", val=b"x"),                                # 4
        rec_v2(DEL, now, key=b"c"),                                          # 5
        rec_v2(LEASE_GRANT, now, ttl=LONG_MS),                               # 6: lease 6
        rec_v2(PUT, now, key=b"leased", val=b"v", lease=6),                  # 7
        rec_v2(LOCK_ACQUIRE, now, key=b"lk", ttl=LONG_MS),                   # 8: token 8
        rec_v2(ELECT_CAMPAIGN, now, key=b"el", val=b"me", ttl=LONG_MS),      # 9: term 9
        rec_v2(Q_PUSH, now, flags=BIT0, name=b"q", key=b"k1", val=b"p1"),    # 10: id 10
        rec_v2(Q_PUSH, now, flags=BIT0, name=b"q", key=b"k1", val=b"p2"),    # 11: coalesces into 10
        rec_v2(Q_PUSH, now, name=b"q", key=b"k2", val=b"p3", aux=b"dd"),     # 12: id 12
        rec_v2(Q_DELIVER, now, name=b"q", ttl=LONG_MS),                      # 13: delivers 10, token 13
        rec_v2(Q_ACK, now, flags=BIT0, name=b"q", arg_rev=10, token=13, val=b"r1"),  # 14
        rec_v2(Q_DELIVER, now, flags=BIT0, name=b"q"),                       # 15: 12, NOACK
    ]
    return [(i + 1, r) for i, r in enumerate(recs)]


def check_state(c):
    # [key, value, create_rev, mod_rev, version, lease]; "c" was deleted.
    assert [e for e in c.call("KV.RANGE", "") if e[0] != b"after"] == [
        [b"a", b"1", 1, 1, 1, 0],
        [b"b", b"2", 2, 2, 1, 0],
        [b"leased", b"v", 7, 7, 1, 6],
        [b"n", b"5", 3, 3, 1, 0],
    ]
    rem, nkeys = c.call("LEASE.TTL", 6)
    assert rem > 0 and nkeys == 1
    assert c.call("ELECT.LEADER", "el") == [b"me", 9]
    assert c.call("Q.LEN", "q") == [0, 0, 0]  # coalesced, acked, and the NOACK delivery done
    assert c.call("Q.RESULT", "q", 10) == b"r1"


def test_format2_data_directory_starts_with_all_its_data(ordod_factory, tmp_path):
    data = tmp_path / "old"
    os.makedirs(data / "wal")
    now = int(time.time() * 1000)
    with open(data / "wal" / ("%020d.wal" % 1), "wb") as f:
        f.write(segment(old_log(now)))
    srv = ordod_factory("--dir", str(data), "--fsync", "always")
    with srv.raw() as c:
        assert c.call("KV.REV")[0] == 15
        check_state(c)
        info = c.call("LOCK.INFO", "lk")
        assert 8 in info, info
        # New records go in the new format after the old ones.
        assert c.call("KV.PUT", "after", "new") == 16
    err = srv.log_text()
    assert err.count("older format") == 1, err[-3000:]

    # Started again: the old records and the new one, read together.
    rc = srv.stop()
    assert rc == 0, srv.log_tail(3000)
    srv = ordod_factory("--dir", str(data), "--fsync", "always")
    with srv.raw() as c:
        assert c.call("KV.REV")[0] == 16
        assert c.call("GET", "after") == b"new"
        check_state(c)
