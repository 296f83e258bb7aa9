/* origin: which browser requests the broker serves (docs/auth.md, "Browsers:
 * origins, hosts and content types"). A broker on loopback with
 * QUEEN_AUTH=off trusts whoever reaches its port, and a web page the
 * operator visits reaches it too: a cross-origin form or no-cors fetch
 * (cross-site request forgery), or the page's own name re-pointed at
 * 127.0.0.1 (DNS rebinding). Three rules close both, before any route runs:
 *  - Host (QUEEN_AUTH=off only): an IP address, localhost, QUEEN_BIND or a
 *    name in QUEEN_ALLOWED_HOSTS. A rebinding page can only send its own
 *    name, and no attacker controls an address literal or localhost.
 *  - Origin: when present, the broker's own (the request's scheme, Host and
 *    port) or one of QUEEN_ALLOWED_ORIGINS. Without one, a Sec-Fetch-Site
 *    of cross-site or same-site (what browsers send for a no-cors GET, such
 *    as an image pointed at a pop) is refused the same way.
 *  - Content-Type: a request of any method but GET, HEAD and OPTIONS that
 *    carries a body must say application/json, which no form and no no-cors
 *    fetch can send (a bodyless one is left to the Origin rule: browsers
 *    always send Origin with such a request).
 * Non-browser clients send no Origin and no Sec-Fetch-Site, and every
 * client of this repository sends application/json with a body. */
#ifndef QUEEN_ORIGIN_H
#define QUEEN_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>



#include "http.h"

/* Checks QUEEN_ALLOWED_ORIGINS and QUEEN_ALLOWED_HOSTS: 0, or -1 with why
 * in err (naming the setting and the entry). */
int origin_check_settings(const queen_config *cfg, char *err, size_t errlen);

/* Whether the request's Host and Origin (or Sec-Fetch-Site) are refused;
 * res then holds the 403 (host_not_allowed, origin_not_allowed or
 * cross_site_request). auth_on: QUEEN_AUTH=jwt (the Host rule is off). */
bool origin_refused(const queen_config *cfg, bool auth_on, struct conn *c, http_family fam,
                    http_response *res);

/* Whether a request with a body (has_body) is refused for its content type:
 * any method but GET, HEAD and OPTIONS must send Content-Type
 * application/json (parameters such as charset allowed; repeated, every one
 * says so). res then holds
 * the 415 unsupported_media_type / content_type_not_json. */
bool origin_content_type_refused(struct conn *c, const char *method, bool has_body, http_response *res);

/* The pure rules, for tests: whether host (a Host header's value) passes the
 * QUEEN_AUTH=off rule, and whether origin (an Origin header's value) is the
 * broker's own for that Host (scheme https when tls) or an allowed one. */
bool origin_host_allowed(const queen_config *cfg, const char *host, size_t len);
bool origin_origin_allowed(const queen_config *cfg, bool tls, const char *host, size_t host_len, const char *origin,
                           size_t origin_len);

#endif
