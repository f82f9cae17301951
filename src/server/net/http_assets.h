/*
 * http_assets.h -- the dashboard's files, embedded in the binary at build
 * time (scripts/embed.cmake writes http_assets.c from
 * src/server/net/dashboard/). Read-only; served by net/http.c.
 */
#ifndef ORDO_HTTP_ASSETS_H
#define ORDO_HTTP_ASSETS_H

#include <stddef.h>

typedef struct http_asset_s {
    const char *path;          /* URL path: "/" or "/dashboard/<file>" */
    const char *content_type;
    const unsigned char *data; /* len bytes (plus a NUL not counted) */
    size_t len;
} http_asset_t;

extern const http_asset_t http_assets[];
extern const size_t http_assets_count;

#endif /* ORDO_HTTP_ASSETS_H */
