/*
 * uri_fuzz.c - libFuzzer harness for uri_split_scheme() and
 * uri_parse_host_port().
 *
 * The input is made a string; both functions run on it, and
 * uri_parse_host_port() also on what follows "://".  Results are checked
 * against the promises of uri.h.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "uri.h"

static void check_scheme(const char *uri, const char *scheme, const char *rest)
{
	size_t n = strlen(scheme);

	if (n == 0 || memcmp(uri, scheme, n) != 0 || rest != uri + n + 3)
		abort();
}

static void check_host_port(const char *in, const char *host)
{
	size_t n = strlen(host);

	/* The host is the input's prefix, or its bracketed start. */
	if (n == 0)
		abort();
	if (in[0] == '[' ? memcmp(in + 1, host, n) != 0 || in[n + 1] != ']'
	                 : memcmp(in, host, n) != 0)
		abort();
}

static void run_host_port(const char *in, size_t hostlen)
{
	char host[300];
	uint16_t port;

	if (uri_parse_host_port(in, host, hostlen, &port) == 0)
		check_host_port(in, host);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	char scheme[16];
	const char *rest;

	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* The first byte also picks a small buffer size, to probe the
	 * "too long" paths. */
	run_host_port(s, size ? (size_t)data[0] % 300 + 1 : 1);
	if (uri_split_scheme(s, scheme, size ? (size_t)data[0] % 16 + 1 : 16, &rest) == 0) {
		check_scheme(s, scheme, rest);
		run_host_port(rest, sizeof(scheme));
		run_host_port(rest, 300);
	}
	free(s);
	return 0;
}
