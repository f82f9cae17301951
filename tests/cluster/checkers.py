"""The cluster suite's checkers: pure functions over recorded histories.

Each takes what clients (and the CLUSTER INFO sampler) recorded and returns
the number of violations it found; the tests require 0. Nothing here talks
to a server, so tests/cluster/test_checkers.py tests every checker with
hand-made histories, ones that must be flagged and ones that must not.

Times are time.monotonic() of the one test process that recorded them
(every thread shares that clock). The records (plain dicts):

  write   {"key", "value", "status", "rev", "t0", "t1"}
          status "ok" (a success reply), "doubt" (sent, no reply: may have
          applied), "err"/"fail" (an error reply / never sent); rev is the
          revision KV.PUT returned (None for SET); t0 when it was first
          sent, t1 when its reply arrived. Values are unique over a run.
          One writer per key, one request in flight: a key's writes are
          listed in the order they were sent.
  read    {"key", "value", "rev", "t0", "t1"}: a successful KV.GET sent at
          t0, answered at t1 with value and mod revision (None, 0 if absent)
  sample  {"t", "node", "term", "role", "leader"}: one CLUSTER INFO
  push    {"key", "seq", "status", "id"}: Q.PUSH of payload "<key>:<seq>"
          (seq increasing per key; the producer repeats a push with the
          same dedup ID until it is acknowledged, then pushes seq+1)
  delivery {"key", "seq", "id", "token"}: one message of a Q.PULL reply
  ack     {"id", "token", "status", "reply"}: Q.ACK; reply 1/0 when "ok"
  grant   {"token", "t0", "t1"}: a LOCK.ACQUIRE that returned a token
  attempt {"node", "status", "t0"}: a write sent to one member only
  event   {"rev", "kind", "key", "value"}: one KV.WATCH event, in the order
          received, across the watcher's reconnects (each resumes FROM the
          last revision it received)
"""
from collections import defaultdict

__all__ = ["lost_acks", "reused_revisions", "stale_reads", "two_leaders", "queue_order_violations",
           "queue_lost", "double_acks", "lock_token_violations", "minority_acks", "watch_violations"]


def lost_acks(writes, final, held_doubt=False):
    """Acknowledged writes lost (after leader kills).

    final: {key: (value, mod_rev)} read from the leader at the end (a key
    absent from it is missing). Per key, with i its last write that got a
    success reply: the final value must be write i's or that of a write
    sent after it (which may have applied: in doubt, or acked later -- but
    i is the last acked, so only in doubt or failed ones), and the final
    mod revision must not be below the revision write i was told. Counts
    the keys that break this.

    held_doubt: a write in doubt may also have been held by the network
    and applied after later writes (its client gave up on it, so it may
    take effect at any time after it was sent): then the value of one
    sent before i counts too, if the final mod revision is above the one
    write i was told (it applied after i). That i applied at its revision
    is for the history to show (watch_violations), not the final state."""
    by_key = defaultdict(list)
    for w in writes:
        by_key[w["key"]].append(w)
    lost = 0
    for key, ws in by_key.items():
        acked = [i for i, w in enumerate(ws) if w["status"] == "ok"]
        if not acked:
            continue
        i = acked[-1]
        got = final.get(key)
        if got is None or got[0] is None:
            lost += 1
            continue
        value, mod_rev = got
        allowed = {w["value"] for w in ws[i:]}
        if held_doubt and ws[i]["rev"] is not None and mod_rev is not None and mod_rev > ws[i]["rev"]:
            allowed |= {w["value"] for w in ws[:i] if w["status"] == "doubt"}
        if value not in allowed:
            lost += 1
        elif ws[i]["rev"] is not None and mod_rev is not None and mod_rev < ws[i]["rev"]:
            lost += 1
    return lost


def reused_revisions(observations):
    """Revisions reused with another value: observations are (rev, key,
    value) triples -- from acknowledged KV.PUTs (the revision it returned),
    from reads (the mod revision and value a KV.GET returned), from the
    final state. A revision is one change: seen with two different
    (key, value) pairs, it counts once."""
    seen = defaultdict(set)
    for rev, key, value in observations:
        if rev is None or rev == 0:
            continue
        seen[rev].add((key, value))
    return sum(1 for pairs in seen.values() if len(pairs) > 1)


def stale_reads(writes, reads):
    """Stale reads: a read that was sent after a write of its key was
    acknowledged (read t0 > write t1) returns an older state: a mod
    revision below that write's revision, or (for writes without a
    revision) a value the key no longer had -- the value of a write
    acknowledged before an acknowledged write that itself was acknowledged
    before the read was sent. Counts such reads."""
    by_key = defaultdict(list)
    for w in writes:
        if w["status"] == "ok":
            by_key[w["key"]].append(w)
    for ws in by_key.values():
        ws.sort(key=lambda w: w["t1"])
    stale = 0
    for r in reads:
        done = [w for w in by_key.get(r["key"], ()) if w["t1"] < r["t0"]]
        if not done:
            continue
        last = done[-1]
        revs = [w["rev"] for w in done if w["rev"] is not None]
        if revs and (r["rev"] or 0) < max(revs):
            stale += 1
            continue
        # By value: the read may see the last acked write before it, or any
        # write sent after that one was acknowledged... but never a value
        # overwritten by an acknowledged write that finished before the
        # read began (one writer per key: writes are ordered).
        overwritten = {w["value"] for w in done[:-1]} - {last["value"]}
        if r["value"] is None or r["value"] in overwritten:
            stale += 1
    return stale


def two_leaders(samples):
    """Two leaders in one term: over CLUSTER INFO samples of members that
    say they are the leader (role "leader"), the distinct leader ids seen
    per term; a term with more than one counts once (so does a leader whose
    own sample names another id as leader)."""
    leaders = defaultdict(set)
    for s in samples:
        if s["role"] == "leader":
            leaders[s["term"]].add(s["node"])
            if s["leader"] not in (None, 0):
                leaders[s["term"]].add(s["leader"])
    return sum(1 for ids in leaders.values() if len(ids) > 1)


def queue_order_violations(pushes, deliveries):
    """Per-key order across failover. Per key, deliveries in token order
    (a token is the delivery's revision): a delivery of an earlier message
    than one already delivered (seq below the highest so far) is a
    violation, and so is a jump past a message whose push was acknowledged
    and that was never delivered (its push was acknowledged before the
    later one was sent: pushes are sequential per key). Counts the
    offending deliveries."""
    acked = defaultdict(set)
    for p in pushes:
        if p["status"] == "ok":
            acked[p["key"]].add(p["seq"])
    by_key = defaultdict(list)
    for d in deliveries:
        by_key[d["key"]].append(d)
    bad = 0
    for key, ds in by_key.items():
        ds.sort(key=lambda d: d["token"])
        top = None
        seen = set()
        for d in ds:
            s = d["seq"]
            if top is not None and s < top:
                bad += 1
                continue
            lo = top if top is not None else min(acked[key] | {s})
            if any(x not in seen for x in acked[key] if lo <= x < s):
                bad += 1
            seen.add(s)
            top = s if top is None else max(top, s)
    return bad


def queue_lost(pushes, acks, deliveries):
    """Acknowledged pushes whose message was never acked (an ack that
    returned 1, or was in doubt) after the drain: counts such messages."""
    by_token = {(d["id"], d["token"]) for d in deliveries}
    done = {a["id"] for a in acks
            if (a["status"] == "ok" and a["reply"] == 1) or
            (a["status"] == "doubt" and (a["id"], a["token"]) in by_token)}
    return sum(1 for p in pushes if p["status"] == "ok" and p["id"] not in done)


def double_acks(acks):
    """Double successful acks: a message id with more than one Q.ACK that
    returned 1 (across deliveries and failovers). Counts such ids."""
    n = defaultdict(int)
    for a in acks:
        if a["status"] == "ok" and a["reply"] == 1:
            n[a["id"]] += 1
    return sum(1 for c in n.values() if c > 1)


def lock_token_violations(grants):
    """Lock tokens that fail to increase: a grant whose token is not above
    every token granted (reply received) before it was requested, and
    tokens handed out twice. Counts the offending grants."""
    bad = 0
    done = sorted(grants, key=lambda g: g["t1"])
    tokens = defaultdict(int)
    for g in grants:
        tokens[g["token"]] += 1
    for g in grants:
        before = [h["token"] for h in done if h["t1"] < g["t0"]]
        if (before and g["token"] <= max(before)) or tokens[g["token"]] > 1:
            bad += 1
    return bad


def minority_acks(attempts, minority, t_cut, t_heal):
    """A partitioned minority that accepts a write: attempts (writes sent
    to one member only) to a member of minority (ids), sent after the
    partition was in place (t0 >= t_cut) and before healing began
    (t0 < t_heal), that got a success reply. Counts them."""
    return sum(1 for a in attempts
               if a["node"] in minority and t_cut <= a["t0"] < t_heal and a["status"] == "ok")


def watch_violations(writes, events):
    """A watch resumed across failovers: events whose revision is not above
    the one before (a duplicate or going back), and acknowledged writes the
    events lack: a KV.PUT's revision missing or carrying another key or
    value, a SET's value never seen for its key. Only writes acknowledged
    at or below the last event's revision count (the caller waits until
    the watch caught up). Counts both."""
    bad = 0
    last = 0
    by_rev = {}
    seen = set()
    for e in events:
        if e["rev"] <= last:
            bad += 1
        last = max(last, e["rev"])
        by_rev.setdefault(e["rev"], (e["key"], e["value"]))
        seen.add((e["key"], e["value"]))
    for w in writes:
        if w["status"] != "ok":
            continue
        if w["rev"] is not None:
            if w["rev"] <= last and by_rev.get(w["rev"]) != (w["key"], w["value"]):
                bad += 1
        elif (w["key"], w["value"]) not in seen:
            bad += 1
    return bad
