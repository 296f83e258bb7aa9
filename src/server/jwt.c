/* jwt: token verification and the keys it uses (see jwt.h). */
#include "jwt.h"

#include <curl/curl.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queen_runtime.h"

/* A JWKS document larger than this is refused: a key set is a few KB. */
#define JWKS_MAX_BYTES (1u << 20)
#define JWKS_FETCH_TIMEOUT_S 5L
/* RSA keys shorter than this are refused when loaded (RFC 7518 3.3). */
#define RSA_MIN_BITS 2048

typedef enum key_type { KEY_RSA, KEY_EC_P256, KEY_ED25519 } key_type;

typedef struct pub_key {
    key_type type;
    char kid[128]; /* "" when the key has none (PEM files) */
    EVP_PKEY *pkey;
} pub_key;

/* One loaded JWKS, shared by the verifications using it while a refresh
 * swaps in the next: freed when the last one lets go. */
typedef struct keyset {
    pub_key *keys;
    size_t n;
    int refs; /* guarded by the keyring's mutex */
} keyset;

struct jwt_keyring {
    unsigned char *secret;
    size_t secret_len;
    keyset pem; /* never swapped: no references counted */
    char *jwks_source;
    char *jwks_ca;
    int refresh_s;
    int min_refetch_s;   /* fewest seconds between two fetches a request asks for */
    pthread_mutex_t mu;  /* guards what follows; never held across a fetch */
    keyset *jwks;        /* the current set, or NULL before the first good load */
    time_t jwks_tried;   /* last fetch asked for (or made at start), good or not */
    time_t jwks_loaded;  /* last good load */
    /* The refresher: its own thread, so that a fetch (up to
     * JWKS_FETCH_TIMEOUT_S against a slow issuer) never runs on an event
     * loop. A verification that wants one only asks (wanted, cv) and goes
     * on with the set it has. */
    pthread_t refresher;
    bool refresher_running;
    pthread_cond_t cv;
    bool wanted;         /* a fetch was asked for and has not started */
    time_t wanted_at;    /* the asking verification's clock: becomes jwks_loaded */
    bool fetching;       /* the refresher is fetching */
    atomic_bool stopping; /* jwt_keyring_free: abandon a fetch in progress */
};

static const char *const fault_reasons[JWT_FAULT_COUNT] = {
    [JWT_OK] = "ok",
    [JWT_MALFORMED] = "token_malformed",
    [JWT_UNSUPPORTED_ALG] = "token_unsupported_alg",
    [JWT_NO_KEY] = "token_unknown_key",
    [JWT_BAD_SIGNATURE] = "token_bad_signature",
    [JWT_EXPIRED] = "token_expired",
    [JWT_NOT_YET_VALID] = "token_not_yet_valid",
    [JWT_BAD_ISSUER] = "token_bad_issuer",
    [JWT_BAD_AUDIENCE] = "token_bad_audience",
};

const char *jwt_fault_reason(jwt_fault f)
{
    return (int)f >= 0 && f < JWT_FAULT_COUNT ? fault_reasons[f] : "token_malformed";
}

/* ---- base64url ------------------------------------------------------------ */

static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

unsigned char *jwt_b64url_decode(const char *s, size_t len, size_t *out_len)
{
    if (len % 4 == 1) /* no encoding leaves one character over */
        return NULL;
    unsigned char *out = malloc(len / 4 * 3 + 3);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) { /* leftover bits must be zero: one text per byte string */
        free(out);
        return NULL;
    }
    *out_len = o;
    return out;
}

/* ---- keys ------------------------------------------------------------------ */

static void keyset_clear(keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++)
        EVP_PKEY_free(ks->keys[i].pkey);
    free(ks->keys);
    ks->keys = NULL;
    ks->n = 0;
}

static void keyset_release(keyset *ks)
{
    if (ks == NULL)
        return;
    keyset_clear(ks);
    free(ks);
}

/* The JOSE key type of a loaded public key, or -1 when it is none we verify. */
static int classify(EVP_PKEY *pkey)
{
    if (EVP_PKEY_is_a(pkey, "RSA"))
        return EVP_PKEY_get_bits(pkey) >= RSA_MIN_BITS ? KEY_RSA : -1;
    if (EVP_PKEY_is_a(pkey, "ED25519"))
        return KEY_ED25519;
    if (EVP_PKEY_is_a(pkey, "EC")) {
        char group[64];
        size_t n = 0;
        if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &n) == 1 &&
            strcmp(group, "prime256v1") == 0)
            return KEY_EC_P256;
    }
    return -1;
}

static int keyset_add(keyset *ks, EVP_PKEY *pkey, const char *kid)
{
    int type = classify(pkey);
    if (type < 0) {
        EVP_PKEY_free(pkey);
        return -1;
    }
    pub_key *grown = realloc(ks->keys, (ks->n + 1) * sizeof *grown);
    if (grown == NULL) {
        EVP_PKEY_free(pkey);
        return -1;
    }
    ks->keys = grown;
    pub_key *k = &ks->keys[ks->n++];
    k->type = (key_type)type;
    k->pkey = pkey;
    snprintf(k->kid, sizeof k->kid, "%s", kid ? kid : "");
    return 0;
}

static int load_pem_files(keyset *ks, const char *list, char *err, size_t errlen)
{
    char *copy = strdup(list), *save = NULL;
    if (copy == NULL)
        return -1;
    int rc = 0;
    for (char *path = strtok_r(copy, ",", &save); path != NULL; path = strtok_r(NULL, ",", &save)) {
        while (*path == ' ')
            path++;
        if (*path == '\0')
            continue;
        FILE *f = fopen(path, "r");
        EVP_PKEY *pkey = f ? PEM_read_PUBKEY(f, NULL, NULL, NULL) : NULL;
        if (f != NULL)
            fclose(f);
        if (pkey == NULL || keyset_add(ks, pkey, NULL) != 0) {
            snprintf(err, errlen,
                     "QUEEN_JWT_PUBLIC_KEYS: '%s' is not a readable PEM public key of RSA (2048 bits or more), "
                     "P-256 or Ed25519",
                     path);
            rc = -1;
            break;
        }
    }
    free(copy);
    return rc;
}

/* A JWK member decoded from base64url; NULL when absent or malformed. */
static unsigned char *jwk_bytes(json_t *jwk, const char *name, size_t *len)
{
    const char *s = json_string_value(json_object_get(jwk, name));
    return s ? jwt_b64url_decode(s, strlen(s), len) : NULL;
}

static EVP_PKEY *pkey_from_params(const char *type, OSSL_PARAM_BLD *bld)
{
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY *pkey = NULL;
    if (params == NULL || ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *jwk_rsa(json_t *jwk)
{
    size_t nlen = 0, elen = 0;
    unsigned char *n = jwk_bytes(jwk, "n", &nlen), *e = jwk_bytes(jwk, "e", &elen);
    BIGNUM *bn_n = n ? BN_bin2bn(n, (int)nlen, NULL) : NULL, *bn_e = e ? BN_bin2bn(e, (int)elen, NULL) : NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bn_n && bn_e && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) == 1 &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e) == 1)
        pkey = pkey_from_params("RSA", bld);
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn_n);
    BN_free(bn_e);
    free(n);
    free(e);
    return pkey;
}

static EVP_PKEY *jwk_ec(json_t *jwk)
{
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    if (crv == NULL || strcmp(crv, "P-256") != 0)
        return NULL;
    size_t xlen = 0, ylen = 0;
    unsigned char *x = jwk_bytes(jwk, "x", &xlen), *y = jwk_bytes(jwk, "y", &ylen);
    EVP_PKEY *pkey = NULL;
    if (x && y && xlen == 32 && ylen == 32) {
        unsigned char point[65] = {0x04}; /* uncompressed: 04 || x || y */
        memcpy(point + 1, x, 32);
        memcpy(point + 33, y, 32);
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1 &&
            OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point) == 1)
            pkey = pkey_from_params("EC", bld);
        OSSL_PARAM_BLD_free(bld);
    }
    free(x);
    free(y);
    return pkey;
}

static EVP_PKEY *jwk_okp(json_t *jwk)
{
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    if (crv == NULL || strcmp(crv, "Ed25519") != 0)
        return NULL;
    size_t xlen = 0;
    unsigned char *x = jwk_bytes(jwk, "x", &xlen);
    EVP_PKEY *pkey = x && xlen == 32 ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, xlen) : NULL;
    free(x);
    return pkey;
}

/* Parses a JWKS document. Keys of other types (oct secrets included: a
 * shared secret has no business in a published set) and keys marked for
 * encryption are skipped; a document with no usable key is refused. */
static keyset *jwks_parse(const char *text, size_t len)
{
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *keys = json_object_get(doc, "keys");
    keyset *ks = calloc(1, sizeof *ks);
    if (ks == NULL || !json_is_array(keys)) {
        json_decref(doc);
        free(ks);
        return NULL;
    }
    size_t i;
    json_t *jwk;
    json_array_foreach(keys, i, jwk)
    {
        const char *kty = json_string_value(json_object_get(jwk, "kty"));
        const char *use = json_string_value(json_object_get(jwk, "use"));
        const char *kid = json_string_value(json_object_get(jwk, "kid"));
        if (kty == NULL || (use != NULL && strcmp(use, "sig") != 0))
            continue;
        EVP_PKEY *pkey = strcmp(kty, "RSA") == 0  ? jwk_rsa(jwk)
                         : strcmp(kty, "EC") == 0 ? jwk_ec(jwk)
                         : strcmp(kty, "OKP") == 0 ? jwk_okp(jwk)
                                                   : NULL;
        if (pkey != NULL)
            keyset_add(ks, pkey, kid);
    }
    json_decref(doc);
    if (ks->n == 0) {
        keyset_release(ks);
        return NULL;
    }
    return ks;
}

typedef struct fetch_buf {
    char *data;
    size_t len;
    bool too_big;
} fetch_buf;

static size_t fetch_append(char *ptr, size_t size, size_t n, void *userdata)
{
    fetch_buf *b = userdata;
    size_t add = size * n;
    if (b->len + add > JWKS_MAX_BYTES) {
        b->too_big = true;
        return 0;
    }
    char *grown = realloc(b->data, b->len + add + 1);
    if (grown == NULL)
        return 0;
    b->data = grown;
    memcpy(b->data + b->len, ptr, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

static bool is_url(const char *source)
{
    return strncmp(source, "https://", 8) == 0;
}

/* Reads the JWKS source: a file, or an https URL (certificate verified,
 * redirects not followed, bounded in time and size). */
/* libcurl's progress callback: a fetch in progress ends when the keyring
 * is being freed, instead of holding the broker's stop for its timeout. */
static int fetch_abandoned(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return clientp != NULL && atomic_load((atomic_bool *)clientp) ? 1 : 0;
}

static keyset *jwks_fetch(const char *source, const char *ca, atomic_bool *stop, char *why, size_t whylen)
{
    fetch_buf b = {0};
    if (is_url(source)) {
        CURL *c = curl_easy_init();
        if (c == NULL) {
            snprintf(why, whylen, "cannot start libcurl");
            return NULL;
        }
        curl_easy_setopt(c, CURLOPT_URL, source);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
        curl_easy_setopt(c, CURLOPT_TIMEOUT, JWKS_FETCH_TIMEOUT_S);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, fetch_abandoned);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, stop);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fetch_append);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        if (ca != NULL && ca[0] != '\0')
            curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        CURLcode rc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        if (rc != CURLE_OK || status != 200) {
            snprintf(why, whylen, "fetching the JWKS URL failed (%s, HTTP %ld)",
                     rc != CURLE_OK ? curl_easy_strerror(rc) : "answered", status);
            free(b.data);
            return NULL;
        }
    } else {
        FILE *f = fopen(source, "rb");
        if (f == NULL) {
            snprintf(why, whylen, "the JWKS file cannot be opened");
            return NULL;
        }
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
            if (fetch_append(chunk, 1, n, &b) != n)
                break;
        fclose(f);
    }
    keyset *ks = b.too_big || b.data == NULL ? NULL : jwks_parse(b.data, b.len);
    if (ks == NULL)
        snprintf(why, whylen, "the JWKS holds no usable signing key (RSA, P-256 or Ed25519) or is not a JWKS");
    free(b.data);
    return ks;
}

/* Asks the refresher for a fetch when one is due (the set is stale or
 * missing, or a token named a kid it does not hold) and none was asked for
 * in the last min_refetch_s; never waits for it. Returns the current set
 * with a reference, or NULL: the caller decides with what is loaded now, so
 * a token whose key is still on its way is refused at once. */
static keyset *jwks_acquire(jwt_keyring *kr, time_t now, bool unknown_kid)
{
    pthread_mutex_lock(&kr->mu);
    bool stale = kr->jwks == NULL || now - kr->jwks_loaded >= kr->refresh_s;
    bool due = kr->refresher_running && !kr->fetching && !kr->wanted && now - kr->jwks_tried >= kr->min_refetch_s &&
               (stale || unknown_kid);
    if (due) {
        kr->wanted = true;
        kr->wanted_at = now;
        kr->jwks_tried = now;
        pthread_cond_signal(&kr->cv);
    }
    keyset *ks = kr->jwks;
    if (ks != NULL)
        ks->refs++;
    pthread_mutex_unlock(&kr->mu);
    return ks;
}

/* The refresher's loop: one fetch per request for one, the last good set
 * kept when a fetch fails. */
static void *jwks_refresher(void *arg)
{
    jwt_keyring *kr = arg;
    pthread_mutex_lock(&kr->mu);
    for (;;) {
        while (!kr->wanted && !atomic_load(&kr->stopping))
            pthread_cond_wait(&kr->cv, &kr->mu);
        if (atomic_load(&kr->stopping))
            break;
        kr->wanted = false;
        kr->fetching = true;
        time_t asked_at = kr->wanted_at;
        pthread_mutex_unlock(&kr->mu);
        char why[160];
        keyset *fresh = jwks_fetch(kr->jwks_source, kr->jwks_ca, &kr->stopping, why, sizeof why);
        if (fresh == NULL && !atomic_load(&kr->stopping))
            log_warn("auth: JWKS refresh failed: %s; keeping the keys loaded before", why);
        pthread_mutex_lock(&kr->mu);
        kr->fetching = false;
        if (fresh != NULL) {
            fresh->refs = 1; /* the keyring's */
            keyset *old = kr->jwks;
            kr->jwks = fresh;
            kr->jwks_loaded = asked_at;
            if (old != NULL && --old->refs == 0)
                keyset_release(old);
        }
    }
    pthread_mutex_unlock(&kr->mu);
    return NULL;
}

static void jwks_put(jwt_keyring *kr, keyset *ks)
{
    if (ks == NULL)
        return;
    pthread_mutex_lock(&kr->mu);
    bool last = --ks->refs == 0;
    pthread_mutex_unlock(&kr->mu);
    if (last)
        keyset_release(ks);
}

jwt_keyring *jwt_keyring_new(const char *secret, const char *pem_files, const char *jwks, const char *jwks_ca,
                             int refresh_s, char *err, size_t errlen)
{
    jwt_keyring *kr = calloc(1, sizeof *kr);
    if (kr == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&kr->mu, NULL);
    pthread_cond_init(&kr->cv, NULL);
    atomic_init(&kr->stopping, false);
    kr->refresh_s = refresh_s > 0 ? refresh_s : 300;
    kr->min_refetch_s = JWT_JWKS_MIN_REFETCH_S;
    if (secret != NULL && secret[0] != '\0') {
        kr->secret_len = strlen(secret);
        kr->secret = (unsigned char *)strdup(secret);
    }
    if (pem_files != NULL && pem_files[0] != '\0' && load_pem_files(&kr->pem, pem_files, err, errlen) != 0) {
        jwt_keyring_free(kr);
        return NULL;
    }
    if (jwks != NULL && jwks[0] != '\0') {
        kr->jwks_source = strdup(jwks);
        kr->jwks_ca = jwks_ca && jwks_ca[0] ? strdup(jwks_ca) : NULL;
        char why[160];
        /* At start, before any event loop serves: the broker comes up with
         * its keys when the issuer answers. */
        keyset *ks = jwks_fetch(jwks, kr->jwks_ca, NULL, why, sizeof why);
        if (ks == NULL && !is_url(jwks)) { /* a file is ours to get right; a URL may be down for now */
            snprintf(err, errlen, "QUEEN_JWT_JWKS: %s", why);
            jwt_keyring_free(kr);
            return NULL;
        }
        if (ks == NULL) {
            log_warn("auth: %s; tokens are refused until it loads (retried every %d s)", why, JWT_JWKS_MIN_REFETCH_S);
        } else {
            ks->refs = 1;
            kr->jwks = ks;
        }
        time(&kr->jwks_tried);
        kr->jwks_loaded = kr->jwks_tried;
        if (pthread_create(&kr->refresher, NULL, jwks_refresher, kr) != 0) {
            snprintf(err, errlen, "cannot start the JWKS refresher thread");
            jwt_keyring_free(kr);
            return NULL;
        }
        kr->refresher_running = true;
    }
    if (kr->secret == NULL && kr->pem.n == 0 && kr->jwks_source == NULL) {
        snprintf(err, errlen, "QUEEN_AUTH=jwt needs a key: QUEEN_JWT_SECRET, QUEEN_JWT_PUBLIC_KEYS or QUEEN_JWT_JWKS");
        jwt_keyring_free(kr);
        return NULL;
    }
    return kr;
}

void jwt_keyring_set_min_refetch_s(jwt_keyring *kr, int seconds)
{
    pthread_mutex_lock(&kr->mu);
    kr->min_refetch_s = seconds > 0 ? seconds : 1;
    pthread_mutex_unlock(&kr->mu);
}

void jwt_keyring_free(jwt_keyring *kr)
{
    if (kr == NULL)
        return;
    if (kr->refresher_running) {
        pthread_mutex_lock(&kr->mu);
        atomic_store(&kr->stopping, true);
        pthread_cond_signal(&kr->cv);
        pthread_mutex_unlock(&kr->mu);
        pthread_join(kr->refresher, NULL);
    }
    if (kr->secret != NULL)
        OPENSSL_cleanse(kr->secret, kr->secret_len);
    free(kr->secret);
    keyset_clear(&kr->pem);
    if (kr->jwks != NULL && --kr->jwks->refs == 0)
        keyset_release(kr->jwks);
    free(kr->jwks_source);
    free(kr->jwks_ca);
    pthread_cond_destroy(&kr->cv);
    pthread_mutex_destroy(&kr->mu);
    free(kr);
}

/* ---- verification ------------------------------------------------------------- */

static bool hs256_ok(const jwt_keyring *kr, const unsigned char *input, size_t input_len, const unsigned char *sig,
                     size_t sig_len)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned mac_len = 0;
    if (HMAC(EVP_sha256(), kr->secret, (int)kr->secret_len, input, input_len, mac, &mac_len) == NULL)
        return false;
    return sig_len == mac_len && CRYPTO_memcmp(mac, sig, mac_len) == 0;
}

/* JWS carries an ECDSA signature as r || s (32 bytes each); EVP wants DER. */
static unsigned char *es256_der(const unsigned char *sig, size_t sig_len, size_t *der_len)
{
    if (sig_len != 64)
        return NULL;
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
    unsigned char *der = NULL;
    if (es != NULL && r != NULL && s != NULL && ECDSA_SIG_set0(es, r, s) == 1) {
        r = s = NULL; /* owned by es */
        int n = i2d_ECDSA_SIG(es, &der);
        if (n <= 0)
            der = NULL;
        else
            *der_len = (size_t)n;
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return der;
}

static bool signature_ok(const pub_key *k, const unsigned char *input, size_t input_len, const unsigned char *sig,
                         size_t sig_len)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL)
        return false;
    bool ok = false;
    const EVP_MD *md = k->type == KEY_ED25519 ? NULL : EVP_sha256();
    if (EVP_DigestVerifyInit(ctx, NULL, md, NULL, k->pkey) == 1) {
        if (k->type == KEY_EC_P256) {
            size_t der_len = 0;
            unsigned char *der = es256_der(sig, sig_len, &der_len);
            ok = der != NULL && EVP_DigestVerify(ctx, der, der_len, input, input_len) == 1;
            OPENSSL_free(der);
        } else {
            ok = EVP_DigestVerify(ctx, sig, sig_len, input, input_len) == 1;
        }
    }
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* Tries the keys of the algorithm's type in ks: those whose kid matches
 * when the token names one (a key without a kid matches any). */
static jwt_fault try_keys(const keyset *ks, key_type type, const char *kid, const unsigned char *input,
                          size_t input_len, const unsigned char *sig, size_t sig_len, bool *kid_seen)
{
    jwt_fault verdict = JWT_NO_KEY;
    for (size_t i = 0; ks != NULL && i < ks->n; i++) {
        const pub_key *k = &ks->keys[i];
        if (k->type != type)
            continue;
        if (kid != NULL && k->kid[0] != '\0' && strcmp(kid, k->kid) != 0)
            continue;
        if (kid != NULL && k->kid[0] != '\0')
            *kid_seen = true;
        if (signature_ok(k, input, input_len, sig, sig_len))
            return JWT_OK;
        verdict = JWT_BAD_SIGNATURE;
    }
    return verdict;
}

static json_t *decode_object(const char *s, size_t len)
{
    size_t n = 0;
    unsigned char *raw = jwt_b64url_decode(s, len, &n);
    if (raw == NULL)
        return NULL;
    json_error_t jerr;
    json_t *v = json_loadb((const char *)raw, n, JSON_REJECT_DUPLICATES, &jerr);
    free(raw);
    if (v != NULL && !json_is_object(v)) {
        json_decref(v);
        return NULL;
    }
    return v;
}

/* A NumericDate claim: absent (true, *present false), a number (true), or
 * anything else (false: malformed). */
static bool numeric_date(json_t *claims, const char *name, bool *present, double *value)
{
    json_t *v = json_object_get(claims, name);
    *present = v != NULL;
    if (v == NULL)
        return true;
    if (!json_is_number(v))
        return false;
    *value = json_number_value(v);
    return true;
}

static bool audience_ok(json_t *claims, const char *want)
{
    json_t *aud = json_object_get(claims, "aud");
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    size_t i;
    json_t *one;
    json_array_foreach(aud, i, one)
    {
        if (json_is_string(one) && strcmp(json_string_value(one), want) == 0)
            return true;
    }
    return false;
}

static jwt_fault check_claims(json_t *claims, const jwt_rules *rules, time_t now)
{
    bool has_exp = false, has_nbf = false;
    double exp = 0, nbf = 0;
    if (!numeric_date(claims, "exp", &has_exp, &exp) || !numeric_date(claims, "nbf", &has_nbf, &nbf))
        return JWT_MALFORMED;
    int leeway = rules && rules->leeway_s > 0 ? rules->leeway_s : 0;
    if (has_exp && (double)now >= exp + leeway)
        return JWT_EXPIRED;
    if (has_nbf && (double)now + leeway < nbf)
        return JWT_NOT_YET_VALID;
    if (rules && rules->issuer && rules->issuer[0]) {
        const char *iss = json_string_value(json_object_get(claims, "iss"));
        if (iss == NULL || strcmp(iss, rules->issuer) != 0)
            return JWT_BAD_ISSUER;
    }
    if (rules && rules->audience && rules->audience[0] && !audience_ok(claims, rules->audience))
        return JWT_BAD_AUDIENCE;
    return JWT_OK;
}

jwt_fault jwt_verify(jwt_keyring *kr, const char *token, size_t len, const jwt_rules *rules, time_t now,
                     json_t **claims)
{
    *claims = NULL;
    if (kr == NULL || token == NULL || len == 0 || len > JWT_MAX_TOKEN_BYTES)
        return JWT_MALFORMED;
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (dot1 == NULL || dot2 == NULL || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)) != NULL)
        return JWT_MALFORMED;
    json_t *header = decode_object(token, (size_t)(dot1 - token));
    if (header == NULL)
        return JWT_MALFORMED;
    const char *alg = json_string_value(json_object_get(header, "alg"));
    json_t *kid_v = json_object_get(header, "kid");
    const char *kid = json_string_value(kid_v);
    jwt_fault verdict = JWT_OK;
    if (alg == NULL || (kid_v != NULL && kid == NULL)) {
        verdict = JWT_MALFORMED;
    } else if (json_object_get(header, "crit") != NULL) {
        /* An extension we do not understand must not be ignored (RFC 7515 4.1.11). */
        verdict = JWT_UNSUPPORTED_ALG;
    }
    size_t sig_len = 0;
    unsigned char *sig = NULL;
    json_t *payload = NULL;
    if (verdict == JWT_OK) {
        sig = jwt_b64url_decode(dot2 + 1, len - (size_t)(dot2 + 1 - token), &sig_len);
        payload = decode_object(dot1 + 1, (size_t)(dot2 - dot1 - 1));
        if (sig == NULL || payload == NULL)
            verdict = JWT_MALFORMED;
    }
    const unsigned char *input = (const unsigned char *)token;
    size_t input_len = (size_t)(dot2 - token);
    if (verdict == JWT_OK) {
        /* Each algorithm names one key type: a public key is never an HMAC
         * secret, and "none" names no key at all. */
        if (strcmp(alg, "HS256") == 0) {
            verdict = kr->secret == NULL                              ? JWT_NO_KEY
                      : hs256_ok(kr, input, input_len, sig, sig_len) ? JWT_OK
                                                                      : JWT_BAD_SIGNATURE;
        } else {
            int type = strcmp(alg, "RS256") == 0   ? KEY_RSA
                       : strcmp(alg, "ES256") == 0 ? KEY_EC_P256
                       : strcmp(alg, "EdDSA") == 0 ? KEY_ED25519
                                                   : -1;
            if (type < 0) {
                verdict = JWT_UNSUPPORTED_ALG;
            } else {
                bool kid_seen = false;
                verdict = try_keys(&kr->pem, (key_type)type, kid, input, input_len, sig, sig_len, &kid_seen);
                if (verdict != JWT_OK && kr->jwks_source != NULL) {
                    keyset *ks = jwks_acquire(kr, now, false);
                    jwt_fault v = try_keys(ks, (key_type)type, kid, input, input_len, sig, sig_len, &kid_seen);
                    if (v == JWT_NO_KEY && kid != NULL && !kid_seen) {
                        /* A kid we do not know: the issuer may have rotated.
                         * Refused now; the refresher fetches meanwhile. */
                        jwks_put(kr, ks);
                        ks = jwks_acquire(kr, now, true);
                        v = try_keys(ks, (key_type)type, kid, input, input_len, sig, sig_len, &kid_seen);
                    }
                    jwks_put(kr, ks);
                    if (v == JWT_OK || verdict == JWT_NO_KEY)
                        verdict = v;
                }
            }
        }
    }
    if (verdict == JWT_OK)
        verdict = check_claims(payload, rules, now);
    free(sig);
    json_decref(header);
    if (verdict == JWT_OK)
        *claims = payload;
    else
        json_decref(payload);
    return verdict;
}
