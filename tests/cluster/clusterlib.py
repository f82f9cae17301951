"""The cluster harness: N ordod members on loopback (tests/cluster/README.md).

Owns:
  - Member: one ordod of a cluster, an Ordod of tests/pylib/ordoproc.py
    (which starts, SIGKILLs, SIGTERMs and restarts it with the same
    arguments, and notes exits we did not cause): its node id, client
    port and cluster options; CLUSTER INFO parsed to a dict;
  - Cluster: the members started together (3 or 5), bootstrapped from one
    --cluster list; waiting until ready, finding the leader, partitions
    (DEBUG PARTITION) and healing, waiting until every member applied the
    same index and comparing DEBUG DIGEST, adding a member that joins;
    stop() ends every process it started, bounded in time;
  - ClusterClient: a client that follows -NOTLEADER host:port and
    reconnects after connection errors, reporting what it knows of a
    command's fate (ok / err / doubt / fail);
  - Sampler: a thread that polls CLUSTER INFO on every member, for the
    one-leader-per-term checker.
Every wait is ordoproc's poll (re-exported here for the tests).

ORDO_TEST_TLS_CLUSTER=1 (or Cluster(tls=True)) puts every cluster and
its clients on TLS: certificates from scripts/make-certs.sh for
node-1..node-16, made once per Cluster under its base directory; members
talk raft over mutual TLS (--tls-cluster), serve RESP on their tls-port
only (--port 0 --tls-port P, P the port the --cluster list names, so
-NOTLEADER sends clients to a TLS door) and HTTPS (--tls-http). Every
client the tests start goes through the Cluster, which says how to reach
a member in one place: connect() and Member.conn() (resp.Conn),
ClusterClient, redis_kwargs() (redis-py), tool() (the ordo tool),
example() (the C examples), http_conn() and url() (HTTP), all verifying
the members' certificates against the test CA.

Invariants: only PIDs this harness started are ever signalled; every wait
has a deadline; a member counts as started only once the server answering
on its port reports its PID. Ports: a member's client port and its raft
port (client port + the cluster's --cluster-port-offset) are both checked
free, and are picked below the kernel's ephemeral range (Linux's default
32768..60999), so outgoing connections of other processes cannot take a killed
member's ports while it is down.
"""
import http.client
import os
import random
import socket
import ssl
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))   # watchlib
sys.path.insert(0, os.path.join(ROOT, "tests", "pylib"))

from ordoproc import HOST, Ordod, poll  # noqa: E402,F401  (poll: for the tests and workloads)
from resp import Closed, Conn, RespError, encode  # noqa: E402

ORDOD = os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod"))
BUILD = os.path.dirname(ORDOD)     # the ordo tool and the examples the tests start
TLS_CLUSTER = bool(os.environ.get("ORDO_TEST_TLS_CLUSTER"))   # TLS for members and clients

PORT_OFFSET = 10000            # --cluster-port-offset: the contract's default
CLIENT_PORT_RANGE = (12000, 22500)   # + PORT_OFFSET stays below 32768 (the ephemeral range)
RESERVED_PORTS = range(17000, 17100)  # make cluster's raft ports (7001.. + 10000): left to it
ELECTION_TIMEOUT_MS = 500      # --cluster-election-timeout-ms: the contract's default
TLS_MEMBERS_MAX = 16           # ORDO_TEST_TLS_CLUSTER: member certificates made (ids 1..16)
READY_DEADLINE_S = 30.0        # cluster_state:ok on every member, one leader agreed
LEADER_DEADLINE_S = 20.0       # a new leader after a kill or a partition
SYNC_DEADLINE_S = 60.0         # every member applied the leader's commit index
SYNC_POLL_S = 3 * ELECTION_TIMEOUT_MS / 10 / 1000.0   # three heartbeats (a tenth of the election timeout)
STOP_DEADLINE_S = 5.0          # SIGTERM to exit, then SIGKILL (a clean exit takes well under a second)
START_ATTEMPTS = 4             # a bootstrap that lost a port race is retried on new ports
ADMIN_TIMEOUT_S = 5.0          # socket timeout of the harness's own calls
CLIENT_TIMEOUT_S = 5.0         # a ClusterClient's socket timeout
NOLEADER_PAUSE_S = 0.02        # pause after -NOTLEADER ? or a refused connect (a poll interval)


def _bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


def pick_ports(n, offset=PORT_OFFSET, avoid=(), rng=random):
    """n client ports p with p and p+offset free (and not in avoid)."""
    out = []
    taken = set(avoid)
    for _ in range(20000):
        p = rng.randrange(*CLIENT_PORT_RANGE)
        if p in taken or p + offset in taken or p - offset in taken or p in RESERVED_PORTS:
            continue
        if _bindable(p) and _bindable(p + offset):
            out.append(p)
            taken.update((p, p + offset))
            if len(out) == n:
                return out
    raise AssertionError("no %d free port pairs (offset %d)" % (n, offset))


_options = None


def ordod_has_option(name):
    """Whether `ordod --help` lists --name (options the contract leaves
    open, such as --cluster-join, are passed only when the binary has them)."""
    global _options
    if _options is None:
        p = subprocess.run([ORDOD, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        _options = p.stdout.decode(errors="replace")
    return ("--%s " % name) in _options


def parse_info(text):
    """CLUSTER INFO's text (bytes) -> {name: value (int when it is one)}."""
    out = {}
    for line in text.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            v = v.strip()
            out[k.strip()] = int(v) if v.lstrip("-").isdigit() else v
    return out


BRIEF_FIELDS = ("cluster_state", "cluster_role", "cluster_serving", "cluster_term", "cluster_leader_id",
                "cluster_members", "cluster_commit_index", "cluster_applied_index", "cluster_last_index")


def _brief(infos):
    """{id: CLUSTER INFO} -> a short text of the fields that matter to the waits."""
    return "; ".join("node %d: %s" % (i, "no answer" if not inf else
                                      " ".join("%s=%s" % (f[8:], inf[f]) for f in BRIEF_FIELDS if f in inf))
                     for i, inf in sorted(infos.items()))


# ---- one member ----------------------------------------------------------------

class Member(Ordod):
    """One ordod of a cluster (ordoproc's Ordod: start_on its port, kill,
    stop, restart in place, crashes, log_tail): ids 1..N, its --dir
    node<id>/ and log node<id>.log under base_dir; with cluster_spec None a
    single server without cluster mode, to compare with."""

    def __init__(self, node_id, port, base_dir, offset, extra=(), http_port=0, tls=None):
        # "{node}" in an extra argument becomes the member's id: per-member
        # files (a member's own TLS certificate).
        extra = [str(a).replace("{node}", str(node_id)) for a in extra]
        super().__init__(ORDOD, os.path.join(base_dir, "node%d" % node_id),
                         os.path.join(base_dir, "node%d.log" % node_id), extra, http_port=http_port,
                         name="node %d" % node_id, stop_deadline_s=STOP_DEADLINE_S)
        self.id, self.port, self.offset = node_id, port, offset
        self.cluster_spec = None    # the --cluster list it starts with (None: a single server)
        self.tls = tls              # an ssl.SSLContext: port is its tls-port, the plain one is off

    def listen_args(self):
        if self.tls is None:
            return ["--port", str(self.port)]
        return ["--port", "0", "--tls-port", str(self.port)]

    def connect(self, timeout):
        return Conn(self.port, timeout=timeout, tls=self.tls)

    @property
    def addr(self):
        return "%s:%d" % (HOST, self.port)

    def options(self):
        if self.cluster_spec is None:
            return ["--bind", HOST]
        return ["--bind", HOST, "--node-id", str(self.id), "--cluster", self.cluster_spec,
                "--cluster-port-offset", str(self.offset),
                "--cluster-election-timeout-ms", str(ELECTION_TIMEOUT_MS),
                "--debug-cluster-faults", "yes"]

    def conn(self, timeout=ADMIN_TIMEOUT_S):
        return self.connect(timeout)

    def call(self, *args, timeout=ADMIN_TIMEOUT_S):
        """One command on a new connection; the reply (RespError returned)."""
        with self.conn(timeout) as c:
            return c.call(*args)

    def info(self):
        """CLUSTER INFO as a dict, or None if the member does not answer."""
        if not self.running():
            return None
        try:
            r = self.call("CLUSTER", "INFO")
        except (OSError, Closed):
            return None
        return parse_info(r) if isinstance(r, bytes) else None

    def applied_digest(self):
        """(CLUSTER INFO, DEBUG DIGEST) read in one loop turn (pipelined,
        with a second CLUSTER INFO that must show the same applied index),
        or None if the member does not answer or moved meanwhile."""
        if not self.running():
            return None
        try:
            with self.conn() as c:
                c.send_raw(encode("CLUSTER", "INFO") + encode("DEBUG", "DIGEST") + encode("CLUSTER", "INFO"))
                before, digest, after = c.read(), c.read(), c.read()
        except (OSError, Closed):
            return None
        if not (isinstance(before, bytes) and isinstance(digest, bytes) and isinstance(after, bytes)):
            return None
        before, after = parse_info(before), parse_info(after)
        if before.get("cluster_applied_index") != after.get("cluster_applied_index"):
            return None
        return before, digest

    def digest(self):
        r = self.call("DEBUG", "DIGEST")
        assert isinstance(r, bytes), "node %d: DEBUG DIGEST -> %r" % (self.id, r)
        return r


# ---- a cluster -----------------------------------------------------------------

class Cluster:
    """n members started together: ids 1..n, one --cluster list; tls
    (default: TLS_CLUSTER) puts members and clients on TLS."""

    def __init__(self, base_dir, n, extra=(), rng=None, http=False, tls=None):
        self.base_dir, self.n, self.extra = base_dir, n, list(extra)
        self.http = http     # give each member an HTTP port of its own (m.http_port)
        self.rng = rng or random.Random()
        self.offset = PORT_OFFSET
        self.members = {}    # id -> Member, including members added later
        self.everyone = []   # every Member ever created (stop() ends them all)
        self.ca = None       # TLS_CLUSTER: the test CA's certificate, which every client trusts
        self.tls = None      # TLS_CLUSTER: the ssl.SSLContext of the harness's own clients
        if TLS_CLUSTER if tls is None else tls:
            self.extra += self._tls_flags()

    def _tls_flags(self):
        """Flags for TLS everywhere, with the certificates made now
        ("{node}": each member's own, Member): mutual TLS between members,
        RESP on the tls-port only (Member.listen_args) and HTTPS, all with
        the member's certificate; clients verify it against the CA."""
        certs = os.path.join(self.base_dir, "certs")
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-certs.sh"), certs]
                       + ["node-%d" % i for i in range(1, TLS_MEMBERS_MAX + 1)], check=True)
        self.ca = os.path.join(certs, "ca.crt")
        self.tls = ssl.create_default_context(cafile=self.ca)
        return ["--tls-cluster", "yes", "--tls-http", "yes",
                "--tls-cert-file", os.path.join(certs, "node-{node}.crt"),
                "--tls-key-file", os.path.join(certs, "node-{node}.key"), "--tls-ca-cert-file", self.ca]

    # -- how clients reach the members (plaintext, or TLS under TLS_CLUSTER)

    def connect(self, port, timeout=ADMIN_TIMEOUT_S):
        """A resp.Conn to the member on port (one named by a redirect)."""
        return Conn(port, timeout=timeout, tls=self.tls)

    def redis_kwargs(self, member):
        """redis.Redis(**these) reaches member."""
        kw = {"host": HOST, "port": member.port}
        if self.ca is not None:
            kw.update(ssl=True, ssl_ca_certs=self.ca)
        return kw

    def tool(self, *args):
        """The argv of the ordo tool with args (the C client: --tls --cacert)."""
        tls = [] if self.ca is None else ["--tls", "--cacert", self.ca]
        return [os.path.join(BUILD, "ordo")] + tls + [str(a) for a in args]

    def example(self, name, *args):
        """The argv of examples/<name>.c with args (the C client: -C CA)."""
        tls = [] if self.ca is None else ["-C", self.ca]
        return [os.path.join(BUILD, "example_" + name)] + [str(a) for a in args] + tls

    def http_conn(self, member, timeout=10):
        """An HTTP(S) connection to member's http_port."""
        if self.tls is None:
            return http.client.HTTPConnection(HOST, member.http_port, timeout=timeout)
        return http.client.HTTPSConnection(HOST, member.http_port, timeout=timeout, context=self.tls)

    def url(self, member, path="/"):
        return "%s://%s:%d%s" % ("http" if self.tls is None else "https", HOST, member.http_port, path)

    def browser_args(self):
        """Chromium's flags for url(): it has no option to trust one more
        CA, so under TLS_CLUSTER it is told not to check the certificate
        (the dashboard's rendering is what those tests check)."""
        return [] if self.tls is None else ["--ignore-certificate-errors"]

    # -- start / stop

    def spec(self, members):
        return ",".join("%d=%s" % (m.id, m.addr) for m in members)

    def start(self):
        """Start every member, then wait until ready. A start that lost a
        port race starts the whole cluster again on new ports and new
        directories (nothing was bootstrapped with the old list)."""
        for attempt in range(START_ATTEMPTS):
            base = os.path.join(self.base_dir, "try%d" % attempt)
            ports = pick_ports(self.n, self.offset, rng=self.rng)
            members = [Member(i + 1, p, base, self.offset, self.extra, tls=self.tls) for i, p in enumerate(ports)]
            if self.http:
                for m, hp in zip(members, pick_ports(self.n, self.offset, avoid=ports, rng=self.rng)):
                    m.http_port = hp
            spec = self.spec(members)
            self.members = {}
            ok = True
            for m in members:
                m.cluster_spec = spec
                self.members[m.id] = m
                self.everyone.append(m)
            for m in members:
                if not m.start_on(m.port):
                    ok = False
                    break
            if ok:
                self.wait_ready()
                return self
            for m in members:
                m.stop()
        raise AssertionError("could not start %d members on free ports in %d attempts" % (self.n, START_ATTEMPTS))

    def stop(self):
        """End every process this cluster started (SIGTERM, bounded, then
        SIGKILL). Returns problems: members that crashed on their own, or
        did not exit 0 on SIGTERM."""
        problems = []
        for m in self.everyone:
            m.check_crash()
            for rc, log in m.crashes:
                problems.append("node %d (port %d) exited by itself with %s; log tail:\n%s" % (m.id, m.port, rc, log))
        running = [m for m in self.everyone if m.sigterm()]   # all at once: one member's exit may wait on none other
        deadline = time.monotonic() + STOP_DEADLINE_S
        for m in running:
            rc = m.reap(deadline)
            if rc != 0:
                problems.append("node %d (port %d) exited %r on SIGTERM; log tail:\n%s"
                                % (m.id, m.port, rc, m.log_tail()))
        return problems

    def live(self):
        return [m for m in self.members.values() if m.running()]

    def others(self, member):
        return [m for m in self.members.values() if m.id != member.id]

    def check_crashes(self):
        """Fail at once if a member died on its own."""
        for m in self.everyone:
            m.check_crash()
            if m.crashes:
                rc, log = m.crashes[0]
                raise AssertionError("node %d exited by itself with %s:\n%s" % (m.id, rc, log))

    # -- leadership

    def infos(self, members=None):
        return {m.id: m.info() for m in (members if members is not None else self.live())}

    def _agreed_leader(self, members, min_term=0, exclude=()):
        """The member that says it leads, at the highest term claimed, and
        that a majority of the cluster's voters name at that term; else None."""
        infos = {i: inf for i, inf in self.infos(members).items() if inf}
        claims = [(inf.get("cluster_term", 0), i) for i, inf in infos.items()
                  if inf.get("cluster_role") == "leader" and inf.get("cluster_leader_id") == i
                  and inf.get("cluster_serving", 1) == 1   # a leader that serves clients (when reported)
                  and i not in exclude and inf.get("cluster_term", 0) >= min_term]
        if not claims:
            return None
        term, lid = max(claims)
        votes = sum(1 for inf in infos.values()
                    if inf.get("cluster_term") == term and inf.get("cluster_leader_id") == lid)
        voters = infos[lid].get("cluster_members", len(self.members))
        if votes * 2 > voters:
            return self.members[lid]
        return None

    def leader(self, members=None, min_term=0, exclude=(), deadline_s=LEADER_DEADLINE_S):
        """The leader a majority agrees on (polled with a deadline); among
        members (default: the live ones), with a term >= min_term, not one
        of the ids in exclude."""
        def find():
            self.check_crashes()
            return self._agreed_leader(members if members is not None else self.live(), min_term, exclude)
        return poll(find, lambda: "a leader agreed by a majority (min term %d, not %s); now: %s"
                    % (min_term, list(exclude), _brief(self.infos(members))), deadline_s)

    def wait_ready(self, deadline_s=READY_DEADLINE_S):
        """Every live member says cluster_state:ok and names the same
        leader, which a majority agrees on. Returns the leader."""
        last = {}

        def ready():
            self.check_crashes()
            infos = self.infos()
            last["infos"] = infos
            if not all(inf and inf.get("cluster_state") == "ok" for inf in infos.values()):
                return None
            if len({inf.get("cluster_leader_id") for inf in infos.values()}) != 1:
                return None
            return self._agreed_leader(self.live())
        return poll(ready, lambda: "cluster_state:ok on %s and one leader; last seen: %s"
                    % (sorted(m.id for m in self.live()), _brief(last.get("infos", {}))), deadline_s)

    def term(self, member):
        inf = member.info()
        return inf.get("cluster_term", 0) if inf else 0

    def kill_leader(self, followers=0):
        """SIGKILL the current leader (and, at the same moment, that many
        random followers: a majority must stay up); wait for another leader
        to be elected; returns (old leader, new leader, [followers killed]).
        The killed ones stay down."""
        old = self.leader()
        old_term = self.term(old)
        assert 2 * (len(self.live()) - 1 - followers) > len(self.members), "that would kill a majority"
        also = self.rng.sample(self.others(old), followers)
        old.kill()
        for m in also:
            m.kill()
        new = self.leader(min_term=old_term + 1, exclude=(old.id,))
        return old, new, also

    # -- faults

    def _debug_partition(self, m, ids):
        """DEBUG PARTITION ids on m until it answers +OK. It sets m's list
        (a repeat is harmless); a leader may hold the reply behind a barrier
        that the cut stops from committing and then close the connection as
        it steps down, so a closed connection is retried (bounded)."""
        def once():
            try:
                r = m.call("DEBUG", "PARTITION", *ids)
            except (OSError, Closed):
                return None
            if isinstance(r, RespError):
                raise AssertionError("node %d: DEBUG PARTITION %s -> %r" % (m.id, ids, r))
            assert r == "OK", "node %d: DEBUG PARTITION -> %r" % (m.id, r)
            return True
        poll(once, "node %d to answer DEBUG PARTITION %s" % (m.id, list(ids)), LEADER_DEADLINE_S, every_s=0.05)

    def partition(self, side, rest):
        """Cut the members in side from those in rest (both directions),
        calling DEBUG PARTITION on every one of them."""
        for m in side:
            self._debug_partition(m, [o.id for o in rest])
        for m in rest:
            self._debug_partition(m, [o.id for o in side])

    def heal(self):
        for m in self.live():
            self._debug_partition(m, [])

    # -- convergence

    def assert_digests_equal(self):
        """wait_synced(), then every live member's state digest is the same."""
        digests = self.wait_synced()
        assert len(set(digests.values())) == 1, "DEBUG DIGEST differs: %r" % digests

    def wait_synced(self, members=None, deadline_s=SYNC_DEADLINE_S):
        """Poll until every member (default: the live ones) has applied the
        same index, equal to the leader's commit index, and read each one's
        DEBUG DIGEST at that index. Returns {id: digest}.

        Every command a leader serves (even PING or CLUSTER INFO) may append
        a raft entry (a read barrier), so observing the leader moves its
        index: each member is asked CLUSTER INFO, DEBUG DIGEST, CLUSTER INFO
        pipelined (one loop turn: the digest belongs to the index both
        report), followers before the leader (a leader's reply is computed
        before the barrier it proposes), and the polls are spaced by a few
        heartbeats so the followers learn that the last barrier committed."""
        members = members if members is not None else self.live()
        last = {"leader": None}

        def synced():
            self.check_crashes()
            order = sorted(members, key=lambda m: m.id == last["leader"])
            seen = {}
            for m in order:
                seen[m.id] = m.applied_digest()
            last["infos"] = {i: (r[0] if r else None) for i, r in seen.items()}
            leaders = [i for i, r in seen.items() if r and r[0].get("cluster_role") == "leader"]
            if leaders:
                last["leader"] = leaders[0]
            if not all(seen.values()) or len(leaders) != 1:
                return None
            applied = {r[0]["cluster_applied_index"] for r in seen.values()}
            if len(applied) != 1 or applied != {seen[leaders[0]][0]["cluster_commit_index"]}:
                return None
            return {i: r[1] for i, r in seen.items()}
        return poll(synced, lambda: "the same cluster_applied_index on %s; last seen: %s"
                    % (sorted(m.id for m in members), _brief(last.get("infos", {}))), deadline_s,
                    every_s=SYNC_POLL_S)

    # -- membership

    def new_member(self, node_id):
        """A member that is not started: a free port pair, its --cluster
        list naming the current members and itself (it joins; with
        --cluster-join yes when the binary has that option)."""
        used = [p for m in self.everyone for p in (m.port, m.port + m.offset)]
        port = pick_ports(1, self.offset, avoid=used, rng=self.rng)[0]
        extra = self.extra + (["--cluster-join", "yes"] if ordod_has_option("cluster-join") else [])
        m = Member(node_id, port, os.path.dirname(next(iter(self.members.values())).dir), self.offset, extra,
                   tls=self.tls)
        m.cluster_spec = self.spec(list(self.members.values()) + [m])
        self.everyone.append(m)
        return m


# ---- a client ------------------------------------------------------------------

class ClusterClient:
    """One connection at a time to some member of members; follows -NOTLEADER host:port, tries another member on
    -NOTLEADER ? or a refused connect, and on another member after a read
    that failed (a timeout or a close). call() reports the fate of a command as (status, reply):

      ("ok", reply)    a reply that is not an error (the command took effect)
      ("err", error)   an error reply other than -NOTLEADER
      ("doubt", None)  it was sent at least once and no reply came (the
                       connection died, or the deadline ran out): it may
                       or may not have taken effect
      ("fail", None)   never sent to a member that could take it (only
                       -NOTLEADER or refused connections until the deadline)

    With retry=True a command whose connection died is sent again (for
    idempotent commands or unique values); its status is then that of the
    last attempt, and .doubted says an earlier one may have applied too.
    """

    def __init__(self, members, timeout=CLIENT_TIMEOUT_S, rng=None):
        self.ports = [m.port for m in members]
        self.tls = members[0].tls   # the members' TLS, which a redirect's port speaks too
        self.timeout = timeout
        self.rng = rng or random.Random()
        self.conn = None
        self.port = self.rng.choice(self.ports)
        self.doubted = False
        self.last_port = None   # the member that gave the last reply

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _next_port(self):
        self.close()
        self.port = self.rng.choice([p for p in self.ports if p != self.port] or self.ports)

    def call(self, *args, deadline_s=20.0, retry=True):
        deadline = time.monotonic() + deadline_s
        sent = False
        self.doubted = False
        redirects = 0
        while time.monotonic() < deadline:
            if self.conn is None:
                try:
                    self.conn = Conn(self.port, timeout=self.timeout, tls=self.tls)
                except OSError:
                    self._next_port()
                    time.sleep(NOLEADER_PAUSE_S)  # the member is down: try another after a pause
                    continue
            try:
                self.conn.send(*args)
            except OSError:
                self.close()
                sent = True    # part of it may have been written and read: in doubt
                self.doubted = True
                if not retry:
                    return "doubt", None
                continue
            sent = True
            try:
                r = self.conn.read()
            except (OSError, Closed):
                # No answer: the member died, or is stopped or cut off (the
                # socket timed out). Another member, not this one again: a
                # stopped member would take every retry's timeout until the
                # deadline (a sweep of 9 keys once took 135 s this way).
                self._next_port()
                self.doubted = True
                if not retry:
                    return "doubt", None
                continue
            if isinstance(r, RespError) and r.code == "NOTLEADER":
                where = r.msg.split(" ", 1)[1].strip() if " " in r.msg else "?"
                self.close()
                redirects += 1
                if where != "?" and ":" in where:
                    self.port = int(where.rsplit(":", 1)[1])
                    if redirects > 2:
                        time.sleep(NOLEADER_PAUSE_S)  # members disagree on the leader: it is changing
                else:
                    self._next_port()
                    time.sleep(NOLEADER_PAUSE_S)  # no leader known yet: an election is under way
                if sent and not self.doubted:
                    sent = False   # -NOTLEADER: this attempt did not take effect
                continue
            self.last_port = self.port
            if isinstance(r, RespError):
                return "err", r
            return "ok", r
        self.close()
        return ("doubt" if sent or self.doubted else "fail"), None


# ---- sampling CLUSTER INFO -----------------------------------------------------

class Sampler(threading.Thread):
    """Polls CLUSTER INFO on every member of the cluster (the live ones, as
    they come and go) until stopped; .samples is a list of dicts
    {t, node, term, role, leader} for the two-leaders checker."""

    def __init__(self, cluster, every_s=0.02):
        super().__init__(daemon=True)
        self.cluster, self.every_s = cluster, every_s
        self.samples = []
        self.halt = threading.Event()

    def _sample(self, conns, m):
        """One CLUSTER INFO of m on its kept connection (reconnecting)."""
        if not m.running():
            return None
        try:
            if m.id not in conns:
                conns[m.id] = m.conn()
            r = conns[m.id].call("CLUSTER", "INFO")
        except (OSError, Closed):
            c = conns.pop(m.id, None)
            if c is not None:
                c.close()
            return None
        return parse_info(r) if isinstance(r, bytes) else None

    def run(self):
        conns = {}
        try:
            while not self.halt.is_set():
                for m in list(self.cluster.members.values()):
                    inf = self._sample(conns, m)
                    if inf and "cluster_term" in inf:
                        self.samples.append({"t": time.monotonic(), "node": m.id, "term": inf["cluster_term"],
                                             "role": inf.get("cluster_role"),
                                             "leader": inf.get("cluster_leader_id")})
                self.halt.wait(self.every_s)  # sampling interval
        finally:
            for c in conns.values():
                c.close()

    def stop(self):
        self.halt.set()
        self.join(timeout=STOP_DEADLINE_S)
        return self.samples
