/* tls: HTTPS at the listener. Reads QUEEN_TLS_CERT and QUEEN_TLS_KEY (PEM)
 * and hands libmicrohttpd (built with GnuTLS) what it needs, as flags and
 * MHD_OPTION_ARRAY entries, so the daemon's start is the same with or
 * without TLS. The versions and suites offered are QUEEN_TLS_PRIORITIES (a
 * GnuTLS priority string; the default: TLS 1.2 and 1.3, forward-secret key
 * exchange and AEAD ciphers only). */
#ifndef QUEEN_TLS_H
#define QUEEN_TLS_H

#include <stdbool.h>

#include <microhttpd.h>

#include "queen.h"

/* The certificate and key in memory while the daemon runs. */
typedef struct tls_material {
    char *cert;
    char *key;
} tls_material;

/* Entries tls_mhd_options writes at most, the closing MHD_OPTION_END included. */
#define TLS_MHD_OPTIONS 4

/* Whether cfg asks for HTTPS. */
bool tls_enabled(const queen_config *cfg);

/* Loads the PEM files and fills opts (TLS_MHD_OPTIONS entries, ending with
 * MHD_OPTION_END) and *flags (MHD_USE_TLS or 0). Without TLS: opts holds
 * only the end. 0, or -1 logged (unreadable file, or libmicrohttpd without
 * TLS support) with nothing held. */
int tls_mhd_options(const queen_config *cfg, tls_material *m, struct MHD_OptionItem *opts, unsigned *flags);

/* Wipes and frees what tls_mhd_options loaded (after the daemon stopped). */
void tls_material_free(tls_material *m);

#endif
