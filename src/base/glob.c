/*
 * glob.c -- Redis's glob patterns over bytes (glob.h): the users' key,
 * queue and name patterns (core/acl.c) and SCAN MATCH / KEYS
 * (cmd/cmd_keyspace.c) match with this one function.
 *
 * Invariant: matching is iterative and backtracks only to the last '*',
 * so a pattern and a subject of n and m bytes cost O(n * m) at worst,
 * whatever the pattern (a pattern of many stars is not exponential).
 */
#include "glob.h"

/* Does the class at p[0..plen) (just after '[') match ch? *used receives
 * the bytes of the class, its closing ']' included (all of p if none). */
static bool class_match(const char *p, size_t plen, unsigned char ch, size_t *used)
{
    size_t i = 0;
    bool neg = false, hit = false;
    if (i < plen && p[i] == '^') {
        neg = true;
        i++;
    }
    for (; i < plen && p[i] != ']'; i++) {
        if (p[i] == '\\' && i + 1 < plen) {
            i++;
            hit |= (unsigned char)p[i] == ch;
        } else if (i + 2 < plen && p[i + 1] == '-' && p[i + 2] != ']') {
            unsigned char lo = (unsigned char)p[i], hi = (unsigned char)p[i + 2];
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            hit |= ch >= lo && ch <= hi;
            i += 2;
        } else {
            hit |= (unsigned char)p[i] == ch;
        }
    }
    *used = i < plen ? i + 1 : plen;
    return neg ? !hit : hit;
}

/* Iterative, backtracking only to the last '*': O(plen * slen) at worst,
 * never exponential, whatever the pattern. */
bool ordo_glob_match(const char *p, size_t plen, const char *s, size_t slen)
{
    size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;
    while (si < slen) {
        if (pi < plen) {
            char c = p[pi];
            if (c == '*') {
                while (pi < plen && p[pi] == '*')
                    pi++;
                if (pi == plen)
                    return true;
                star_p = pi;
                star_s = si;
                continue;
            }
            size_t used = 1;
            bool ok;
            if (c == '?') {
                ok = true;
            } else if (c == '[') {
                ok = class_match(p + pi + 1, plen - pi - 1, (unsigned char)s[si], &used);
                used++;
            } else if (c == '\\' && pi + 1 < plen) {
                ok = p[pi + 1] == s[si];
                used = 2;
            } else {
                ok = c == s[si];
            }
            if (ok) {
                pi += used;
                si++;
                continue;
            }
        }
        if (star_p == (size_t)-1)
            return false;
        pi = star_p; /* let the last '*' take one more byte */
        si = ++star_s;
    }
    while (pi < plen && p[pi] == '*')
        pi++;
    return pi == plen;
}

size_t ordo_glob_prefix(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] != '*' && p[i] != '?' && p[i] != '[' && p[i] != '\\')
        i++;
    return i;
}
