"""Fixtures of the cluster suite: make_cluster(n) starts a cluster of n
ordod members (tests/cluster/clusterlib.py) under the test's tmp dir
(single_ordod: one ordod without cluster mode, to compare with); every
process it started is stopped at teardown (SIGTERM, bounded, then SIGKILL),
and a member that crashed on its own or did not exit 0 on SIGTERM fails the
test. A watchdog SIGKILLs the test's members if it runs past
TEST_DEADLINE_S, so a client stuck on a silent member errors out and the
test fails instead of hanging the suite. A failing test's report carries
the tail of every member's log.
"""
import os
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import clusterlib  # noqa: E402

LOG_TAIL_BYTES = 12000
TEST_DEADLINE_S = 180.0   # no test needs this long; past it its members are SIGKILLed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for cl in getattr(item, "_ordod_clusters", []):
            for m in cl.everyone:
                rep.sections.append(("node %d :%d log (%s)" % (m.id, m.port, m.log_path),
                                     m.log_tail(LOG_TAIL_BYTES)))


@pytest.fixture
def single_ordod(tmp_path):
    """One ordod without cluster mode (a Member with no --cluster list),
    stopped at teardown; it must exit 0."""
    port = clusterlib.pick_ports(1)[0]
    m = clusterlib.Member(0, port, str(tmp_path / "single"), clusterlib.PORT_OFFSET)
    assert m.start_on(port), "port %d was taken" % port
    yield m
    rc = m.stop()
    assert not m.crashes and rc == 0, "single ordod exited %r:\n%s" % (rc, m.log_tail())


@pytest.fixture
def make_cluster(request, tmp_path):
    """make_cluster(n=3, extra=(), http=False, tls=None) -> a started, ready
    Cluster (tls None: as ORDO_TEST_TLS_CLUSTER says)."""
    clusters = []
    request.node._ordod_clusters = clusters
    fired = []

    def watchdog():
        fired.append(True)
        for cl in clusters:
            for m in cl.everyone:
                m.kill()

    timer = threading.Timer(TEST_DEADLINE_S, watchdog)
    timer.daemon = True
    timer.start()

    def make(n=3, extra=(), http=False, tls=None):
        cl = clusterlib.Cluster(str(tmp_path / ("c%d" % len(clusters))), n, extra, http=http, tls=tls)
        clusters.append(cl)
        return cl.start()

    yield make
    timer.cancel()
    problems = ["the test ran past %.0fs: its members were SIGKILLed" % TEST_DEADLINE_S] if fired else []
    for cl in clusters:
        problems += cl.stop()
    assert not problems, "\n".join(problems)
