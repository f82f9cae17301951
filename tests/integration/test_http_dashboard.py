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
