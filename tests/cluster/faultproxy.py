"""A fault-injecting TCP proxy on loopback, for network faults with real
sockets (beside DEBUG PARTITION, which cuts raft traffic inside ordod).

FaultProxy(target_port) listens on a free loopback port and relays every
connection to 127.0.0.1:target_port through two pump threads, applying
what its attributes say at each chunk it relays:
  - delay_s:        each chunk waits this long (plus up to jitter_s) first;
  - cut_reply_p:    a chunk from the server is dropped with this
                    probability and both sides are closed (the request went
                    through, its reply is lost: the client's write is in
                    doubt);
  - blackhole:      while set, nothing is relayed either way and the
                    sockets stay open (a partition the client only sees as
                    silence, until its timeout).
Counters: connections, chunks, cuts, held (chunks held by the blackhole).
close() stops it and closes every socket it holds. Its randomness is a
random.Random(seed): a failing run can be replayed.
"""
import random
import select
import socket
import threading
import time

CHUNK_BYTES = 65536
POLL_S = 0.02          # a pump looks at the blackhole and closing this often


class FaultProxy:
    def __init__(self, target_port, seed=0):
        self.target = ("127.0.0.1", target_port)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.delay_s = 0.0
        self.jitter_s = 0.0
        self.cut_reply_p = 0.0
        self.blackhole = False
        self.connections = self.chunks = self.cuts = self.held = 0
        self.closing = False
        self.socks = []
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.closing:
            r, _, _ = select.select([self.ls], [], [], POLL_S)
            if not r:
                continue
            try:
                client, _ = self.ls.accept()
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                continue
            with self.lock:
                self.connections += 1
                self.socks += [client, server]
            for src, dst, reply in ((client, server, False), (server, client, True)):
                t = threading.Thread(target=self._pump, args=(src, dst, reply), daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, src, dst, reply):
        try:
            while not self.closing:
                r, _, _ = select.select([src], [], [], POLL_S)
                if not r:
                    continue
                data = src.recv(CHUNK_BYTES)
                if not data:
                    break
                while self.blackhole and not self.closing:
                    with self.lock:
                        self.held += 1
                    time.sleep(POLL_S)
                with self.lock:
                    self.chunks += 1
                    delay = self.delay_s + self.rng.uniform(0, self.jitter_s)
                    cut = reply and self.rng.random() < self.cut_reply_p
                    if cut:
                        self.cuts += 1
                if delay > 0:
                    time.sleep(delay)
                if cut:
                    break
                dst.sendall(data)
        except (OSError, ValueError):
            pass  # ValueError: the other direction's pump (or close()) closed src: select() refuses fd -1
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.closing = True
        self.ls.close()
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        for t in self.threads:
            t.join(5)
