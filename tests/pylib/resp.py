"""A tiny RESP2/RESP3 client over a socket (plaintext, or TLS given an
ssl.SSLContext), for what redis-py cannot do: read watch events (push
frames, or RESP2 arrays arriving unasked), send malformed bytes, and see
exactly how the server answers.

Replies are decoded to Python values: simple strings to str, bulk strings to
bytes, errors to RespError (returned, not raised), nil to None, arrays and
sets to lists, maps to dicts, push frames to Push (a list subclass), so a
test can tell a push from an ordinary reply.

Used by the integration, crash and cluster suites and by ordoproc.py's
readiness check (a dead server shows as Closed or OSError).
"""
import socket
import time


class RespError(Exception):
    """An error reply; .code is its first word."""

    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg
        self.code = msg.split(" ", 1)[0]

    def __eq__(self, other):
        return isinstance(other, RespError) and other.msg == self.msg

    def __repr__(self):
        return "RespError(%r)" % self.msg


class Push(list):
    """A RESP3 push frame ('>')."""


class Closed(Exception):
    """The server closed the connection."""


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=20.0, host="127.0.0.1", rcvbuf=None, tls=None):
        """rcvbuf: a small receive buffer, set before connecting (a buffer
        shrunk after the handshake can stall TCP in zero-window probes), so
        a test's unread replies stay in the server rather than the kernel.
        tls: an ssl.SSLContext to speak TLS with (a server's tls-port),
        the handshake done here, the server's certificate checked for
        host; None: plaintext."""
        if rcvbuf is None:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        else:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect((host, port))
        if tls is not None:
            try:
                self.sock = tls.wrap_socket(self.sock, server_hostname=host)
            except BaseException:
                self.sock.close()
                raise
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass  # already dead (the crash tests close after a SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def settimeout(self, t):
        self.sock.settimeout(t)

    def send_raw(self, data):
        self.sock.sendall(data)

    def recv_exact(self, n):
        """Exactly the next n raw bytes (one recv may return fewer; any
        bytes after them stay buffered for the next read): the wire bytes
        of a reply, for tests of its encoding."""
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def send(self, *args):
        self.sock.sendall(encode(*args))

    def call(self, *args):
        """Send one command and read one reply (which, on a connection with
        watches, may be an event: use call_skip_events then)."""
        self.send(*args)
        return self.read()

    # ---- reading -------------------------------------------------------
    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise Closed()
        self.buf += data

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"=":  # verbatim: "txt:" prefix
            return self._exact(int(rest))[4:]
        if t == b"_":
            return None
        if t == b"#":
            return rest == b"t"
        if t == b",":
            return float(rest)
        if t == b"(":
            return int(rest)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            items = [self.read() for _ in range(n)]
            return Push(items) if t == b">" else items
        if t == b"%":
            n = int(rest)
            d = {}
            for _ in range(n):
                k = self.read()
                d[k] = self.read()
            return d
        if t == b"|":  # attribute: skip it, return what it annotates
            for _ in range(2 * int(rest)):
                self.read()
            return self.read()
        raise AssertionError("unexpected RESP type in %r" % line[:80])

    def read_until_closed(self, timeout=20.0):
        """Read replies until the server closes; returns them. Fails if the
        connection is still open after timeout."""
        out = []
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                out.append(self.read())
            except Closed:
                return out
            except ConnectionResetError:
                return out
            except socket.timeout:
                raise AssertionError("server did not close the connection; got %r" % out)

    def is_closed(self, timeout=20.0):
        """True once the server has closed (EOF or reset) within timeout."""
        self.sock.settimeout(timeout)
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    return True
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
