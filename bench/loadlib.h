/*
 * loadlib.h -- what the closed-loop load tools (put_load.c, lock_load.c,
 * watch_load.c) share: clocks, connecting, sending and receiving on
 * non-blocking sockets, one poll turn, and writing RESP commands and
 * HTTP/JSON requests.
 *
 * Header-only, static inline so that a tool need not use them all: CMake
 * builds one executable per .c file in bench/, so a shared .c file here
 * would become a tool of its own. Each tool keeps its own connection
 * struct; these functions take the fd and the buffers.
 *
 * Errors the tools cannot go on after (a socket call failing) print the
 * call's name with perror() and exit(1), as the tools always did; what a
 * tool reports in its own words (a closed connection, a full buffer) is
 * returned to it.
 */
#ifndef ORDO_BENCH_LOADLIB_H
#define ORDO_BENCH_LOADLIB_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The longest one poll waits, so a run ends within this of its deadline. */
#define LOAD_POLL_MS_MAX 10

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds this process has used (user + system). */
static inline double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static inline void die(const char *what)
{
    perror(what);
    exit(1);
}

/* A blocking TCP connection to 127.0.0.1:port with TCP_NODELAY, or -1
 * with errno from connect() (nobody listens there: ECONNREFUSED). */
static inline int try_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* As try_connect, but a failure is fatal. */
static inline int connect_to(int port)
{
    int fd = try_connect(port);
    if (fd < 0)
        die("connect");
    return fd;
}

static inline void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        die("fcntl");
}

/* Standard base64 with padding; out holds 4 * ceil(n / 3) + 1 bytes. */
static inline void base64(const char *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i = 0, o = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)in[i] << 16 | (uint32_t)(uint8_t)in[i + 1] << 8 | (uint8_t)in[i + 2];
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)(uint8_t)in[i] << 16 | (i + 1 < n ? (uint32_t)(uint8_t)in[i + 1] << 8 : 0);
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

/* Send buf[*off, len) until it is all sent or send() fails; *off advances
 * by what was sent. Returns 0 when all is sent, or -1 with errno from
 * send() (EAGAIN: the socket is full, try again when writable). */
static inline int send_some(int fd, const char *buf, size_t len, size_t *off)
{
    while (*off < len) {
        ssize_t n = send(fd, buf + *off, len - *off, MSG_NOSIGNAL);
        if (n < 0)
            return -1;
        *off += (size_t)n;
    }
    return 0;
}

enum recv_result {
    RECV_AGAIN,  /* nothing more has arrived for now */
    RECV_CLOSED, /* the server closed (or reset) the connection */
    RECV_FULL,   /* buf is full */
};

/* Read what has arrived on fd into buf[*len, cap); *len grows by it. A
 * reset connection (a server killed with unread input) counts as closed;
 * any other failing recv() but EAGAIN or EINTR is fatal. */
static inline enum recv_result recv_all(int fd, char *buf, size_t cap, size_t *len)
{
    for (;;) {
        ssize_t n = recv(fd, buf + *len, cap - *len, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return RECV_AGAIN;
            if (errno == ECONNRESET)
                return RECV_CLOSED;
            die("recv");
        }
        if (n == 0)
            return RECV_CLOSED;
        *len += (size_t)n;
        if (*len == cap)
            return RECV_FULL;
    }
}

/* poll() the fds for at most LOAD_POLL_MS_MAX ms, and never much past
 * end_s (now is the caller's reading of now_s()). Returns poll()'s count,
 * or -1 if a signal interrupted it; other failures are fatal. */
static inline int poll_turn(struct pollfd *pfd, int nfds, double end_s, double now)
{
    int ms = (int)((end_s - now) * 1000) + 1;
    int n = poll(pfd, (nfds_t)nfds, ms < LOAD_POLL_MS_MAX ? ms : LOAD_POLL_MS_MAX);
    if (n < 0 && errno != EINTR)
        die("poll");
    return n;
}

/* Write the RESP array of bulk strings argv[0..argc) into out[0, cap).
 * Returns its length, or -1 if it does not fit. */
static inline int resp_format(char *out, size_t cap, int argc, const char **argv)
{
    int n = snprintf(out, cap, "*%d\r\n", argc);
    size_t o = n < 0 ? cap : (size_t)n;
    for (int i = 0; i < argc && o < cap; i++) {
        n = snprintf(out + o, cap - o, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
        o = n < 0 ? cap : o + (size_t)n;
    }
    return o < cap ? (int)o : -1;
}

/* Write an HTTP POST of a JSON body to 127.0.0.1 into out[0, cap); version
 * is "HTTP/1.1" (keep-alive) or "HTTP/1.0". Returns its length, or -1 if
 * it does not fit. */
static inline int http_post_format(char *out, size_t cap, const char *path, const char *version, const char *body)
{
    int n = snprintf(out, cap,
                     "POST %s %s\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, version, strlen(body), body);
    return n >= 0 && (size_t)n < cap ? n : -1;
}

/* http_reply_len() -- the length of the HTTP/1.1 response at the start of
 * p[0..n) (framed by Content-Length or chunked), 0 while it is incomplete,
 * -1 if it has neither (then it ends when the server closes). *ok: status
 * 200. */
static inline long http_reply_len(const char *p, size_t n, bool *ok)
{
    const char *e = p + n;
    const char *h = memmem(p, n, "\r\n\r\n", 4);
    if (h == NULL)
        return 0;
    *ok = (size_t)(h - p) >= 12 && memcmp(p, "HTTP/1.1 200", 12) == 0;
    const char *body = h + 4;
    const char *cl = memmem(p, (size_t)(h - p), "Content-Length:", 15);
    if (cl != NULL) {
        long len = strtol(cl + 15, NULL, 10);
        return e - body < len ? 0 : (long)(body + len - p);
    }
    if (memmem(p, (size_t)(h - p), "chunked", 7) != NULL) {
        const char *z = memmem(body, (size_t)(e - body), "\r\n0\r\n\r\n", 7);
        return z == NULL ? 0 : (long)(z + 7 - p);
    }
    return -1;
}

#endif /* ORDO_BENCH_LOADLIB_H */
