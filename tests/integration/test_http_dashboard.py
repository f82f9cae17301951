"""The dashboard at GET / in headless Chromium (Debian's chromium): after
its scripts ran, the DOM shows the queues, keys, locks and leaders this
test created; a screenshot is saved and its path printed. The page is
served from the binary (no external URL: Chromium runs with background
networking off, and the page's only requests go to ordod)."""
import re
import shutil
import subprocess

CHROMIUM_DEADLINE_S = 90


def chromium(url, profile, *extra):
    exe = shutil.which("chromium")
    assert exe, "chromium is missing: scripts/deps.sh test installs it"
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=%s" % profile,
           "--virtual-time-budget=5000", "--window-size=1280,900"] + list(extra) + [url]
    p = subprocess.run(cmd, capture_output=True, timeout=CHROMIUM_DEADLINE_S)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-3000:]
    return p.stdout.decode(errors="replace")


def test_dashboard_shows_queues_keys_locks_and_leaders(server, r, tmp_path):
    r.execute_command("Q.PUSH", "orders", "cart-41", "a")
    r.execute_command("Q.PUSH", "orders", "cart-41", "b")
    r.execute_command("Q.PUSH", "orders", "cart-42", "c")
    r.execute_command("Q.PUSH", "emails", "user-7", "d")
    r.execute_command("Q.PULL", "emails")  # in flight: its key shows "processing"
    r.execute_command("Q.PUSH", "emails", "user-7", "e")
    r.execute_command("LOCK.ACQUIRE", "nightly-report", 60000)
    r.execute_command("ELECT.CAMPAIGN", "scheduler", "node-a", 60000)
    r.execute_command("Q.CONFIG", "payments", "MAXATTEMPTS", 1, "DEADLETTER", "payments-dead")
    r.execute_command("Q.PUSH", "payments", "user-9", "charge")
    (mid, _, _, _, token), = r.execute_command("Q.PULL", "payments")
    assert r.execute_command("Q.NACK", "payments", mid, token) == 1  # its one attempt: dead-lettered
    r.execute_command("Q.PAUSE", "orders", "KEY", "cart-42")
    r.execute_command("Q.SCHEDULE", "ADD", "nightly", "orders", "cart-9", "x", "CRON", "0 3 * * *")
    r.execute_command("CLIENT", "SETNAME", "order-worker")
    url = "http://127.0.0.1:%d/" % server.http_port
    dom = chromium(url, tmp_path / "profile", "--dump-dom")
    assert 'data-ready="1"' in dom, dom[:3000]  # the status poll ran and drew
    assert set(re.findall(r'<tr data-queue="([^"]*)"', dom)) == {"orders", "emails", "payments", "payments-dead"}
    assert set(re.findall(r'<tr[^>]* data-key="([^"]*)"', dom)) == {"cart-41", "cart-42", "user-7", "user-9"}
    dead = re.search(r'<tr data-deadletter="payments">(.*?)</tr>', dom).group(1)
    assert re.findall(r"<td[^>]*>([^<]*)</td>", dead) == ["payments", "1", "payments-dead", "1"]
    row = re.search(r'<tr[^>]*data-key="user-7".*?</tr>', dom).group(0)
    assert "processing" in row
    assert "nightly-report" in dom and "scheduler" in dom and "node-a" in dom
    assert "waiting, paused" in re.search(r'<tr[^>]*data-key="cart-42".*?</tr>', dom).group(0)
    sched = re.search(r'<tr data-schedule="nightly">(.*?)</tr>', dom).group(1)
    assert re.findall(r"<td[^>]*>([^<]*)</td>", sched)[:3] == ["nightly", "orders", "0 3 * * *"]
    assert "<polyline" in dom  # the depth chart
    assert re.search(r'<tr data-client="\d+">.*?order-worker.*?resp', dom)  # the clients, this one named
    assert re.search(r'<tr data-client="\d+">.*?<td>http</td>', dom)  # and the page's own poll
    assert "http://" not in re.sub(r'http://www\.w3\.org/2000/svg', "", dom)  # no external URL
    shot = tmp_path / "dashboard.png"
    chromium(url, tmp_path / "profile2", "--screenshot=%s" % shot)
    assert shot.stat().st_size > 1000
    print("dashboard screenshot: %s" % shot)


def test_dashboard_asks_for_the_password(ordod_factory, tmp_path):
    srv = ordod_factory("--requirepass", "pw")
    dom = chromium("http://127.0.0.1:%d/" % srv.http_port, tmp_path / "profile", "--dump-dom")
    assert "password needed" in dom
    assert re.search(r'<form id="login"(?! hidden)', dom), dom[:2000]


HISTORY_SECONDS = 5       # seconds of samples the server holds before the page opens
CHARTS = ("ch-throughput", "ch-latency", "ch-depth", "ch-oldest", "ch-errors")


def wait_history(r, port, seconds, deadline_s=60):
    """Traffic (SETs and pushes) until the server's history holds `seconds`
    samples; returns the history's seconds ring."""
    import json
    import time
    import urllib.request
    t_end = time.monotonic() + deadline_s
    i = 0
    while True:
        r.set("k%d" % (i % 50), i)
        r.execute_command("Q.PUSH", "jobs", "key-%d" % (i % 7), "p%d" % i)
        i += 1
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/status?history=1" % port, timeout=10) as resp:
            ring = json.load(resp)["history"]["seconds"]
        if len(ring["t"]) >= seconds and sum(ring["kv_per_s"]) > 0:
            return ring
        assert time.monotonic() < t_end, "the history holds %d samples" % len(ring["t"])


def test_dashboard_charts_are_full_on_first_paint(server, r, tmp_path):
    ring = wait_history(r, server.http_port, HISTORY_SECONDS)
    assert max(ring["queue_depth"]) > 0 and max(ring["queue_per_s"]) > 0
    assert all(v == -1 for v in ring["lag_entries"])  # a single server has no followers
    url = "http://127.0.0.1:%d/" % server.http_port
    # A virtual-time budget shorter than one poll interval: what the page
    # shows comes from its first poll, the server's history.
    dom = chromium(url, tmp_path / "profile", "--dump-dom", "--virtual-time-budget=900")
    assert 'data-ready="1"' in dom, dom[:3000]
    for chart in CHARTS:
        m = re.search(r'<figure class="chart" id="%s" data-points="(\d+)"' % chart, dom)
        assert m and int(m.group(1)) >= HISTORY_SECONDS, (chart, m and m.group(0))
    assert re.search(r'<figure class="chart" id="ch-lag" hidden', dom)
    assert dom.count('<polyline class="s"') >= 9  # every series of the five charts
    for width in (1280, 1920, 800):
        shot = tmp_path / ("dashboard-%d.png" % width)
        chromium(url, tmp_path / ("profile-%d" % width), "--screenshot=%s" % shot, "--window-size=%d,1400" % width)
        assert shot.stat().st_size > 1000
        print("dashboard screenshot (%d px wide): %s" % (width, shot))


def test_history_is_asked_from_a_time_and_refuses_garbage(server, r):
    import json
    import urllib.error
    import urllib.request
    ring = wait_history(r, server.http_port, 2)
    last = ring["t"][-1]
    with urllib.request.urlopen("http://127.0.0.1:%d/v1/status?history=%d" % (server.http_port, last), timeout=10) as resp:
        later = json.load(resp)["history"]["seconds"]
    assert later["t"] and later["t"][0] >= last and len(later["t"]) < len(ring["t"]) + 2
    with urllib.request.urlopen("http://127.0.0.1:%d/v1/status" % server.http_port, timeout=10) as resp:
        assert "history" not in json.load(resp)
    for bad in ("0", "abc", "-1"):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/v1/status?history=%s" % (server.http_port, bad), timeout=10)
            assert False, "history=%s was accepted" % bad
        except urllib.error.HTTPError as e:
            assert e.code == 400 and b"history" in e.read()
