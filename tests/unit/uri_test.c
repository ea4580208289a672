/*
 * uri_test.c - unit tests of the transport URI parser (plugins/common/uri.h).
 */
#include <string.h>

#include <CUnit/Basic.h>

#include "cci.h"
#include "uri.h"
#include "unit_run.h"

/* Split uri; on success check the scheme and the rest. */
static void expect_split(const char *uri, const char *scheme, const char *rest)
{
	char s[16];
	const char *r = NULL;

	CU_ASSERT_EQUAL_FATAL(uri_split_scheme(uri, s, sizeof(s), &r), 0);
	CU_ASSERT_STRING_EQUAL(s, scheme);
	CU_ASSERT_PTR_EQUAL(r, uri + strlen(scheme) + 3);
	CU_ASSERT_STRING_EQUAL(r, rest);
}

/* uri must be rejected and the outputs left alone. */
static void expect_split_fails(const char *uri)
{
	char s[16] = "untouched";
	const char *r = "untouched";

	CU_ASSERT_EQUAL(uri_split_scheme(uri, s, sizeof(s), &r), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(s, "untouched");
	CU_ASSERT_STRING_EQUAL(r, "untouched");
}

static void expect_hp(const char *hostport, const char *host, unsigned port)
{
	char h[64];
	uint16_t p = 1;

	CU_ASSERT_EQUAL_FATAL(uri_parse_host_port(hostport, h, sizeof(h), &p), 0);
	CU_ASSERT_STRING_EQUAL(h, host);
	CU_ASSERT_EQUAL(p, port);
}

static void expect_hp_fails(const char *hostport)
{
	char h[64] = "untouched";
	uint16_t p = 4242;

	CU_ASSERT_EQUAL(uri_parse_host_port(hostport, h, sizeof(h), &p), CCI_EINVAL);
	CU_ASSERT_STRING_EQUAL(h, "untouched");
	CU_ASSERT_EQUAL(p, 4242);
}

static void test_api_schemes(void)
{
	expect_split("tcp://host:5000", "tcp", "host:5000");
	expect_split("sock://10.0.0.1:7", "sock", "10.0.0.1:7");
	expect_split("sm:///tmp/cci-sm-1000/123/0", "sm", "/tmp/cci-sm-1000/123/0");
	expect_split("verbs://[fe80::1]:1", "verbs", "[fe80::1]:1");
	expect_split("ofi://tcp/fi_addr", "ofi", "tcp/fi_addr");
}

static void test_scheme_chars(void)
{
	expect_split("a1+b-c.d://x", "a1+b-c.d", "x");
	expect_split("x://", "x", "");
}

static void test_missing_separator(void)
{
	expect_split_fails("tcp");
	expect_split_fails("tcp:");
	expect_split_fails("tcp:/host:1");
	expect_split_fails("tcp:host:1");
	expect_split_fails("tcp//host:1");
	expect_split_fails("");
}

static void test_bad_scheme(void)
{
	expect_split_fails("://host:1");
	expect_split_fails("1tcp://host:1");
	expect_split_fails("+tcp://host:1");
	expect_split_fails("TCP://host:1");
	expect_split_fails("tCp://host:1");
	expect_split_fails("t_p://host:1");
	expect_split_fails(" tcp://host:1");
	expect_split_fails("tcp ://host:1");
	expect_split_fails("t\xc3\xa9://host:1");
}

static void test_scheme_length(void)
{
	char s[4];
	const char *r;

	CU_ASSERT_EQUAL(uri_split_scheme("abc://x", s, sizeof(s), &r), 0);
	CU_ASSERT_STRING_EQUAL(s, "abc");
	CU_ASSERT_EQUAL(uri_split_scheme("abcd://x", s, sizeof(s), &r), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_split_scheme("a://x", s, 1, &r), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_split_scheme("a://x", s, 0, &r), CCI_EINVAL);
}

static void test_split_null(void)
{
	char s[8];
	const char *r;

	CU_ASSERT_EQUAL(uri_split_scheme(NULL, s, sizeof(s), &r), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_split_scheme("tcp://x:1", NULL, sizeof(s), &r), CCI_EINVAL);
	/* rest is optional: the call then only validates and copies. */
	CU_ASSERT_EQUAL(uri_split_scheme("tcp://x:1", s, sizeof(s), NULL), 0);
}

static void test_ipv4(void)
{
	expect_hp("127.0.0.1:5000", "127.0.0.1", 5000);
	expect_hp("0.0.0.0:0", "0.0.0.0", 0);
	expect_hp("255.255.255.255:65535", "255.255.255.255", 65535);
}

static void test_names(void)
{
	expect_hp("localhost:1", "localhost", 1);
	expect_hp("node-17.cluster.example.org:22", "node-17.cluster.example.org", 22);
	expect_hp("x_y:9", "x_y", 9);
	expect_hp("1host:9", "1host", 9);
}

static void test_ipv6(void)
{
	expect_hp("[::1]:5000", "::1", 5000);
	expect_hp("[::]:0", "::", 0);
	expect_hp("[2001:db8::a:b]:443", "2001:db8::a:b", 443);
	expect_hp("[::ffff:10.1.2.3]:80", "::ffff:10.1.2.3", 80);
	expect_hp("[fe80::1%eth0]:7", "fe80::1%eth0", 7);
}

static void test_port_range(void)
{
	expect_hp("h:0", "h", 0);
	expect_hp("h:65535", "h", 65535);
	expect_hp("h:00080", "h", 80);
	expect_hp_fails("h:65536");
	expect_hp_fails("h:99999");
	expect_hp_fails("h:18446744073709551617");
	expect_hp_fails("[::1]:65536");
}

static void test_bad_port_syntax(void)
{
	expect_hp_fails("h:-1");
	expect_hp_fails("h:+1");
	expect_hp_fails("h:");
	expect_hp_fails("h: 1");
	expect_hp_fails("h:0x10");
	expect_hp_fails("h:1e3");
	expect_hp_fails("[::1]:");
	expect_hp_fails("h:http");
}

static void test_trailing_junk(void)
{
	expect_hp_fails("h:1 ");
	expect_hp_fails("h:1/");
	expect_hp_fails("h:1a");
	expect_hp_fails("h:1:2");
	expect_hp_fails("h:1\n");
	expect_hp_fails("[::1]:1]");
	expect_hp_fails("[::1]:1/path");
}

static void test_missing_port(void)
{
	expect_hp_fails("h");
	expect_hp_fails("127.0.0.1");
	expect_hp_fails("[::1]");
	expect_hp_fails("[::1]5000");
	expect_hp_fails("");
}

static void test_empty_host(void)
{
	expect_hp_fails(":1");
	expect_hp_fails("[]:1");
	expect_hp_fails("[%eth0]:1");
}

static void test_unbalanced_brackets(void)
{
	expect_hp_fails("[::1:5000");
	expect_hp_fails("::1]:5000");
	expect_hp_fails("h]:1");
	expect_hp_fails("[h:1");
	expect_hp_fails("[[::1]]:1");
	expect_hp_fails("h[x]:1");
}

static void test_bad_hosts(void)
{
	expect_hp_fails("::1:5000");        /* IPv6 needs brackets */
	expect_hp_fails("256.1.1.1:1");
	expect_hp_fails("1.2.3:1");
	expect_hp_fails("1.2.3.4.5:1");
	expect_hp_fails("[1.2.3.4]:1");    /* brackets are for IPv6 only */
	expect_hp_fails("[gggg::1]:1");
	expect_hp_fails("[fe80::1%]:1");
	expect_hp_fails("[fe80::1%e/0]:1");
	expect_hp_fails("ho st:1");
	expect_hp_fails("h@x:1");
	expect_hp_fails("h/x:1");
	expect_hp_fails("h\xc3\xa9:1");
}

static void test_host_length(void)
{
	char h[4];
	uint16_t p;

	CU_ASSERT_EQUAL(uri_parse_host_port("abc:1", h, sizeof(h), &p), 0);
	CU_ASSERT_STRING_EQUAL(h, "abc");
	CU_ASSERT_EQUAL(uri_parse_host_port("abcd:1", h, sizeof(h), &p), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_parse_host_port("[::1]:1", h, sizeof(h), &p), 0);
	CU_ASSERT_STRING_EQUAL(h, "::1");
	CU_ASSERT_EQUAL(uri_parse_host_port("[::12]:1", h, sizeof(h), &p), CCI_EINVAL);
}

static void test_hp_null(void)
{
	char h[8];
	uint16_t p;

	CU_ASSERT_EQUAL(uri_parse_host_port(NULL, h, sizeof(h), &p), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_parse_host_port("h:1", NULL, sizeof(h), &p), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_parse_host_port("h:1", h, 0, &p), CCI_EINVAL);
	CU_ASSERT_EQUAL(uri_parse_host_port("h:1", h, sizeof(h), NULL), CCI_EINVAL);
}

static void test_whole_uri(void)
{
	char scheme[8], host[64];
	const char *rest;
	uint16_t port;

	CU_ASSERT_EQUAL_FATAL(uri_split_scheme("tcp://[2001:db8::1]:4000", scheme,
	                                       sizeof(scheme), &rest), 0);
	CU_ASSERT_EQUAL_FATAL(uri_parse_host_port(rest, host, sizeof(host), &port), 0);
	CU_ASSERT_STRING_EQUAL(scheme, "tcp");
	CU_ASSERT_STRING_EQUAL(host, "2001:db8::1");
	CU_ASSERT_EQUAL(port, 4000);
}

static const struct unit_test tests[] = {
	{ "every scheme of the API splits at ://", test_api_schemes },
	{ "a scheme may hold digits, + - and . after its first letter", test_scheme_chars },
	{ "a URI without :// is rejected", test_missing_separator },
	{ "an empty, upper-case or badly started scheme is rejected", test_bad_scheme },
	{ "a scheme too long for its buffer is rejected, an exact fit is not", test_scheme_length },
	{ "NULL arguments to uri_split_scheme are rejected", test_split_null },
	{ "dotted IPv4 host and port are parsed", test_ipv4 },
	{ "host names and port are parsed", test_names },
	{ "bracketed IPv6 is parsed without its brackets", test_ipv6 },
	{ "ports 0..65535 are accepted, 65536 and above rejected", test_port_range },
	{ "negative, empty, signed or non-decimal ports are rejected", test_bad_port_syntax },
	{ "anything after the port is rejected", test_trailing_junk },
	{ "a missing port or ':' is rejected", test_missing_port },
	{ "an empty host is rejected", test_empty_host },
	{ "unbalanced brackets are rejected", test_unbalanced_brackets },
	{ "invalid addresses and host characters are rejected", test_bad_hosts },
	{ "a host too long for its buffer is rejected, an exact fit is not", test_host_length },
	{ "NULL arguments to uri_parse_host_port are rejected", test_hp_null },
	{ "a whole tcp URI with IPv6 splits and parses", test_whole_uri },
};

int main(void)
{
	return UNIT_RUN("uri", tests);
}
