/*
 * http_assets.h -- the dashboard's files and the OpenAPI description,
 * embedded in the binary at build time (scripts/embed.cmake writes
 * http_assets.c from src/server/net/dashboard/ and
 * src/server/net/api/openapi.json). Read-only; served by net/http.c.
 */
#ifndef ORDO_HTTP_ASSETS_H
#define ORDO_HTTP_ASSETS_H

#include <stddef.h>

typedef struct http_asset_s {
    const char *path;          /* URL path: "/", "/dashboard/<file>" or "/v1/openapi.json" */
    const char *content_type;
    const unsigned char *data; /* len bytes (plus a NUL not counted) */
    size_t len;
} http_asset_t;

extern const http_asset_t http_assets[];
extern const size_t http_assets_count;

#endif /* ORDO_HTTP_ASSETS_H */
