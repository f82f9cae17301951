"""The watcher across server restarts: `ordo watch` (on ordo_watch_run)
sees every change once, in revision order, while ordod is killed with
SIGKILL and restarted between writes -- no gap, no duplicate. And a
watcher whose resume point was compacted away gets a reset and a
snapshot (examples/watch_resume.c)."""
from clientlib import DEADLINE_S, Proc, prog
from ordoproc import poll

PHASES = 3
PER_PHASE = 200


def test_watch_survives_server_restarts(server):
    with server.raw() as c:
        start, _ = c.call("KV.REV")
    w = Proc([prog("ordo"), "-p", server.port, "watch", "--prefix", "r/", "--from", start])
    expected = []
    try:
        for phase in range(PHASES):
            with server.raw() as c:
                for i in range(PER_PHASE):
                    key = "r/%d" % (i % 17)
                    if i % 10 == 9:
                        rev = c.call("KV.DEL", key)
                        if rev:
                            expected.append("%d del %s" % (rev, key))
                    else:
                        val = "p%d-%d" % (phase, i)
                        rev = c.call("KV.PUT", key, val)
                        expected.append("%d put %s %s" % (rev, key, val))
                    c.call("KV.PUT", "other/%d" % i, "x")  # not watched
            last = expected[-1]
            w.wait_line(lambda l: l == last)
            if phase < PHASES - 1:
                server.kill()
                server.restart()
        assert w.lines == expected
    finally:
        w.kill()


def test_watch_resets_when_history_is_compacted(ordod_factory):
    srv = ordod_factory("--history-revs", "10")
    with srv.raw() as c:
        for i in range(60):
            c.call("KV.PUT", "h/%d" % (i % 5), "v%d" % i)
        current = {("h/%d" % k): "v%d" % (55 + k) for k in range(5)}
    w = Proc([prog("example_watch_resume"), "-p", srv.port, "-x", "h/", "-f", "1"])
    try:
        w.wait_line(lambda l: l == "reset")
        after = lambda: w.poll()[w.lines.index("reset") + 1:]
        poll(lambda: len(after()) >= 5, "the snapshot", DEADLINE_S)
        snap = after()[:5]
        assert {l.split()[2]: l.split()[3] for l in snap} == current
        with srv.raw() as c:
            rev = c.call("KV.PUT", "h/new", "live")
        w.wait_line(lambda l: l == "%d put h/new live" % rev)
    finally:
        w.kill()


def test_async_watcher_resumes_across_restart(server):
    """examples/async_watch.c: the asynchronous client re-watches FROM its
    last revision in its connect callback."""
    with server.raw() as c:
        start, _ = c.call("KV.REV")
    total = 2 * PER_PHASE
    w = Proc([prog("example_async_watch"), "-p", server.port, "-x", "a/", "-f", start, "-n", total])
    expected = []
    try:
        for phase in range(2):
            with server.raw() as c:
                for i in range(PER_PHASE):
                    key, val = "a/%d" % (i % 7), "p%d-%d" % (phase, i)
                    rev = c.call("KV.PUT", key, val)
                    expected.append("%d put %s %s" % (rev, key, val))
            last = expected[-1]
            w.wait_line(lambda l: l == last)
            if phase == 0:
                server.kill()
                server.restart()
        assert w.finish() == 0, w.stderr()
        assert w.lines == expected
    finally:
        w.kill()
