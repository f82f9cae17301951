"""Held locks (examples/fenced_counter.c on ordo_lock_holder_new): three
processes wait for one lock in turn, each holding it for several TTLs
only through automatic extension, and fence every write with the token.
The counter ends at exactly 3 x ROUNDS, no write is refused, and the
tokens strictly increase across holders."""
import subprocess

from clientlib import prog

ROUNDS = 30  # x 20 ms of work: 2 x the 300 ms TTL per holding


def test_three_holders_in_turn(server):
    procs = [subprocess.Popen([prog("example_fenced_counter"), "-p", str(server.port), "-n", str(ROUNDS),
                               "-t", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (out, err)
        outs.append(out.decode())
    tokens = sorted(int(o.split()[1]) for o in outs)
    assert len(set(tokens)) == 3
    with server.raw() as c:
        assert c.call("GET", "counter") == b"%d" % (3 * ROUNDS)
