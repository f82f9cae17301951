/*
 * glob.h -- Redis's glob patterns, binary safe: * any run of bytes, ? one
 * byte, [abc] [a-z] [^a] a class (a reversed range counts as its
 * reverse), \x the byte x. No ordo knowledge.
 */
#ifndef ORDO_GLOB_H
#define ORDO_GLOB_H

#include <stdbool.h>
#include <stddef.h>

/* ordo_glob_match() -- does pattern p[0..plen) match s[0..slen)? At most
 * O(plen * slen) steps, whatever the pattern. */
bool ordo_glob_match(const char *p, size_t plen, const char *s, size_t slen);

/* ordo_glob_prefix() -- how many leading bytes of p[0..n) are literal
 * (before its first special byte): every subject p matches starts with
 * them, so a sorted walk may start there. */
size_t ordo_glob_prefix(const char *p, size_t n);

#endif /* ORDO_GLOB_H */
