"""The `ordo` tool where it used to hang or lose work (issue 20): bad -p
and -h are usage errors at once; a down server fails within --timeout
naming where it tried; `watch` stops at once, saying why, on what retrying
cannot cure; `consume` refuses a PROGRAM it cannot execute, keeps the
caller's environment, kills a PROGRAM past --timeout, reads past its
result limit, does not wait for a background child holding its pipe,
releases what it holds on SIGTERM, and runs script transactions with
--exactly-once; a consumer runner's commit survives a server restart."""
import os
import signal
import subprocess
import time

from clientlib import DEADLINE_S, Proc, ordo, prog
from ordoproc import free_port, poll

# A usage error or a refused start is immediate; this bounds "immediate"
# on a loaded test machine.
QUICK_S = 2.0


def run_tool(*args, timeout=30, env=None):
    t0 = time.monotonic()
    p = subprocess.run([prog("ordo")] + [str(a) for a in args], capture_output=True, timeout=timeout, env=env)
    return p, time.monotonic() - t0


def test_bad_port_and_host_are_usage_errors():
    for port in ("99999999", "-1", "abc", "0", "7379x"):
        p, took = run_tool("-p", port, "status")
        assert p.returncode == 2, (port, p.stderr)
        assert took < QUICK_S
        assert b"-p" in p.stderr
    p, took = run_tool("-h", "h" * 5000, "status")
    assert p.returncode == 2 and took < QUICK_S, p.stderr
    p, took = run_tool("-h", "a:1,,b:2", "status")
    assert p.returncode == 2 and took < QUICK_S, p.stderr


def test_down_server_fails_within_timeout_naming_addresses():
    dead = free_port()
    p, took = run_tool("--timeout", "500", "-h", "127.0.0.1:%d" % dead, "status")
    assert p.returncode == 1
    assert took < 0.5 + QUICK_S
    assert ("127.0.0.1:%d" % dead).encode() in p.stderr
    # The default timeout is a few seconds, not the 30 s it was.
    p, took = run_tool("-p", dead, "push", "q", "k", "v")
    assert p.returncode == 1 and took < 5 + QUICK_S, p.stderr


def test_addrs_list_and_env(server):
    dead = free_port()
    p, _ = run_tool("-h", "127.0.0.1:%d,127.0.0.1:%d" % (dead, server.port), "push", "q", "k", "v")
    assert p.returncode == 0, p.stderr
    env = dict(os.environ, ORDO_ADDRS="127.0.0.1:%d,127.0.0.1:%d" % (dead, server.port))
    p, _ = run_tool("push", "q", "k", "v2", env=env)
    assert p.returncode == 0, p.stderr


def test_watch_stops_at_once_on_a_future_revision(server):
    p, took = run_tool("-p", server.port, "watch", "k", "--from", "999999999999", timeout=DEADLINE_S)
    assert p.returncode == 1
    assert took < QUICK_S + 1
    assert b"future" in p.stderr


def test_watch_stops_at_once_on_a_wrong_password(ordod_factory):
    srv = ordod_factory("--requirepass", "right")
    p, took = run_tool("-p", srv.port, "-a", "wrong", "watch", "k", timeout=DEADLINE_S)
    assert p.returncode == 1 and took < QUICK_S + 1, p.stderr
    assert p.stderr.count(b"\n") == 1


def test_consume_refuses_a_program_it_cannot_execute(server, tmp_path):
    missing = tmp_path / "cart_workr.sh"
    p, took = run_tool("-p", server.port, "consume", "q", "--", str(missing))
    assert p.returncode == 2 and took < QUICK_S
    assert p.stderr.count(b"\n") == 1 and str(missing).encode() in p.stderr
    notexec = tmp_path / "plain.txt"
    notexec.write_text("echo hi\n")
    p, _ = run_tool("-p", server.port, "consume", "q", "--", str(notexec))
    assert p.returncode == 2 and str(notexec).encode() in p.stderr
    p, _ = run_tool("-p", server.port, "consume", "q", "--", "no-such-program-here")
    assert p.returncode == 2 and b"no-such-program-here" in p.stderr
    # Nothing was pulled: a message pushed before stays waiting.
    assert ordo(server, "push", "q", "k", "v").returncode == 0


def test_consume_keeps_the_environment_and_adds_its_own(server):
    script = 'echo "$ORDO_HOST|$MY_VAR|$ORDO_QUEUE|$ORDO_KEY|$ORDO_ATTEMPT|$ORDO_ADDRS"'
    env = dict(os.environ, ORDO_HOST="kept", MY_VAR="mine")
    c = Proc([prog("ordo"), "-p", server.port, "consume", "envq", "--", "sh", "-c", script], env=env)
    try:
        p = ordo(server, "call", "envq", "k1", "x", "--timeout", "20000")
        assert p.returncode == 0, p.stderr
        assert p.stdout.decode().strip() == "kept|mine|envq|k1|1|127.0.0.1:%d" % server.port
    finally:
        c.kill(signal.SIGTERM)


def test_consume_timeout_kills_and_nacks(server, tmp_path):
    # The first attempt hangs (and so does its child): killed at the
    # timeout, nacked; the second answers.
    script = 'if [ "$ORDO_ATTEMPT" = 1 ]; then sleep 60 & sleep 60; fi; echo "ok $ORDO_ATTEMPT"'
    c = Proc([prog("ordo"), "-p", server.port, "consume", "tq", "--timeout", "300", "--nack-delay", "10", "--",
              "sh", "-c", script])
    try:
        t0 = time.monotonic()
        p = ordo(server, "call", "tq", "k", "x", "--timeout", "20000")
        assert p.stdout == b"ok 2\n", p.stderr
        assert time.monotonic() - t0 < 10
    finally:
        c.kill(signal.SIGTERM)
    assert "past --timeout" in c.stderr()


def test_consume_does_not_wait_for_a_background_child(server):
    c = Proc([prog("ordo"), "-p", server.port, "consume", "bq", "--", "sh", "-c", "sleep 30 & echo done"])
    try:
        t0 = time.monotonic()
        p = ordo(server, "call", "bq", "k", "x", "--timeout", "20000")
        assert p.stdout == b"done\n", p.stderr
        assert time.monotonic() - t0 < 10
    finally:
        c.kill()


def test_consume_reads_past_its_result_limit(server):
    # 70 MB of output: read and discarded (the program never blocks),
    # the message nacked; the second attempt answers small.
    script = 'if [ "$ORDO_ATTEMPT" = 1 ]; then head -c 70000000 /dev/zero; else echo small; fi'
    c = Proc([prog("ordo"), "-p", server.port, "consume", "bigq", "--nack-delay", "10", "--", "sh", "-c", script])
    try:
        p = ordo(server, "call", "bigq", "k", "x", "--timeout", "30000", timeout=60)
        assert p.stdout == b"small\n", p.stderr
    finally:
        c.kill(signal.SIGTERM)
    assert "wrote more than" in c.stderr()


def test_consume_sigterm_releases_a_hung_program(server, tmp_path):
    mark = tmp_path / "started"
    script = 'touch %s; sleep 60' % mark
    a = Proc([prog("ordo"), "-p", server.port, "consume", "sq", "--lease", "60000", "--", "sh", "-c", script])
    caller = subprocess.Popen([prog("ordo"), "-p", str(server.port), "call", "sq", "k", "x", "--timeout", "30000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        poll(mark.exists, "the program started", DEADLINE_S)
        t0 = time.monotonic()
        a.p.send_signal(signal.SIGTERM)
        assert a.finish(timeout=10) == 0
        assert time.monotonic() - t0 < 6  # grace 2 s + a pull slice + the nack
        # Released (nacked), not held for the 60 s lease: another takes it.
        b = Proc([prog("ordo"), "-p", server.port, "consume", "sq", "--", "sh", "-c", 'echo "again $ORDO_ATTEMPT"'])
        try:
            out, err = caller.communicate(timeout=20)
            assert out == b"again 2\n", err
        finally:
            b.kill(signal.SIGTERM)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def test_consume_exactly_once_from_a_script(server):
    # Each line of the script's stdout is a command of the transaction that
    # acks the message; RESULT sets the ack's result.
    script = ('echo "INCRBY count:$ORDO_KEY 1"; echo "KV.PUT \\"last $ORDO_KEY\\" \\"$ORDO_ID\\""; '
              'echo "RESULT counted"')
    c = Proc([prog("ordo"), "-p", server.port, "consume", "eq", "--exactly-once", "--", "sh", "-c", script])
    try:
        for i in range(3):
            p = ordo(server, "call", "eq", "a", "x%d" % i, "--timeout", "20000")
            assert p.stdout == b"counted\n", p.stderr
        with server.raw() as r:
            assert r.call("GET", "count:a") in ("3", b"3", 3)
    finally:
        c.kill(signal.SIGTERM)


OUTAGE_S = 4.0
RETURN_TO_ACK_S = 2.0


def test_runner_commit_survives_a_server_restart(server, tmp_path):
    # The program finishes while the server is down; the runner's ack is
    # retried and lands within 2 s of the server's return, not after the
    # lease (30 s). The outage lasts OUTAGE_S, long enough for the runner's
    # reconnect backoff to reach its cap (1 s), so the bound covers the
    # slowest retry, not a lucky first one.
    gate = tmp_path / "gate"
    mark = tmp_path / "started"
    done = tmp_path / "finished"
    script = 'touch %s; while [ ! -e %s ]; do sleep 0.05; done; echo "done $ORDO_ATTEMPT"; touch %s' % (
        mark, gate, done)
    c = Proc([prog("ordo"), "-p", server.port, "consume", "rq", "--", "sh", "-c", script])
    try:
        assert ordo(server, "push", "rq", "k", "x").returncode == 0
        poll(mark.exists, "the program started", DEADLINE_S)
        server.kill()
        gate.write_text("go")
        poll(done.exists, "the program finished (its ack meets a dead server)", DEADLINE_S)
        time.sleep(OUTAGE_S)  # the scenario's outage, not a wait for an event
        server.restart()
        t0 = time.monotonic()
        with server.raw() as r:
            poll(lambda: sum(int(x) for x in r.call("Q.LEN", "rq")) == 0, "the message acked", 10)
        assert time.monotonic() - t0 < RETURN_TO_ACK_S
    finally:
        c.kill(signal.SIGTERM)
