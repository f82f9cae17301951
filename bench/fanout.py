#!/usr/bin/python3
"""bench/fanout.py -- one large write fanned out to many watchers: the time
until the last watcher has the whole event, and the server's peak RSS.

  fanout.py resp|sse PORT HTTP_PORT PID [-w watchers] [-b value_bytes]

W watchers (default 100), each on its own connection: over RESP,
`KV.WATCH fan`; over HTTP, `GET /v1/watch?key=fan` (Server-Sent Events).
Once every watch is confirmed, one client puts a value of -b bytes
(default 1 MiB, binary: base64 in SSE's JSON) and the clock runs until
every watcher has read the whole event (RESP: the push's value bulk;
SSE: the event's blank line). The watchers are read by one epoll loop in
this process, the same for both kinds, so the tool's own cost is the same
shape in both figures. Peak RSS is the server's VmHWM after the event
(a fresh server per run: bench/watch.sh starts one).

Output: one line of key=value pairs.
"""
import argparse
import os
import selectors
import socket
import time


def vm(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def resp_watcher(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*2\r\n$8\r\nKV.WATCH\r\n$3\r\nfan\r\n")
    got = b""
    while b"\r\n" not in got:
        got += s.recv(100)
    assert got.startswith(b":"), got
    return s


def sse_watcher(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /v1/watch?key=fan HTTP/1.1\r\nHost: b\r\n\r\n")
    got = b""
    while b": ordo watch\n\n" not in got:
        got += s.recv(4096)
    assert got.startswith(b"HTTP/1.1 200"), got[:100]
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["resp", "sse"])
    ap.add_argument("port", type=int)
    ap.add_argument("http_port", type=int)
    ap.add_argument("pid", type=int)
    ap.add_argument("-w", type=int, default=100)
    ap.add_argument("-b", type=int, default=1 << 20)
    a = ap.parse_args()
    socks = [resp_watcher(a.port) if a.kind == "resp" else sse_watcher(a.http_port) for _ in range(a.w)]
    # The end of the event each watcher waits for: RESP, the value bulk's
    # bytes then CRLF (the push's header and key come first); SSE, the
    # blank line ending the event.
    sse = a.kind == "sse"
    need = (a.b + 2) // 3 * 4 if sse else a.b + 2   # base64 in SSE's JSON; the bulk and its CRLF
    sel = selectors.DefaultSelector()
    state = {}
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        state[s] = [0, b""]          # bytes read, the last bytes (to find the end)
    value = bytes(range(256)) * (a.b // 256) + bytes(a.b % 256)
    w = socket.create_connection(("127.0.0.1", a.port))
    cmd = b"*3\r\n$3\r\nSET\r\n$3\r\nfan\r\n$%d\r\n%s\r\n" % (len(value), value)
    rss0 = vm(a.pid, "VmHWM")
    t0 = time.monotonic()
    w.sendall(cmd)
    ack = b""
    left = set(socks)
    t_ack = None
    w.setblocking(False)
    sel.register(w, selectors.EVENT_READ)
    while left or t_ack is None:
        for key, _ in sel.select(timeout=60):
            s = key.fileobj
            data = s.recv(1 << 20)
            if s is w:
                ack += data
                if ack.endswith(b"\r\n"):
                    t_ack = time.monotonic() - t0
                    sel.unregister(w)
                continue
            st = state[s]
            st[0] += len(data)
            st[1] = (st[1] + data)[-4:]
            done = st[0] >= need and st[1].endswith(b"\n\n" if sse else b"\r\n")
            if done and s in left:
                left.discard(s)
                sel.unregister(s)
        if time.monotonic() - t0 > 120:
            raise SystemExit("fanout: %d watchers still waiting after 120 s" % len(left))
    t_last = time.monotonic() - t0
    print("kind=%s watchers=%d value_bytes=%d ack_ms=%.1f last_watcher_ms=%.1f peak_rss_mb=%.1f rss_before_mb=%.1f"
          % (a.kind, a.w, a.b, t_ack * 1000, t_last * 1000, vm(a.pid, "VmHWM") / 1e6, rss0 / 1e6))
    for s in socks:
        s.close()
    w.close()


if __name__ == "__main__":
    main()
