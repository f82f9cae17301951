"""TLS on ordod's doors (net/net_tls.c, docs/operations.md "Security"):
RESP on --tls-port and HTTPS on the HTTP listener (--tls-http), with real
clients -- redis-cli --tls, redis-py ssl=True, curl --cacert, openssl
s_client -- and what must be refused: a client that does not trust the
server's CA, an expired certificate, a wrong host name, plaintext on the
TLS port, garbage, half handshakes, renegotiation, missing client
certificates. Each refusal leaves the server up, is counted (INFO) and
logged. Also: the plain port off (--port 0), certificate reload (CONFIG
SET tls-..., SIGHUP), and the output bound counted on plaintext.

Certificates come from scripts/make-certs.sh, run into the test's tmp dir.
"""
import os
import signal
import socket
import ssl
import subprocess
import time

import pytest
import redis

from ordoproc import free_port, poll

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEADLINE_S = 20.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "make-certs.sh"), str(d)], check=True)
    return d


def tls_flags(certs, cert="server", *extra):
    return ["--tls-port", free_port(), "--tls-cert-file", certs / (cert + ".crt"),
            "--tls-key-file", certs / (cert + ".key"), "--tls-ca-cert-file", certs / "ca.crt",
            "--tls-http", "yes"] + list(extra)


def tls_port(srv):
    args = [str(a) for a in srv.args]
    return int(args[args.index("--tls-port") + 1])


def tls_client(srv, certs, ca="ca", cert=None, host="localhost", **kw):
    """redis-py over TLS to srv's tls-port, verifying the server against ca."""
    extra = {}
    if cert is not None:
        extra = {"ssl_certfile": str(certs / (cert + ".crt")), "ssl_keyfile": str(certs / (cert + ".key"))}
    return redis.Redis(host=host, port=tls_port(srv), ssl=True, ssl_ca_certs=str(certs / (ca + ".crt")),
                       ssl_cert_reqs="required", ssl_check_hostname=True, socket_timeout=10, **extra, **kw)


def stat(srv, name):
    return int(srv.info("stats")[name])


def wait_log(srv, text):
    return poll(lambda: text in srv.log_text(), "the log to say %r" % text)


def redis_cli(srv, certs, *args, ca="ca"):
    return subprocess.run(["redis-cli", "-h", "localhost", "-p", str(tls_port(srv)), "--tls",
                           "--cacert", str(certs / (ca + ".crt"))] + list(args),
                          capture_output=True, text=True, timeout=DEADLINE_S)


# ---- real clients -----------------------------------------------------------


def test_redis_cli_and_redis_py(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs))
    out = redis_cli(srv, certs, "SET", "k", "v")
    assert out.returncode == 0 and out.stdout.strip() == "OK", out
    assert redis_cli(srv, certs, "GET", "k").stdout.strip() == "v"
    r = tls_client(srv, certs)
    assert r.get("k") == b"v"
    # A large value and a deep pipeline cross many TLS records both ways.
    big = os.urandom(3 << 20)
    assert r.set("big", big)
    assert r.get("big") == big
    p = r.pipeline(transaction=False)
    for i in range(2000):
        p.set("p%d" % i, i)
        p.get("p%d" % i)
    res = p.execute()
    assert res[1::2] == [str(i).encode() for i in range(2000)]
    r.close()
    # The same server still serves plaintext on its plain port.
    assert srv.client().get("k") == b"v"
    assert stat(srv, "tls_handshakes_ok") >= 3
    assert stat(srv, "tls_handshakes_failed") == 0


def test_curl_https_and_metrics(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs))
    srv.client().set("hello", "world")
    url = "https://localhost:%d" % srv.http_port
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs / "ca.crt"), url + "/v1/kv/hello"],
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.returncode == 0 and "world" in out.stdout, out
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs / "ca.crt"), url + "/metrics"],
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert 'ordo_tls_handshakes_total{result="ok"}' in out.stdout
    # Plain HTTP on the HTTPS port is refused, and logged.
    out = subprocess.run(["curl", "-sS", "http://localhost:%d/healthz" % srv.http_port],
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.returncode != 0
    wait_log(srv, "refused: http request (not TLS")
    # curl refuses a server its CA does not vouch for.
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs / "other-ca.crt"), url + "/healthz"],
                         capture_output=True, text=True, timeout=DEADLINE_S)
    assert out.returncode == 60, out  # CURLE_PEER_FAILED_VERIFICATION


def test_openssl_s_client(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs))
    out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % tls_port(srv), "-quiet",
                          "-CAfile", str(certs / "ca.crt"), "-verify_return_error",
                          "-verify_hostname", "localhost"],
                         input="PING\r\nQUIT\r\n", capture_output=True, text=True, timeout=DEADLINE_S)
    assert "+PONG" in out.stdout and "+OK" in out.stdout, out


# ---- refusals -----------------------------------------------------------------


def refused(srv, certs, **kw):
    """A redis-py TLS client built with kw is refused; returns the error."""
    before = stat(srv, "tls_handshakes_failed")
    r = tls_client(srv, certs, **kw)
    with pytest.raises(redis.ConnectionError) as e:
        r.ping()
    r.close()
    poll(lambda: stat(srv, "tls_handshakes_failed") > before, "the refusal to be counted")
    assert srv.alive()
    return str(e.value)


def test_wrong_ca_expired_wrong_host(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs))
    assert "certificate verify failed" in refused(srv, certs, ca="other-ca")
    wait_log(srv, "refused: tlsv1 alert unknown ca")
    # A name the certificate does not have (connecting to the right address).
    before = stat(srv, "tls_handshakes_failed")
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    with socket.create_connection(("127.0.0.1", tls_port(srv)), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
            ctx.wrap_socket(raw, server_hostname="db.example")
    poll(lambda: stat(srv, "tls_handshakes_failed") > before, "the refusal to be counted")
    out = redis_cli(srv, certs, "PING", ca="other-ca")
    assert out.returncode != 0 or "PONG" not in out.stdout
    expired = ordod_factory(*tls_flags(certs, "expired"))
    assert "certificate has expired" in refused(expired, certs)
    wrong = ordod_factory(*tls_flags(certs, "wronghost"))
    assert "Hostname mismatch" in refused(wrong, certs)
    # The names the certificate has pass.
    assert tls_client(srv, certs, host="127.0.0.1").ping()


def test_plaintext_garbage_and_renegotiation(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs))
    port = tls_port(srv)
    # redis-py without TLS on the TLS port.
    plain = redis.Redis(port=port, socket_timeout=5)
    with pytest.raises(redis.ConnectionError):
        plain.ping()
    wait_log(srv, "refused: wrong version number (not TLS: a plaintext client on a TLS port?)")
    # Garbage, and a record header announcing a handshake followed by noise.
    for junk in (os.urandom(5000), b"\x16\x03\x01\x02\x00" + os.urandom(512), b"\x16\x03\x03\xff\xff" * 100):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(junk)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
    # TLS 1.2 renegotiation is refused, and the server goes on.
    out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-tls1_2",
                          "-CAfile", str(certs / "ca.crt")],
                         input="R\n", capture_output=True, text=True, timeout=DEADLINE_S)
    assert "no renegotiation" in out.stdout + out.stderr, out
    assert srv.alive()
    assert tls_client(srv, certs).ping()


def test_half_handshakes_time_out(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs, "server", "--tls-handshake-timeout-ms", "300"))
    port = tls_port(srv)
    base = int(srv.info("clients")["connected_clients"])
    # Half a ClientHello, then silence, from many connections at once.
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inb, outb, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = outb.read()
    socks = []
    for i in range(40):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(hello[:len(hello) // 2] if i % 2 else b"")
        socks.append(s)
    poll(lambda: stat(srv, "tls_handshakes_timedout") >= 40, "40 handshakes to time out")
    wait_log(srv, "no handshake within 300 ms (tls-handshake-timeout-ms)")
    for s in socks:
        assert s.recv(100) == b""  # closed by the server
        s.close()
    poll(lambda: int(srv.info("clients")["connected_clients"]) <= base, "the connections to be gone")
    assert tls_client(srv, certs).ping()


def test_client_certificates(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs, "server", "--tls-auth-clients", "yes"))
    assert tls_client(srv, certs, cert="client").ping()
    refused(srv, certs)
    wait_log(srv, "peer did not return a certificate")
    refused(srv, certs, cert="other")
    opt = ordod_factory(*tls_flags(certs, "server", "--tls-auth-clients", "optional"))
    assert tls_client(opt, certs).ping()
    assert tls_client(opt, certs, cert="client").ping()
    refused(opt, certs, cert="expired")


def test_options_refused_at_start(tmp_path, certs):
    def start(*flags):
        return subprocess.run([os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod")), "--dir",
                               str(tmp_path / "d"), "--port", str(free_port()), "--http-port", "0"]
                              + [str(f) for f in flags], capture_output=True, text=True, timeout=DEADLINE_S)
    out = start("--tls-port", free_port())
    assert out.returncode != 0 and "needs tls-cert-file" in out.stderr, out
    out = start(*tls_flags(certs, "server", "--tls-protocols", "TLSv1.1"))
    assert out.returncode != 0 and "tls-protocols: unknown protocol 'TLSv1.1'" in out.stderr, out
    out = start(*tls_flags(certs, "server", "--tls-auth-clients", "maybe"))
    assert out.returncode != 0 and "tls-auth-clients: expected no, yes or optional" in out.stderr, out
    out = start("--tls-port", free_port(), "--tls-cert-file", certs / "server.crt",
                "--tls-key-file", tmp_path / "missing.key")
    assert out.returncode != 0 and "tls-key-file" in out.stderr, out


def test_protocols_and_suites(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs, "server", "--tls-protocols", "TLSv1.3",
                                   "--tls-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"))
    r = tls_client(srv, certs)
    assert r.ping()
    conn = r.connection_pool.get_connection("PING")
    assert conn._sock.version() == "TLSv1.3"
    assert conn._sock.cipher()[0] == "TLS_CHACHA20_POLY1305_SHA256"
    r.connection_pool.release(conn)
    out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % tls_port(srv), "-tls1_2",
                          "-CAfile", str(certs / "ca.crt")], input="", capture_output=True, text=True,
                         timeout=DEADLINE_S)
    assert out.returncode != 0
    wait_log(srv, "refused: unsupported protocol")


def test_plain_port_off(tmp_path, certs):
    port, tport = free_port(), free_port()
    log = open(tmp_path / "ordod.log", "wb")
    flags = tls_flags(certs)
    flags[1] = tport
    p = subprocess.Popen([os.path.join(ROOT, os.environ.get("ORDOD", "build/ordod")), "--dir", str(tmp_path / "d"),
                          "--port", "0", "--http-port", "0", "--fsync", "no"] + [str(f) for f in flags],
                         stdout=log, stderr=log)
    try:
        r = redis.Redis(host="localhost", port=tport, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                        socket_timeout=5)

        def up():
            try:
                return r.ping()
            except redis.ConnectionError:
                return False
        poll(up, "ordod to answer on its TLS port")
        assert r.info("server")["process_id"] == p.pid
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        r.close()
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=DEADLINE_S) == 0
        log.close()


# ---- reload ---------------------------------------------------------------------


def test_reload_by_config_set_and_sighup(ordod_factory, certs, tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    for ext in ("crt", "key"):
        (live / ("cert." + ext)).write_bytes((certs / ("server." + ext)).read_bytes())
    srv = ordod_factory("--tls-port", free_port(), "--tls-cert-file", live / "cert.crt",
                        "--tls-key-file", live / "cert.key", "--tls-http", "yes")
    old = tls_client(srv, certs)
    assert old.set("k", "1")
    plain = srv.client()
    # A reload that cannot load changes nothing.
    with pytest.raises(redis.ResponseError, match="TLS reload failed, the old settings serve on"):
        plain.execute_command("CONFIG", "SET", "tls-key-file", str(tmp_path / "missing.key"))
    assert plain.config_get("tls-key-file")["tls-key-file"] == str(live / "cert.key")
    with pytest.raises(redis.ResponseError, match="set at start"):
        plain.execute_command("CONFIG", "SET", "tls-port", "1")
    assert tls_client(srv, certs).ping()
    # A certificate from another CA: new sessions need that CA; the live one goes on.
    assert plain.execute_command("CONFIG", "SET", "tls-cert-file", str(certs / "other.crt"),
                                 "tls-key-file", str(certs / "other.key")) == b"OK"
    assert tls_client(srv, certs, ca="other-ca").ping()
    refused(srv, certs)
    assert old.get("k") == b"1"
    # SIGHUP reads the files again: swap the files under the configured paths.
    plain.execute_command("CONFIG", "SET", "tls-cert-file", str(live / "cert.crt"),
                          "tls-key-file", str(live / "cert.key"))
    assert tls_client(srv, certs).ping()
    for ext in ("crt", "key"):
        (live / ("cert." + ext)).write_bytes((certs / ("other." + ext)).read_bytes())
    os.kill(srv.proc.pid, signal.SIGHUP)
    wait_log(srv, "SIGHUP received: TLS certificate, key and CA reloaded")
    assert tls_client(srv, certs, ca="other-ca").ping()
    refused(srv, certs)


# ---- bounds ---------------------------------------------------------------------


def test_output_bound_counts_plaintext(ordod_factory, certs):
    """A TLS client that pipelines reads and never reads the replies is
    closed by output-hard-bytes, as a plaintext one is."""
    srv = ordod_factory(*tls_flags(certs, "server", "--output-hard-bytes", "1m"))
    srv.client().set("v", b"x" * (256 << 10))
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", tls_port(srv)), timeout=10)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    before = stat(srv, "clients_closed_output_limit")
    s.sendall(b"GET v\r\n" * 200)
    poll(lambda: stat(srv, "clients_closed_output_limit") > before, "the TLS client to pass output-hard-bytes")
    wait_log(srv, "(output-hard-bytes)")
    s.close()
    assert srv.alive()


# ---- the C client (the ordo tool) -----------------------------------------------


def tool(srv, certs, *args, timeout=30):
    """The ordo tool over TLS to srv's tls-port (its CA given first; args may add more)."""
    from clientlib import prog
    cmd = [prog("ordo"), "-h", "localhost", "-p", str(tls_port(srv)), "--tls", "--cacert", str(certs / "ca.crt")]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, timeout=timeout)


def test_c_client_over_tls(ordod_factory, certs):
    """The C client (through the ordo tool): a call answered by a consumer,
    both over TLS, with a payload of many TLS records each way; refused
    at once (ORDO_ETLS, not retried) for a wrong CA or host name."""
    from clientlib import Proc, prog
    srv = ordod_factory(*tls_flags(certs))
    port = tls_port(srv)
    consumer = Proc([prog("ordo"), "-h", "localhost", "-p", port, "--tls", "--cacert", certs / "ca.crt",
                     "consume", "q", "--", "cat"])
    try:
        payload = os.urandom(60000).hex()  # 120 kB, within one argv string
        p = tool(srv, certs, "call", "q", "k", payload, "--timeout", "20000")
        assert p.returncode == 0, p.stderr
        assert p.stdout.decode() == payload + "\n"
    finally:
        consumer.kill(signal.SIGINT)
    p = tool(srv, certs, "status")
    assert p.returncode == 0 and b"revision:" in p.stdout, p.stderr
    t0 = time.monotonic()
    p = tool(srv, certs, "--cacert", certs / "other-ca.crt", "status")
    assert p.returncode == 1 and b"TLS failed" in p.stderr and b"certificate verify failed" in p.stderr, p.stderr
    p = tool(srv, certs, "--sni", "db.example", "status")
    assert p.returncode == 1 and b"hostname mismatch" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 4.0  # not retried until --timeout's 5 s
    p = tool(srv, certs, "--cacert", certs / "missing.crt", "status")
    assert p.returncode == 1 and b"TLS options" in p.stderr, p.stderr
    p = subprocess.run([prog("ordo"), "-p", str(port), "--cacert", str(certs / "ca.crt"), "status"],
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and b"go with --tls" in p.stderr


def test_c_client_moves_on_after_a_cut_handshake(ordod_factory, certs):
    """A member that closes the connection during the TLS handshake (a
    killed leader, a restarting one) is left for the next address given,
    as a refused connect is: the client once kept the dead connection and
    aborted on its next connect."""
    import threading
    from clientlib import prog
    srv = ordod_factory(*tls_flags(certs))
    cut = socket.socket()
    cut.bind(("127.0.0.1", 0))
    cut.listen(8)

    def close_each():
        try:
            while True:
                conn, _ = cut.accept()
                conn.close()
        except OSError:
            pass   # the listener was closed: the test is over
    threading.Thread(target=close_each, daemon=True).start()
    try:
        p = subprocess.run([prog("ordo"), "-h", "127.0.0.1:%d,localhost:%d" % (cut.getsockname()[1], tls_port(srv)),
                            "--tls", "--cacert", str(certs / "ca.crt"), "status"], capture_output=True, timeout=30)
    finally:
        cut.shutdown(socket.SHUT_RDWR)   # wakes the accept
        cut.close()
    assert p.returncode == 0 and b"revision:" in p.stdout, p.stderr


def test_c_client_certificate(ordod_factory, certs):
    srv = ordod_factory(*tls_flags(certs, "server", "--tls-auth-clients", "yes"))
    p = tool(srv, certs, "--cert", certs / "client.crt", "--key", certs / "client.key", "push", "q", "k", "v")
    assert p.returncode == 0, p.stderr
    p = tool(srv, certs, "push", "q", "k", "v")
    assert p.returncode == 1 and b"TLS failed" in p.stderr, p.stderr
    wait_log(srv, "peer did not return a certificate")


def test_async_client_over_tls(ordod_factory, certs):
    """The asynchronous client (examples/async_watch.c, -T): watch events
    over TLS, a large value among them; with a CA that does not vouch for
    the server, its connect callback hears ORDO_ETLS."""
    from clientlib import Proc, prog
    srv = ordod_factory(*tls_flags(certs))
    plain = srv.client()
    start = plain.execute_command("KV.REV")[0]
    big = "b" * 200000
    w = Proc([prog("example_async_watch"), "-h", "localhost", "-p", tls_port(srv), "-T", certs / "ca.crt",
              "-x", "a/", "-f", start, "-n", 3])
    try:
        expected = []
        poll(lambda: stat(srv, "tls_handshakes_ok") >= 1, "the watcher's handshake")
        for key, val in (("a/1", "x"), ("a/2", big), ("a/3", "y")):
            rev = plain.execute_command("KV.PUT", key, val)
            expected.append("%d put %s %s" % (rev, key, val))
        assert w.finish() == 0, w.stderr()
        assert w.lines == expected
    finally:
        w.kill()
    bad = Proc([prog("example_async_watch"), "-h", "localhost", "-p", tls_port(srv), "-T",
                certs / "other-ca.crt", "-x", "a/", "-f", start, "-n", 1])
    try:
        poll(lambda: "async_watch: connect: TLS failed" in bad.stderr(), "the watcher to hear ORDO_ETLS")
    finally:
        bad.kill()


def test_dashboard_over_https_in_chromium(ordod_factory, certs, tmp_path):
    """Headless Chromium opens the dashboard on https:// trusting the test
    CA's key (its SPKI pinned: the CA is in the chain the server sends),
    and its scripts poll the server over HTTPS; without that trust the
    page does not load."""
    import base64
    import hashlib
    from test_http_dashboard import chromium
    srv = ordod_factory(*tls_flags(certs))
    srv.client().execute_command("Q.PUSH", "orders", "cart-41", "a")
    der = subprocess.run("openssl x509 -in %s -pubkey -noout | openssl pkey -pubin -outform der"
                         % (certs / "ca.crt"), shell=True, capture_output=True, check=True).stdout
    spki = base64.b64encode(hashlib.sha256(der).digest()).decode()
    url = "https://localhost:%d/" % srv.http_port
    dom = chromium(url, tmp_path / "profile", "--ignore-certificate-errors-spki-list=" + spki, "--dump-dom")
    assert 'data-ready="1"' in dom, dom[:3000]
    assert 'data-queue="orders"' in dom
    dom = chromium(url, tmp_path / "profile2", "--dump-dom")
    assert 'data-ready="1"' not in dom
    assert stat(srv, "tls_handshakes_failed") >= 1


# ---- certificates that name users (tls-auth-clients-user CN) ------------------


def test_a_certificate_names_its_user(ordod_factory, certs):
    """With tls-auth-clients-user CN, a client whose verified certificate's
    common name is a user that is on is that user without a password; a
    certificate naming no such user (or one switched off) logs in no one,
    and AUTH still works. The option needs client certificates."""
    srv = ordod_factory(*tls_flags(certs, "server", "--tls-auth-clients", "optional", "--tls-auth-clients-user", "CN",
                                   "--requirepass", "pw"))
    admin = srv.client()
    assert admin.execute_command("ACL", "SETUSER", "client", "on", ">other", "-@all", "+get", "+@connection",
                                 "~cfg:*") == b"OK"
    r = tls_client(srv, certs, cert="client")
    assert r.execute_command("ACL", "WHOAMI") == b"client"
    assert r.get("cfg:a") is None
    with pytest.raises(redis.exceptions.NoPermissionError):
        r.set("cfg:a", "1")  # the user's rules apply, as after AUTH
    r.close()
    # No certificate: not logged in.
    r = tls_client(srv, certs)
    with pytest.raises(redis.exceptions.AuthenticationError):
        r.get("cfg:a")
    r.close()
    # The user switched off: its certificate logs in no one; AUTH still works.
    assert admin.execute_command("ACL", "SETUSER", "client", "off") == b"OK"
    r = tls_client(srv, certs, cert="client")
    with pytest.raises(redis.exceptions.AuthenticationError):
        r.get("cfg:a")
    assert r.execute_command("AUTH", "pw") in (True, b"OK")
    assert r.execute_command("ACL", "WHOAMI") == b"default"
    r.close()


def test_a_certificate_user_needs_client_certificates(ordod_factory, certs, tmp_path):
    import conftest
    from ordoproc import Ordod
    srv = Ordod(conftest.ORDOD, tmp_path / "d", tmp_path / "o.log",
                [str(a) for a in tls_flags(certs, "server", "--tls-auth-clients-user", "CN")])
    with pytest.raises(AssertionError):
        srv.start()
    assert "tls-auth-clients-user CN needs client certificates" in srv.log_text()
