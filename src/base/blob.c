/*
 * blob.c -- shared immutable bytes; see blob.h.
 */
#include "blob.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

ordo_blob_t *ordo_blob_new(const void *data, size_t len)
{
    ordo_blob_t *b = ordo_xmalloc(sizeof *b + len);
    b->refs = 1;
    b->len = len;
    if (len > 0)
        memcpy(b->data, data, len);
    return b;
}

void ordo_blob_unref(ordo_blob_t *b)
{
    assert(b->refs > 0);
    if (--b->refs == 0)
        free(b);
}
