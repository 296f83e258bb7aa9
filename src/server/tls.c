/* tls: loading the certificate and key for the listener, and the protocol
 * versions and suites it offers (see tls.h). */
#include "tls.h"

#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logging.h"

/* A PEM file's text; NULL when unreadable, empty or past 1 MiB (a chain of
 * a few certificates is a few KB). */
#define TLS_PEM_MAX_BYTES (1L << 20)

static char *read_pem(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *text = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && n <= TLS_PEM_MAX_BYTES && fseek(f, 0, SEEK_SET) == 0 &&
        (text = malloc((size_t)n + 1)) != NULL) {
        if (fread(text, 1, (size_t)n, f) != (size_t)n) {
            free(text);
            text = NULL;
        } else {
            text[n] = '\0';
        }
    }
    fclose(f);
    return text;
}

bool tls_enabled(const queen_config *cfg)
{
    return cfg->tls_cert != NULL && cfg->tls_cert[0] != '\0' && cfg->tls_key != NULL && cfg->tls_key[0] != '\0';
}

int tls_mhd_options(const queen_config *cfg, tls_material *m, struct MHD_OptionItem *opts, unsigned *flags)
{
    m->cert = m->key = NULL;
    *flags = 0;
    opts[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    if (!tls_enabled(cfg))
        return 0;
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        log_error("tls: this libmicrohttpd was built without TLS support");
        return -1;
    }
    m->cert = read_pem(cfg->tls_cert);
    m->key = read_pem(cfg->tls_key);
    if (m->cert == NULL || m->key == NULL) {
        /* The path only: never the file's content. */
        log_error("tls: cannot read %s '%s'", m->cert == NULL ? "QUEEN_TLS_CERT" : "QUEEN_TLS_KEY",
                  m->cert == NULL ? cfg->tls_cert : cfg->tls_key);
        tls_material_free(m);
        return -1;
    }
    /* Checked here, with GnuTLS's own account of where it is wrong: the
     * daemon would only fail to start, without saying why. */
    gnutls_priority_t prio;
    const char *bad = NULL;
    int rc = gnutls_priority_init(&prio, cfg->tls_priorities, &bad);
    if (rc < 0) {
        log_error("tls: QUEEN_TLS_PRIORITIES is not a GnuTLS priority string (%s, at '%.40s')", gnutls_strerror(rc),
                  bad ? bad : "");
        tls_material_free(m);
        return -1;
    }
    gnutls_priority_deinit(prio);
    opts[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, m->cert};
    opts[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, m->key};
    opts[2] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)cfg->tls_priorities};
    opts[3] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    *flags = MHD_USE_TLS;
    return 0;
}

void tls_material_free(tls_material *m)
{
    if (m->key != NULL) {
        /* The private key does not outlive its use in our memory. */
        volatile char *p = m->key;
        while (*p != '\0')
            *p++ = '\0';
    }
    free(m->cert);
    free(m->key);
    m->cert = m->key = NULL;
}
