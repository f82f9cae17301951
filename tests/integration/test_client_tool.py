"""The `ordo` tool (PROTOCOL.md Part 2) against a real ordod: push, call,
consume (handlers that succeed, fail, crash, stall), watch, status, exit
codes; and the cart example's limit under concurrent adders."""
import os
import subprocess

from clientlib import DEADLINE_S, Proc, ordo, prog
from ordoproc import poll


def test_push_call_status_and_errors(server):
    p = ordo(server, "push", "q", "k", "hello")
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) > 0
    p = ordo(server, "status")
    assert p.returncode == 0 and b"revision:" in p.stdout
    # a call nobody answers times out: non-zero, error on stderr
    p = ordo(server, "call", "q2", "k", "x", "--timeout", "50")
    assert p.returncode == 1 and b"timed out" in p.stderr
    p = ordo(server, "bogus")
    assert p.returncode == 2
    # an error reply: an empty queue name
    p = ordo(server, "push", "", "k", "v")
    assert p.returncode == 1 and p.stderr


def test_consume_answers_calls(server):
    script = 'read -r x; echo "$x for $ORDO_KEY attempt $ORDO_ATTEMPT id $ORDO_ID token $ORDO_TOKEN"'
    c = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--concurrency", "4", "--", "sh", "-c", script])
    try:
        for i in range(5):
            p = ordo(server, "call", "q", "key%d" % i, "hi%d" % i, "--timeout", "20000")
            assert p.returncode == 0, p.stderr
            out = p.stdout.decode()
            assert out.startswith("hi%d for key%d attempt 1 id " % (i, i)), out
    finally:
        c.kill(2)  # SIGINT: graceful
    assert c.p.returncode == 0, c.stderr()
    assert "5 acked" in c.stderr()


def test_consume_failing_handler_is_retried(server, tmp_path):
    # Fails on the first attempt, succeeds on the second: the nack's delay
    # passes and the message comes back with attempt 2.
    script = '[ "$ORDO_ATTEMPT" -ge 2 ] && echo "ok $ORDO_ATTEMPT" || exit 1'
    c = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--nack-delay", "10", "--", "sh", "-c", script])
    try:
        p = ordo(server, "call", "q", "k", "x", "--timeout", "20000")
        assert p.returncode == 0, p.stderr
        assert p.stdout == b"ok 2\n"
        # crashing handler (killed by a signal) is a nack too
        crash = 'if [ "$ORDO_ATTEMPT" = 1 ]; then kill -9 $$; fi; echo "survived $ORDO_ATTEMPT"'
        c2 = Proc([prog("ordo"), "-p", server.port, "consume", "q2", "--nack-delay", "10", "--", "sh", "-c", crash])
        try:
            p = ordo(server, "call", "q2", "k", "x", "--timeout", "20000")
            assert p.stdout == b"survived 2\n", p.stderr
        finally:
            c2.kill(2)
    finally:
        c.kill(2)


def test_consume_stalling_handler_keeps_its_lease(server, tmp_path):
    # The handler runs 3 leases long; the keeper extends the lease, so the
    # message is not delivered again meanwhile (attempt stays 1).
    mark = tmp_path / "started"
    script = 'touch %s.$ORDO_ATTEMPT; sleep 1.5; echo "done $ORDO_ATTEMPT"' % mark
    c = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--concurrency", "2", "--lease", "500", "--",
              "sh", "-c", script])
    try:
        p = ordo(server, "call", "q", "k", "x", "--timeout", "20000")
        assert p.stdout == b"done 1\n", p.stderr
        assert not os.path.exists(str(mark) + ".2")
    finally:
        c.kill(2)


def test_consumer_killed_mid_message_is_redelivered(server, tmp_path):
    mark = tmp_path / "started"
    script = 'touch %s; sleep 60' % mark
    a = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--lease", "500", "--", "sh", "-c", script])
    caller = subprocess.Popen([prog("ordo"), "-p", str(server.port), "call", "q", "k", "x", "--timeout", "30000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        poll(mark.exists, "first handler started", DEADLINE_S)
        a.kill()  # SIGKILL the consumer and its handler: its lease runs out
        b = Proc([prog("ordo"), "-p", server.port, "consume", "q", "--", "sh", "-c", 'echo "again $ORDO_ATTEMPT"'])
        try:
            out, err = caller.communicate(timeout=30)
            assert caller.returncode == 0, err
            assert out == b"again 2\n"
        finally:
            b.kill(2)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def test_watch_lines_and_quoting(server):
    w = Proc([prog("ordo"), "-p", server.port, "watch", "--prefix", "w/"])
    try:
        with server.raw() as c:
            # The watch has started once a write after it shows up.
            poll(lambda: c.call("KV.PUT", "w/probe", "1") and any(" w/probe " in l for l in w.lines)
                 or _drain(w), "watch started", DEADLINE_S)
            r1 = c.call("KV.PUT", "w/a b", "two words\n")
            r2 = c.call("KV.DEL", "w/a b")
        w.wait_line(lambda l: l.startswith("%d del" % r2))
        assert '%d put "w/a b" "two words\\n"' % r1 in w.lines
        assert '%d del "w/a b"' % r2 in w.lines
    finally:
        w.kill()


def _drain(w):
    try:
        w.wait_line(lambda l: " w/probe " in l, timeout=0.2)
        return True
    except AssertionError:
        return False


def test_cart_limit_under_concurrent_adders(server):
    procs = [subprocess.Popen([prog("example_cart"), "-p", str(server.port), "add", "ann", "item%d" % i, "5"],
                              stdout=subprocess.PIPE) for i in range(20)]
    outs = [p.communicate(timeout=30)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(o.startswith("added") for o in outs) == 5
    assert sorted(o.split()[1] for o in outs if o.startswith("added")) == ["1", "2", "3", "4", "5"]
    show = subprocess.run([prog("example_cart"), "-p", str(server.port), "show", "ann"], capture_output=True)
    assert len(show.stdout.decode().split()) == 5
