"""Leader careers (examples/leader.c on ordo_career_run) racing for one
election. A and B race; the winner is killed with SIGKILL mid-term and the
other takes over once the term expires. C and D then queue behind it and
it is killed too; whichever of C and D leads first runs its rounds and
hands over, and the other's inauguration carries that hand-over value.
Never two executing in one term, never an old term executing after a
newer one (each execute checks a compare-and-set witness key)."""
import collections

from clientlib import DEADLINE_S, Proc, prog
from ordoproc import poll

TTL_MS = 1000


def leader(srv, ident, rounds):
    return Proc([prog("example_leader"), "-p", srv.port, "-e", "el", "-i", ident, "-n", rounds, "-t", TTL_MS])


def inaugurated(p):
    return [l for l in p.poll() if l.startswith("inaugurate ")]


def test_careers_race_one_killed_hand_over_reaches_next(server):
    a = leader(server, "A", 1000000)
    b = leader(server, "B", 1000000)
    procs = [a, b]
    try:
        poll(lambda: inaugurated(a) or inaugurated(b), "a leader", DEADLINE_S)
        first, second = (a, b) if inaugurated(a) else (b, a)
        first.wait_line(lambda l: l.startswith("execute ") and l.endswith(" 5"))
        first.kill()                                 # crash mid-term
        second.wait_line(lambda l: l.startswith("inaugurate "))
        second.wait_line(lambda l: l.startswith("execute ") and l.endswith(" 3"))
        c = leader(server, "C", 3)
        procs.append(c)
        d = leader(server, "D", 4)
        procs.append(d)
        second.kill()                                # crash mid-term, C and D waiting
        for p in (c, d):
            p.wait_line(lambda l: l.startswith("handover "))
            assert p.finish() == 0, p.stderr()
        # whichever of C and D led second got the first's hand-over value
        ho = {}
        for p in (c, d):
            ident = p.argv[p.argv.index("-i") + 1]
            ho[ident] = [l.split()[3] for l in p.lines if l.startswith("inaugurate ")][0]
            ho[ident + "_term"] = int([l.split()[2] for l in p.lines if l.startswith("inaugurate ")][0])
        later, earlier = ("C", "D") if ho["C_term"] > ho["D_term"] else ("D", "C")
        rounds = {"C": 3, "D": 4}[earlier]
        assert ho[later] == "%s:%d" % (earlier, rounds)
        # The one after the crash got what the dead leader left; the last
        # one a clean hand-over, and inaugurate() tells the two apart.
        how = {p.argv[p.argv.index("-i") + 1]: [l.split()[4] for l in p.lines if l.startswith("inaugurate ")][0]
               for p in (c, d)}
        assert how[later] == "handed" and how[earlier] == "left", how
    finally:
        for p in procs:
            p.kill()
    lines = [l for p in procs for l in p.lines]
    assert not [l for l in lines if l.startswith("VIOLATION")]
    by_term = collections.defaultdict(set)
    for l in lines:
        if l.startswith("execute "):
            _, ident, term, _n = l.split()
            by_term[int(term)].add(ident)
    assert by_term and all(len(ids) == 1 for ids in by_term.values()), by_term
    terms = sorted(by_term)
    assert len(terms) == 4  # first, second, C, D: four terms, one leader each
