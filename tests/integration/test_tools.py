"""redis-cli and redis-benchmark, unmodified, against ordod."""
import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-tools not installed")


def cli(srv, *args, stdin=None):
    p = subprocess.run(["redis-cli", "-p", str(srv.port)] + list(args), input=stdin,
                       capture_output=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.decode()


def test_redis_cli(server):
    assert cli(server, "PING") == "PONG\n"
    assert cli(server, "SET", "k", "hello world") == "OK\n"
    assert cli(server, "GET", "k") == "hello world\n"
    assert cli(server, "INCRBY", "n", "5") == "5\n"
    assert cli(server, "GET", "nope") == "\n"
    assert cli(server, "KV.PUT", "p/a", "1").strip().isdigit()
    out = cli(server, "KV.RANGE", "p/")
    assert out.splitlines()[:2] == ["p/a", "1"]
    assert cli(server, "KV.PUT", "p/a", "2", "IFREV", "0").startswith("CONFLICT ")
    assert cli(server, "DBSIZE") == "3\n"
    assert "# Keyspace" in cli(server, "INFO")
    # interactive mode reads commands from stdin, and uses COMMAND DOCS for hints
    out = cli(server, stdin=b"SET x 1\nGET x\nHELLO 3\nGET x\n")
    assert out.startswith("OK\n1\n") and out.endswith("1\n")
    assert cli(server, "-3", "GET", "x") == "1\n"


def run_bench(srv, *extra):
    p = subprocess.run(["redis-benchmark", "-p", str(srv.port), "-t", "set,get", "-n", "20000", "-c", "20",
                        "-q"] + list(extra), capture_output=True, timeout=90)
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode == 0, out
    assert "error" not in out.lower(), out
    lines = [l for l in out.replace("\r", "\n").splitlines() if re.match(r"^(SET|GET): [\d.]+ requests per second", l)]
    assert {l.split(":")[0] for l in lines} == {"SET", "GET"}, out
    return out


def test_redis_benchmark(server):
    run_bench(server)
    with server.raw() as c:
        assert c.call("GET", "key:__rand_int__") is not None


def test_redis_benchmark_pipelined(server):
    run_bench(server, "-P", "16")
    assert server.alive()
