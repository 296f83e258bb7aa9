/* tls: HTTPS at the listener through OpenSSL (the library the JWTs already
 * use: one crypto library). Reads QUEEN_TLS_CERT (a PEM chain) and
 * QUEEN_TLS_KEY at start; offers TLS 1.2 and 1.3 (QUEEN_TLS_MIN_VERSION may
 * raise it to 1.3) with the suites of QUEEN_TLS_CIPHERS (TLS 1.2, OpenSSL's
 * cipher-list syntax) and QUEEN_TLS_CIPHERSUITES (TLS 1.3); the defaults
 * are forward-secret key exchange with AEAD ciphers only. Sessions are
 * non-blocking on the event loops' sockets (conn.c): a read or write that
 * needs the other direction (a handshake, a key update) reports "not now"
 * and is retried at the socket's next readiness. */
#ifndef QUEEN_TLS_H
#define QUEEN_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "queen.h"

typedef struct tls_ctx tls_ctx;
typedef struct tls_session tls_session;

/* Whether cfg asks for HTTPS. */
bool tls_enabled(const queen_config *cfg);

/* The listener's context, or *out NULL without TLS. 0, or -1 logged (an
 * unreadable or mismatched certificate or key, a setting OpenSSL refuses,
 * naming it). */
int tls_open(const queen_config *cfg, tls_ctx **out);
void tls_close(tls_ctx *ctx);

/* A server session on a connected non-blocking socket; NULL when memory is
 * short. */
tls_session *tls_session_new(tls_ctx *ctx, int fd);
void tls_session_free(tls_session *s);
/* > 0 bytes, 0 the peer's end (close_notify or the socket's), -1 not now,
 * -2 failed (a bad handshake included). */
ssize_t tls_read(tls_session *s, char *buf, size_t n);
/* > 0 bytes taken, -1 not now, -2 failed. */
ssize_t tls_write(tls_session *s, const char *buf, size_t n);
/* Sends close_notify, best effort, before the socket's own close. */
void tls_shutdown(tls_session *s);

#endif
