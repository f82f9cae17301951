"""hiredis (Debian's libhiredis-dev, unmodified) against ordod: the C
client in tests/hiredis/hiredis_test.c, built by CMake beside ordod, runs
plain and versioned keys, a queue cycle and transactions (one that writes
and acks, one whose stale token aborts it)."""
import os
import subprocess

from conftest import ORDOD

CLIENT = os.path.join(os.path.dirname(ORDOD), "hiredis_test")


def test_hiredis_client(server):
    assert os.path.exists(CLIENT), "%s not built: install libhiredis-dev (scripts/deps.sh test)" % CLIENT
    p = subprocess.run([CLIENT, str(server.port)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    assert b"hiredis_test: ok" in p.stdout
