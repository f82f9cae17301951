"""The `ordo` tool's usage errors (issue 24): each names the command, the
argument and the fault in one line, then points to --help (the whole usage
is printed only for --help, `ordo help`, or no command at all); --help is on
stdout with exit status 0, a usage error on stderr with 2; ranges are
checked; an option missing its value is an error at once, not a wait;
extra arguments are refused by name."""
import subprocess
import time

from clientlib import prog

POINTER = b"run 'ordo --help' for usage\n"
# A usage error is immediate; this bounds "immediate" on a loaded machine
# (and catches a wait for input that never comes).
QUICK_S = 2.0


def run(*args, port=None):
    argv = [prog("ordo")] + (["-p", str(port)] if port else []) + [str(a) for a in args]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    assert time.monotonic() - t0 < QUICK_S, (args, p.stderr)
    return p


def usage_error(*args, port=None):
    """Run a command that must be a usage error; returns its first line."""
    p = run(*args, port=port)
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    assert p.stdout == b"", (args, p.stdout)
    assert p.stderr.endswith(POINTER), (args, p.stderr)
    assert b"usage: ordo [" not in p.stderr, (args, p.stderr)  # not the whole usage
    return p.stderr.split(b"\n")[0].decode()


def test_help_is_on_stdout_and_exits_0():
    for args in (["--help"], ["help"], ["call", "--help"], ["-p", "7379", "status", "--help"], ["pause", "--help"],
                 ["cancel", "--help"], ["schedule", "--help"], ["schedule", "add", "--help"]):
        p = run(*args)
        assert p.returncode == 0, (args, p.stderr)
        assert p.stderr == b""
        assert p.stdout.startswith(b"usage: ordo "), p.stdout
    # Every option of every command is in it.
    text = run("--help").stdout.decode()
    for opt in ("-h", "-p", "-a", "--timeout", "--tls", "--cacert", "--cert", "--key", "--sni", "--prefix",
                "--from", "--id", "--concurrency", "--lease", "--nack-delay", "--exactly-once", "--count",
                "--interval", "--iterations", "-n", "--once", "--raw", "--for", "--every", "--start", "--cron",
                "--skip-missed", "--queue-backoff", "--tempfail-pause"):
        assert opt in text, opt


def test_no_command_prints_the_usage_on_stderr():
    p = run()
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.startswith(b"usage: ordo ")


def test_bad_numbers_name_the_option_and_the_value():
    assert usage_error("call", "q", "k", "p", "--timeout", "abc") == \
        "ordo call: --timeout: 'abc' is not a number of milliseconds (0..2147483647)"
    assert usage_error("-p", "70000", "status") == "ordo: -p: '70000' is not a port (1..65535)"
    assert usage_error("-p", "-1", "status") == "ordo: -p: '-1' is not a port (1..65535)"
    assert usage_error("--timeout", "-5", "status") == \
        "ordo: --timeout: '-5' is not a number of milliseconds (1..2147483647)"
    assert usage_error("watch", "k", "--from", "-3") == "ordo watch: --from: '-3' is not a revision (0..9223372036854775807)"
    assert usage_error("consume", "q", "--concurrency", "0", "--", "true") == \
        "ordo consume: --concurrency: '0' is not a number of workers (1..1024)"
    assert usage_error("consume", "q", "--concurrency", "5000", "--", "true").startswith(
        "ordo consume: --concurrency: '5000'")
    assert usage_error("consume", "q", "--nack-delay", "soon", "--", "true").startswith(
        "ordo consume: --nack-delay: 'soon' is not a number of milliseconds")
    assert usage_error("top", "q", "--interval", "1.5").startswith("ordo top: --interval: '1.5'")


def test_an_option_missing_its_value_is_an_error_not_a_hang():
    assert usage_error("watch", "--prefix") == "ordo watch: --prefix needs a value"
    assert usage_error("call", "q", "k", "p", "--id") == "ordo call: --id needs a value"
    assert usage_error("-p") == "ordo: -p needs a value"
    assert usage_error("--tls", "--cacert") == "ordo: --cacert needs a value"


def test_extra_and_unknown_arguments_are_refused_by_name():
    assert usage_error("status", "extra") == "ordo status: unexpected argument 'extra'"
    assert usage_error("push", "q", "k", "v", "w") == "ordo push: unexpected argument 'w'"
    assert usage_error("help", "me") == "ordo help: unexpected argument 'me'"
    assert usage_error("bogus").startswith("ordo: unknown command 'bogus'")
    assert usage_error("--bogus", "status") == "ordo: unknown option '--bogus'"
    assert usage_error("push", "q", "k", "--x").startswith("ordo push: unknown option '--x'")
    # An option of the tool given after the command says where it goes.
    assert usage_error("status", "-p", "7379").startswith("ordo status: -p goes before the command")
    assert usage_error("watch", "a", "--prefix", "b") == "ordo watch: KEY 'a' and --prefix 'b': one or the other"


def test_missing_arguments_are_named_with_the_command_line():
    p = run("call", "q", "k")
    assert p.returncode == 2
    lines = p.stderr.decode().splitlines()
    assert lines[0] == "ordo call: missing PAYLOAD"
    assert lines[1] == "usage: ordo call QUEUE KEY PAYLOAD [--id ID] [--timeout MS]"
    assert run("watch").stderr.startswith(b"ordo watch: missing KEY (or --prefix P)\n")
    assert run("consume", "q").stderr.startswith(b"ordo consume: missing -- PROGRAM\n")
    assert run("push").stderr.startswith(b"ordo push: missing QUEUE\n")


def test_arguments_that_look_like_options_still_pass(server):
    # A payload like -1 is a payload; one beginning with -- comes after --.
    p = run("push", "q", "k1", "-1", port=server.port)
    assert p.returncode == 0, p.stderr
    p = run("push", "q", "k2", "--", "--x", port=server.port)
    assert p.returncode == 0, p.stderr
    with server.raw() as r:
        flat = repr(r.call("Q.PULL", "q", "COUNT", "10"))
    assert "'-1'" in flat.replace("b'", "'") and "'--x'" in flat.replace("b'", "'"), flat


def test_queue_control_commands_name_their_faults():
    assert usage_error("pause", "q", "--for", "0") == \
        "ordo pause: --for: '0' is not a number of milliseconds (1..316224000000)"
    assert usage_error("pause", "q", "--for", "1s").startswith("ordo pause: --for: '1s' is not a number")
    assert usage_error("resume", "q", "--for", "5") == \
        "ordo resume: unknown option '--for' (an argument that begins with -- goes after --)"
    p = run("cancel", "q")
    assert p.returncode == 2
    assert p.stderr.decode().splitlines()[:2] == ["ordo cancel: missing ID", "usage: ordo cancel QUEUE ID"]
    assert usage_error("cancel", "q", "abc") == \
        "ordo cancel: ID: 'abc' is not a message id (1..9223372036854775807)"
    assert usage_error("redrive", "q", "--key", "k", "--id", "3") == \
        "ordo redrive: --key 'k' and --id 3: one or the other"
    assert usage_error("redrive", "q", "--id", "0").startswith("ordo redrive: --id: '0' is not a message id")
    assert usage_error("consume", "q", "--queue-backoff", "--nack-delay", "500", "--", "true") == \
        "ordo consume: --nack-delay 500 and --queue-backoff: one or the other"
    assert usage_error("consume", "q", "--tempfail-pause", "1073741824", "--", "true") == \
        "ordo consume: --tempfail-pause: '1073741824' is not a number of milliseconds (1..1073741823)"
    assert usage_error("schedule") == "ordo schedule: missing add, del or list"
    assert usage_error("schedule", "move") == "ordo schedule: unknown subcommand 'move' (add, del, list)"
    assert usage_error("schedule", "add", "s", "q", "k", "x") == \
        "ordo schedule add: missing --every MS or --cron EXPR"
    assert usage_error("schedule", "add", "s", "q", "k", "x", "--every", "1000", "--cron", "* * * * *") == \
        "ordo schedule add: --every 1000 and --cron '* * * * *': one or the other"
    assert usage_error("schedule", "add", "s", "q", "k", "x", "--cron", "* * * * *", "--start", "5") == \
        "ordo schedule add: --start goes with --every, not --cron"
    assert usage_error("schedule", "del") == "ordo schedule del: missing NAME"
    assert usage_error("schedule", "list", "x") == "ordo schedule list: unexpected argument 'x'"
