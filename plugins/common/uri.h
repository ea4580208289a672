/*
 * uri.h - parsing of transport URIs ("scheme://rest"), shared by plugins
 * and the core.  Pure functions: no allocation, no global state.
 */
#ifndef CCI_COMMON_URI_H
#define CCI_COMMON_URI_H

#include <stddef.h>
#include <stdint.h>

/*
 * Split "scheme://rest".  Copies the scheme (lower-case letters, digits,
 * '+', '-', '.'; starting with a letter; at most schemelen-1 bytes) into
 * scheme and points *rest just past "://".  Returns 0, or CCI_EINVAL when
 * uri is NULL, has no "://", an empty or invalid scheme, or one too long.
 */
int uri_split_scheme(const char *uri, char *scheme, size_t schemelen, const char **rest);

/*
 * Parse "host:port" where host is a name, a dotted IPv4 address or a
 * bracketed IPv6 address ("[::1]:5000"; the brackets are removed).
 * port is 0..65535 in decimal.  Nothing may follow the port.  Returns 0
 * or CCI_EINVAL (empty host, missing or bad port, host too long for
 * hostlen, unbalanced brackets).
 */
int uri_parse_host_port(const char *hostport, char *host, size_t hostlen, uint16_t *port);

/*
 * Parse a port: decimal 0..65535, digits only, nothing after them (the
 * "port" service of cci_create_endpoint_at).  Returns 0 or CCI_EINVAL.
 */
int uri_parse_port(const char *s, uint16_t *port);

#endif /* CCI_COMMON_URI_H */
