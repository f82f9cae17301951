/*
 * fuzz_records.h -- sample records for seeds (fuzz_records.c).
 */
#ifndef ORDO_FUZZ_RECORDS_H
#define ORDO_FUZZ_RECORDS_H

#include <stddef.h>

#include "core/core.h"
#include "fuzz.h"

/* The most records fuzz_sample_records() returns. */
#define FUZZ_SAMPLE_RECORDS_MAX 64

/* fuzz_sample_records() -- one valid record of every type (some twice),
 * in an order that applies to an empty core, into out[0..max); returns
 * how many. Byte fields point at static storage. */
size_t fuzz_sample_records(record_t *out, size_t max);

#endif /* ORDO_FUZZ_RECORDS_H */
