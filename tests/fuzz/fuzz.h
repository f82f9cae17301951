/*
 * fuzz.h -- what every libFuzzer target of tests/fuzz/ shares: the check
 * that aborts (so libFuzzer saves the input), and seed corpora written by
 * the target itself.
 *
 * Seeds: scripts/fuzz.sh runs each target once with ORDO_FUZZ_SEEDS=<dir>;
 * fuzz_common.c's LLVMFuzzerInitialize() then calls the target's
 * fuzz_seeds(), which writes valid inputs made with the real encoders
 * (record_encode, wal_append, snap_encode_mem, ...) through fuzz_seed(),
 * and exits. So the seeds follow the formats as they change, and no
 * generated corpus is committed.
 */
#ifndef ORDO_FUZZ_H
#define ORDO_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant the target checks on every input: abort (libFuzzer keeps
 * the input as a crash artifact) if it does not hold. */
#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s: check failed: %s (line %d)\n", __FILE__, #cond, __LINE__); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* fuzz_seeds() -- defined by each target: write its seeds with fuzz_seed(). */
void fuzz_seeds(void);

/* fuzz_seed() -- write one seed, named name, into the seed directory. */
void fuzz_seed(const char *name, const void *data, size_t len);

/* fuzz_tmpdir() -- a fresh private directory for targets that need files,
 * under $ORDO_FUZZ_TMP (scripts/fuzz.sh makes one per run on tmpfs, where
 * fsync costs nothing, and removes it), else /dev/shm or $TMPDIR; made
 * once per process and removed at a normal exit. fuzz_clear_dir() empties
 * a directory between inputs. */
const char *fuzz_tmpdir(void);
void fuzz_clear_dir(const char *dir);

#endif /* ORDO_FUZZ_H */
