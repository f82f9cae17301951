/*
 * siphash.h -- SipHash-1-3, the keyed hash for every table that holds
 * caller-chosen names.
 *
 * With a secret random key an attacker cannot choose names that collide, so
 * a hostile client cannot turn a table's O(1) lookups into O(n) chains.
 * SipHash-1-3 (one compression round, three finalisation rounds) is the
 * variant Redis and Rust's std use for hash tables: fast on short keys and
 * still keyed. Reference: Aumasson and Bernstein, "SipHash: a fast
 * short-input PRF" (2012).
 */
#ifndef ORDO_SIPHASH_H
#define ORDO_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define ORDO_SIPHASH_KEY_LEN 16

/* ordo_siphash() -- the 64-bit SipHash-1-3 of in[0..len) under key. */
uint64_t ordo_siphash(const uint8_t key[ORDO_SIPHASH_KEY_LEN], const void *in, size_t len);

/* ordo_random_key() -- fill key from the kernel's random source (getrandom).
 * Returns 0, or -1 if no randomness could be had (key is then derived from
 * the clock and address space, which still defeats precomputed collisions). */
int ordo_random_key(uint8_t key[ORDO_SIPHASH_KEY_LEN]);

#endif /* ORDO_SIPHASH_H */
