"""`ordo top` (issue 24): frames of rates (a counter's change over the
interval, per second) and queue depths with their change; one frame with
--once, N with -n; on a terminal each frame clears the screen, elsewhere
frames follow each other with no escape codes."""
import os
import pty
import re
import subprocess
import threading

from clientlib import ordo, prog

ROW = re.compile(r"^(\S+(?: \S+)?)\s+(-|[\d.]+(?: \w?B/s)?)\s+(\d+|[\d.]+ \w?B)$")


def frames(out):
    """The frames of non-terminal output, each a dict of its rate rows
    {label: (rate, total)} and queue rows {queue: [columns]}."""
    result = []
    for text in out.split("ordo top -- ")[1:]:
        rates, queues, keys, section = {}, {}, {}, None
        for line in text.splitlines()[1:]:
            if line.startswith("queue "):
                section = "queues"
            elif line.startswith("key "):
                section = "keys"
            elif section is None and ROW.match(line):
                m = ROW.match(line)
                rates[m.group(1)] = (m.group(2), m.group(3))
            elif section and line.strip() and not line.startswith("("):
                cols = line.split()
                (queues if section == "queues" else keys)[cols[0]] = cols[1:]
        result.append({"text": text, "rates": rates, "queues": queues, "keys": keys})
    return result


def test_top_once_is_one_frame_without_escapes(server):
    with server.raw() as r:
        for i in range(3):
            r.call("Q.PUSH", "jobs", "k%d" % i, "p")
    p = ordo(server, "top", "--once", "--interval", "100")
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "\033[" not in out
    f = frames(out)
    assert len(f) == 1, out
    assert f[0]["queues"]["jobs"][:4] == ["3", "+0", "0", "+0"], out
    for label in ("commands", "errors", "revisions", "watch events", "pushed", "acked", "dead-lettered", "net in"):
        assert label in f[0]["rates"], (label, out)
    assert f[0]["rates"]["pushed"][1] == "3", out


def test_top_rates_and_changes_follow_the_counters(server):
    """Under a steady stream of pushes, frame 2's change column is exactly
    the depth's difference between frames, and its push rate is that
    difference over the interval."""
    stop = threading.Event()

    def pusher():
        with server.raw() as r:
            i = 0
            while not stop.is_set():
                r.call("Q.PUSH", "stream", "k%d" % (i % 50), "p")
                i += 1
    t = threading.Thread(target=pusher, daemon=True)
    t.start()
    try:
        p = ordo(server, "top", "-n", "2", "--interval", "500", "--count", "5")
    finally:
        stop.set()
        t.join()
    assert p.returncode == 0, p.stderr
    f = frames(p.stdout.decode())
    assert len(f) == 2, p.stdout
    w1, w2 = int(f[0]["queues"]["stream"][0]), int(f[1]["queues"]["stream"][0])
    assert w2 > w1 > 0, p.stdout
    assert int(f[1]["queues"]["stream"][1]) == w2 - w1
    rate = float(f[1]["rates"]["pushed"][0])
    pushed = int(f[1]["rates"]["pushed"][1]) - int(f[0]["rates"]["pushed"][1])
    assert pushed == w2 - w1  # nothing consumed
    secs = float(re.search(r"\(over the last ([\d.]+) s\)", f[1]["text"]).group(1))
    # The rate is printed to 0.1, the time to 1 ms.
    assert abs(rate - pushed / secs) <= 0.1 + 0.01 * rate, (rate, pushed, secs)


def test_top_of_one_queue_shows_its_top_keys(server):
    with server.raw() as r:
        for i in range(4):
            r.call("Q.PUSH", "jobs", "hot", "p%d" % i)
        r.call("Q.PUSH", "jobs", "cold", "p")
        r.call("Q.PUSH", "other", "k", "p")
    p = ordo(server, "top", "jobs", "--once", "--interval", "100")
    assert p.returncode == 0, p.stderr
    f = frames(p.stdout.decode())[0]
    assert list(f["queues"]) == ["jobs"], p.stdout
    assert f["keys"] == {"hot": ["4"], "cold": ["1"]}, p.stdout
    p = ordo(server, "top", "nosuch", "--once", "--interval", "100")
    assert p.returncode == 0 and b"(no queue nosuch)" in p.stdout, p.stdout
    p = ordo(server, "top", "--once", "-n", "3")
    assert p.returncode == 2 and b"--once and -n 3" in p.stderr, p.stderr


def test_top_on_a_terminal_redraws_in_place(server):
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([prog("ordo"), "-p", str(server.port), "top", "-n", "2", "--interval", "100"],
                             stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the program closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert p.wait(timeout=30) == 0, p.stderr.read()
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    # The totals at once, then two frames with rates: three redraws.
    assert out.count(b"\033[H\033[2J") == 3, out
