/*
 * uri.c - parsing of transport URIs (see uri.h).
 *
 * URIs come from peers and configuration files, so every byte is checked:
 * what is not a well-formed scheme, host or port is CCI_EINVAL, and the
 * output parameters are written only on success.
 */
#include <arpa/inet.h>
#include <string.h>

#include "cci.h"
#include "uri.h"

static int is_lower(char c)
{
	return c >= 'a' && c <= 'z';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int is_alnum(char c)
{
	return is_lower(c) || is_digit(c) || (c >= 'A' && c <= 'Z');
}

static int is_scheme_char(char c)
{
	return is_lower(c) || is_digit(c) || c == '+' || c == '-' || c == '.';
}

int uri_split_scheme(const char *uri, char *scheme, size_t schemelen, const char **rest)
{
	size_t n = 0;

	if (uri == NULL || scheme == NULL || schemelen == 0)
		return CCI_EINVAL;
	if (!is_lower(uri[0]))
		return CCI_EINVAL;
	while (is_scheme_char(uri[n]))
		n++;
	if (strncmp(uri + n, "://", 3) != 0 || n >= schemelen)
		return CCI_EINVAL;
	memcpy(scheme, uri, n);
	scheme[n] = '\0';
	if (rest != NULL)
		*rest = uri + n + 3;
	return 0;
}

int uri_parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (*s == '\0')
		return CCI_EINVAL;
	for (; *s != '\0'; s++) {
		if (!is_digit(*s))
			return CCI_EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return CCI_EINVAL;
	}
	*port = (uint16_t)v;
	return 0;
}

/* An IPv6 address with an optional zone ("fe80::1%eth0"), as found
 * between brackets; len bytes at s. */
static int valid_ipv6(const char *s, size_t len)
{
	char addr[INET6_ADDRSTRLEN];
	unsigned char bin[16];
	const char *zone = memchr(s, '%', len);
	size_t alen = zone ? (size_t)(zone - s) : len;
	size_t i;

	if (alen == 0 || alen >= sizeof(addr))
		return 0;
	memcpy(addr, s, alen);
	addr[alen] = '\0';
	if (inet_pton(AF_INET6, addr, bin) != 1)
		return 0;
	if (zone == NULL)
		return 1;
	if (zone + 1 == s + len)
		return 0;
	for (i = alen + 1; i < len; i++) {
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
			return 0;
	}
	return 1;
}

/* A host name or a dotted IPv4 address; len bytes at s.  Something made
 * only of digits and dots must be a real IPv4 address ("256.1.1.1" is not
 * a name either). */
static int valid_name_or_ipv4(const char *s, size_t len)
{
	char addr[INET_ADDRSTRLEN];
	unsigned char bin[4];
	int numeric = 1;
	size_t i;

	if (len == 0)
		return 0;
	for (i = 0; i < len; i++) {
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
			return 0;
		if (!is_digit(s[i]) && s[i] != '.')
			numeric = 0;
	}
	if (!numeric)
		return 1;
	if (len >= sizeof(addr))
		return 0;
	memcpy(addr, s, len);
	addr[len] = '\0';
	return inet_pton(AF_INET, addr, bin) == 1;
}

int uri_parse_host_port(const char *hostport, char *host, size_t hostlen, uint16_t *port)
{
	const char *h, *colon;
	size_t len;
	uint16_t p;

	if (hostport == NULL || host == NULL || hostlen == 0 || port == NULL)
		return CCI_EINVAL;
	if (hostport[0] == '[') {
		const char *close = strchr(hostport, ']');

		if (close == NULL)
			return CCI_EINVAL;
		h = hostport + 1;
		len = (size_t)(close - h);
		if (!valid_ipv6(h, len) || close[1] != ':')
			return CCI_EINVAL;
		colon = close + 1;
	} else {
		/* Unbracketed, a second ':' would be an ambiguous IPv6 address. */
		colon = strchr(hostport, ':');
		if (colon == NULL || strchr(colon + 1, ':') != NULL)
			return CCI_EINVAL;
		h = hostport;
		len = (size_t)(colon - h);
		if (!valid_name_or_ipv4(h, len))
			return CCI_EINVAL;
	}
	if (len >= hostlen || uri_parse_port(colon + 1, &p) != 0)
		return CCI_EINVAL;
	memcpy(host, h, len);
	host[len] = '\0';
	*port = p;
	return 0;
}
