/* transport: one call to the broker, with the retry rules, failover and
 * the typed error (queen_client.h, "Retries"). Every public call of the
 * client is shaped into a request and sent through client_call. */
#ifndef QUEEN_CLIENT_TRANSPORT_H
#define QUEEN_CLIENT_TRANSPORT_H

#include "queen_client.h"

#include <stdbool.h>

typedef struct client_request {
    const char *method;  /* GET, POST, PUT, DELETE */
    const char *path;    /* already escaped, with its query */
    const char *body;    /* NULL: none */
    const char *tenant;  /* NULL: no header */
    bool safe;           /* a repeat cannot harm: retried on 429/503/timeouts */
    long extra_ms;       /* a long poll's wait, added to the attempt's timeout */
} client_request;

typedef struct client_reply {
    long status;
    char *body; /* malloc'd, NUL-terminated ("" for none) */
    size_t len;
} client_reply;

/* 0: a 2xx answer in *reply (free reply->body). -1: err filled (the
 * envelope of a 4xx/5xx, or the client's own failure). */
int client_call(queen_client *c, const client_request *rq, client_reply *reply, queen_client_error *err);

/* Fills err with the client's own failure (status 0 unless given). */
void client_error_set(queen_client_error *err, int status, const char *code, const char *detail);
/* A KV route's 200 body that is the precondition verdict: fills err and
 * returns true. */
bool client_kv_verdict(const char *body, size_t len, queen_client_error *err);
/* client_error_set(out_of_memory) and -1, for the callers' allocation failures. */
int client_oom(queen_client_error *err);

#endif
