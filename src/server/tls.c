/* tls: the listener's OpenSSL context and its non-blocking sessions (see
 * tls.h). */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queen_runtime.h"

struct tls_ctx {
    SSL_CTX *ssl;
};

struct tls_session {
    SSL *ssl;
};

bool tls_enabled(const queen_config *cfg)
{
    return cfg->tls_cert != NULL && cfg->tls_cert[0] != '\0' && cfg->tls_key != NULL && cfg->tls_key[0] != '\0';
}

/* OpenSSL's own account of the last failure, for the log. */
static const char *ssl_why(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0)
        return "no detail";
    ERR_error_string_n(e, buf, len);
    return buf;
}

int tls_open(const queen_config *cfg, tls_ctx **out)
{
    *out = NULL;
    if (!tls_enabled(cfg))
        return 0;
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        log_error("tls: cannot make a context: %s", ssl_why(why, sizeof why));
        return -1;
    }
    bool only13 = cfg->tls_min_version != NULL && strcmp(cfg->tls_min_version, "1.3") == 0;
    SSL_CTX_set_min_proto_version(ctx, only13 ? TLS1_3_VERSION : TLS1_2_VERSION);
    /* The server's order of suites, no renegotiation, no compression; the
     * session cache is per loop's context, kept small. */
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    /* A partial write leaves the rest for the socket's next readiness, and
     * the answer's buffer may be the same bytes at another address. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(ctx, cfg->tls_ciphers) != 1) {
        log_error("tls: QUEEN_TLS_CIPHERS names no suite OpenSSL knows (%s)", ssl_why(why, sizeof why));
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_set_ciphersuites(ctx, cfg->tls_ciphersuites) != 1) {
        log_error("tls: QUEEN_TLS_CIPHERSUITES names no suite OpenSSL knows (%s)", ssl_why(why, sizeof why));
        SSL_CTX_free(ctx);
        return -1;
    }
    /* The path only in the log: never the file's content. */
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
        log_error("tls: cannot read QUEEN_TLS_CERT '%s' (%s)", cfg->tls_cert, ssl_why(why, sizeof why));
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
        log_error("tls: cannot read QUEEN_TLS_KEY '%s' (%s)", cfg->tls_key, ssl_why(why, sizeof why));
        SSL_CTX_free(ctx);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        log_error("tls: QUEEN_TLS_KEY is not the key of QUEEN_TLS_CERT (%s)", ssl_why(why, sizeof why));
        SSL_CTX_free(ctx);
        return -1;
    }
    tls_ctx *t = malloc(sizeof *t);
    if (t == NULL) {
        SSL_CTX_free(ctx);
        return -1;
    }
    t->ssl = ctx;
    *out = t;
    log_info("tls: HTTPS with TLS %s and later", only13 ? "1.3" : "1.2");
    return 0;
}

void tls_close(tls_ctx *ctx)
{
    if (ctx == NULL)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

tls_session *tls_session_new(tls_ctx *ctx, int fd)
{
    tls_session *s = malloc(sizeof *s);
    if (s == NULL)
        return NULL;
    s->ssl = SSL_new(ctx->ssl);
    if (s->ssl == NULL || SSL_set_fd(s->ssl, fd) != 1) {
        SSL_free(s->ssl);
        free(s);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(s->ssl);
    return s;
}

void tls_session_free(tls_session *s)
{
    if (s == NULL)
        return;
    SSL_free(s->ssl);
    free(s);
}

/* What a failed call means for the connection. A failure leaves entries in
 * the thread's error queue: cleared, so the next session's call is judged
 * alone. */
static ssize_t verdict(tls_session *s, int rc)
{
    int e = SSL_get_error(s->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -1;
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    return -2;
}

ssize_t tls_read(tls_session *s, char *buf, size_t n)
{
    int want = n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
    int rc = SSL_read(s->ssl, buf, want);
    if (rc > 0)
        return rc;
    ssize_t v = verdict(s, rc);
    return v == -2 && rc == 0 ? 0 : v;
}

ssize_t tls_write(tls_session *s, const char *buf, size_t n)
{
    int want = n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
    int rc = SSL_write(s->ssl, buf, want);
    if (rc > 0)
        return rc;
    ssize_t v = verdict(s, rc);
    return v == 0 ? -2 : v;
}

void tls_shutdown(tls_session *s)
{
    if (SSL_is_init_finished(s->ssl))
        (void)SSL_shutdown(s->ssl);
    ERR_clear_error();
}
