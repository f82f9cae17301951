"""Mutual TLS between members (--tls-cluster, log/raft_net.h): a cluster
whose members show certificates from one CA, named node-<id>, elects and
replicates; on its raft port, plaintext, a client without a certificate,
a certificate from another CA, a valid certificate whose name does not
match the member its hello claims, and a valid member certificate of an
id outside the configuration are each refused with a log line while the
cluster goes on serving; and a member whose own certificate comes from
another CA cannot take part (the other two still form a majority).

Certificates: scripts/make-certs.sh with members node-1..node-3 and
node-9, each member's pair copied to its own directory n<id>/ ("{node}"
in the flags, clusterlib.Member). Those clusters keep their clients in
plaintext in either mode of the suite (make_cluster(tls=False)): the
members' certificates are what they vary.

Clients on TLS (make_cluster(tls=True)): a follower's -NOTLEADER names
the leader's TLS port, and the members' --cluster addresses are checked
against their doors at start.
"""
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess

import pytest
import redis

from clusterlib import PORT_OFFSET, ROOT, ClusterClient, Member, pick_ports, poll

RAFT_HELLO = 16


def make_certs(tmp_path, bad_member=None):
    """The certificates, and n<id>/member.{crt,key} for members 1..4
    (bad_member's from the other CA)."""
    d = tmp_path / "certs"
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-certs.sh"), str(d), "node-1", "node-2",
                    "node-3", "node-4", "node-9"], check=True)
    for i in (1, 2, 3, 4):
        (d / ("n%d" % i)).mkdir()
        src = "other" if i == bad_member else "node-%d" % i
        for ext in ("crt", "key"):
            shutil.copy(d / ("%s.%s" % (src, ext)), d / ("n%d" % i) / ("member." + ext))
    return d


def tls_flags(certs):
    return ["--tls-cluster", "yes", "--tls-cert-file", str(certs / "n{node}" / "member.crt"),
            "--tls-key-file", str(certs / "n{node}" / "member.key"), "--tls-ca-cert-file", str(certs / "ca.crt")]


def hello(node_id, address):
    body = b"ORDORAFT" + struct.pack("<IQI", 1, node_id, len(address)) + address.encode()
    return struct.pack("<IB", len(body), RAFT_HELLO) + body


def raft_port(m):
    return m.port + m.offset


def attempt(m, certs, cert=None, node_id=2, ca="ca", plain=False):
    """Connect to m's raft port as node_id (TLS with cert, or plaintext),
    send a hello, and read until the member closes the connection."""
    raw = socket.create_connection(("127.0.0.1", raft_port(m)), timeout=10)
    try:
        if plain:
            s = raw
        else:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.load_verify_locations(str(certs / (ca + ".crt")))
            if cert is not None:
                ctx.load_cert_chain(str(certs / (cert + ".crt")), str(certs / (cert + ".key")))
            s = ctx.wrap_socket(raw)
        s.sendall(hello(node_id, "127.0.0.1:1"))
        while s.recv(4096):
            pass
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass
    finally:
        raw.close()


def serving(cl, key, value):
    leader = cl.leader()
    assert leader.call("SET", key, value) == "OK"
    cl.wait_synced()


def test_members_over_mutual_tls_refuse_impostors(make_cluster, tmp_path):
    certs = make_certs(tmp_path)
    cl = make_cluster(3, extra=tls_flags(certs), tls=False)
    cl.wait_ready()
    serving(cl, "k0", "v0")
    m = cl.members[1]
    # A connection that says nothing is closed at the hello's deadline.
    silent = socket.create_connection(("127.0.0.1", raft_port(m)), timeout=20)
    cases = [
        (dict(plain=True), "wrong version number"),
        (dict(), "peer did not return a certificate"),
        (dict(cert="other"), "certificate verify failed"),
        (dict(cert="client"), "its hello claims member 2 but its certificate names 'client'"),
        (dict(cert="node-9", node_id=9), "member 9 is not in the cluster's configuration"),
    ]
    for i, (kw, line) in enumerate(cases):
        attempt(m, certs, **kw)
        poll(lambda: ("TLS connection from 127.0.0.1 refused: " in m.log_text() and line in m.log_text()),
             "node 1 to log %r" % line)
        serving(cl, "k%d" % (i + 1), "v%d" % i)
    assert silent.recv(100) == b""  # closed by node 1 (the socket's timeout would raise)
    silent.close()
    poll(lambda: "refused: no handshake within the deadline" in m.log_text(), "node 1 to log the silent peer")
    assert not cl.check_crashes()


def test_member_with_a_foreign_certificate_is_shut_out(make_cluster, tmp_path):
    """Node 3 restarts with a certificate from another CA: nodes 1 and 2
    refuse it (and it them), they go on as a majority, and it leads
    nobody."""
    certs = make_certs(tmp_path)
    cl = make_cluster(3, extra=tls_flags(certs), tls=False)
    cl.wait_ready()
    n3 = cl.members[3]
    assert n3.stop() == 0
    for ext in ("crt", "key"):
        shutil.copy(certs / ("other." + ext), certs / "n3" / ("member." + ext))
    n3.restart()
    pair = [cl.members[1], cl.members[2]]
    leader = cl.leader(members=pair)
    assert leader.call("SET", "k", "v") == "OK"
    poll(lambda: any("TLS connection from 127.0.0.1 refused: certificate verify failed" in m.log_text()
                     or "TLS connection to member 3" in m.log_text() for m in pair),
         "node 1 or 2 to refuse node 3")
    poll(lambda: "ordod: cluster: TLS connection" in n3.log_tail(), "node 3 to log its refusals")
    inf = n3.info()
    assert inf is not None and inf.get("cluster_role") != "leader"
    assert leader.call("SET", "k2", "v2") == "OK"
    assert not cl.check_crashes()


def test_member_added_over_mutual_tls(make_cluster, tmp_path):
    """CLUSTER ADD of a fourth member with its own certificate: it is
    accepted once it is in the configuration, and catches up."""
    certs = make_certs(tmp_path)
    cl = make_cluster(3, extra=tls_flags(certs), tls=False)
    leader = cl.wait_ready()
    assert leader.call("SET", "before", "1") == "OK"
    m4 = cl.new_member(4)
    assert m4.start_on(m4.port)
    cc = ClusterClient(list(cl.members.values()))
    try:
        st, r = cc.call("CLUSTER", "ADD", 4, m4.addr, deadline_s=30)
        assert (st, r) == ("ok", "OK"), r
        cl.members[4] = m4
        poll(lambda: all((m.info() or {}).get("cluster_members") == 4 for m in cl.members.values()),
             "cluster_members:4 everywhere")
        st, r = cc.call("SET", "after", "2")
        assert (st, r) == ("ok", "OK")
    finally:
        cc.close()
    digests = cl.wait_synced()
    assert set(digests) == {1, 2, 3, 4} and len(set(digests.values())) == 1, digests


def test_member_certificates_reload_on_sighup(make_cluster, tmp_path):
    """SIGHUP reads a member's certificate again: a key that does not load
    is logged and the old one kept; a good one is taken, and the
    connections made after it (a partition healed) carry the cluster."""
    certs = make_certs(tmp_path)
    cl = make_cluster(3, extra=tls_flags(certs), tls=False)
    cl.wait_ready()
    m = cl.members[1]
    key = certs / "n1" / "member.key"
    kept = key.read_bytes()
    key.unlink()
    os.kill(m.pid, signal.SIGHUP)
    poll(lambda: "SIGHUP received: TLS reload failed, the old certificate serves on: tls-cluster: tls-key-file"
         in m.log_text(), "node 1 to refuse the missing key")
    key.write_bytes(kept)
    os.kill(m.pid, signal.SIGHUP)
    poll(lambda: "SIGHUP received: TLS certificate, key and CA reloaded" in m.log_text(), "node 1 to reload")
    cl.partition([m], cl.others(m))
    cl.heal()
    cl.wait_ready()
    serving(cl, "after", "1")


def test_clients_on_tls_ports_are_sent_to_the_leaders_tls_port(make_cluster, tmp_path):
    """Members whose only client door is TLS (--port 0 --tls-port P, the
    --cluster list naming P): a follower's -NOTLEADER names the leader's
    TLS port, which redis-py follows by hand and the ordo tool by itself,
    each checking the certificate. A member whose listed port is neither
    its port nor its tls-port logs that at start; these do not."""
    cl = make_cluster(3, tls=True)
    leader = cl.wait_ready()
    follower = cl.others(leader)[0]
    r = redis.Redis(socket_timeout=5, **cl.redis_kwargs(follower))
    with pytest.raises(redis.ResponseError) as e:
        r.set("k", "v")
    r.close()
    assert str(e.value) == "NOTLEADER %s" % leader.addr
    r = redis.Redis(socket_timeout=5, **cl.redis_kwargs(leader))
    assert r.set("k", "v") and r.get("k") == b"v"
    r.close()
    p = subprocess.run(cl.tool("-h", follower.addr, "push", "q", "k", "v"), capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert leader.call("Q.LEN", "q") == [1, 0, 0]
    for m in cl.members.values():
        assert "neither its port" not in m.log_text()

    port, listed = pick_ports(2)
    lone = Member(1, port, str(tmp_path / "lone"), PORT_OFFSET)
    lone.cluster_spec = "1=127.0.0.1:%d" % listed
    assert lone.start_on(port)
    try:
        assert ("ordod: cluster: member 1's address 127.0.0.1:%d in --cluster is neither its port (%d) nor its "
                "tls-port (0)" % (listed, port)) in lone.log_text()
    finally:
        assert lone.stop() == 0
