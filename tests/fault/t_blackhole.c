/*
 * t_blackhole.c - connects to a blackholed peer (blackhole.h: its packets
 * are dropped, nothing ever answers) on the network transports.  With a
 * timeout the attempt ends with CCI_ETIMEDOUT at that timeout (plus
 * F_SLACK_MS); without one (NULL: no limit, api/cci.h) it stays pending
 * without a false result and without holding up teardown.  Either way the
 * endpoint keeps working: a connect to a live peer succeeds after (or
 * during) the blackholed one.
 */
#include "fault.h"

#include "blackhole.h"
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#define BH_TIMEOUT_MS 1000u
#define TEARDOWN_LIMIT_MS 5000u

static int clear_failure(int st)
{
	return st == CCI_ETIMEDOUT || st == CCI_ECONNREFUSED || st == CCI_EADDRNOTAVAIL ||
	       st == CCI_ERR_DISCONNECTED;
}

/* sm and ofi over shm have no network path to drop; verbs has no device here. */
static const char *why_not_network(void)
{
	const char *t = h_transport_name();

	if (strcmp(t, "tcp") == 0 || strcmp(t, "sock") == 0 || strcmp(t, "ofi") == 0)
		return NULL;
	return "the transport has no network path (shared memory or no IP device)";
}

/*
 * Point CCI_CONFIG at a copy of the run's configuration (its transport,
 * progress mode and provider kept) whose device binds F_BH_LOCAL (tcp,
 * sock) or F_BH_IFACE (ofi) instead of its own address, in a memfd that
 * this process and its peers read as /proc/self/fd/N.  The run's files
 * have one section: the address key goes at its end.  Returns NULL or
 * why this run cannot use the blackhole (ofi over another provider than
 * tcp).
 */
static const char *bind_blackhole_side(void)
{
	const char *t = h_transport_name(), *path = getenv("CCI_CONFIG");
	int ofi = strcmp(t, "ofi") == 0, fd = memfd_create("cci-blackhole.ini", 0);
	char line[512], env[64], provider[64] = "";
	FILE *in, *out;

	REQUIRE(fd >= 0);
	out = fdopen(dup(fd), "w");
	REQUIRE(out != NULL);
	in = path ? fopen(path, "r") : NULL;
	REQUIRE(!path || CHECKF(in != NULL, "cannot read CCI_CONFIG %s", path));
	if (!in)
		fprintf(out, "[blackhole]\ntransport = %s\n", t);
	while (in && fgets(line, sizeof(line), in)) {
		char key[64] = "", val[64] = "";

		if (sscanf(line, " %63[a-z_] = %63s", key, val) >= 1) {
			if (!strcmp(key, "ip") || !strcmp(key, "interface") || !strcmp(key, "iface"))
				continue;
			if (!strcmp(key, "provider"))
				snprintf(provider, sizeof(provider), "%s", val);
		}
		fputs(line, out);
	}
	if (in)
		fclose(in);
	fprintf(out, ofi ? "iface = " F_BH_IFACE "\n" : "ip = " F_BH_LOCAL "\n");
	REQUIRE(fclose(out) == 0);
	if (ofi && strcmp(provider, "tcp") != 0)
		return "ofi reaches a network address only over provider tcp (this run: shared memory or another provider)";
	snprintf(env, sizeof(env), "/proc/self/fd/%d", fd);
	setenv("CCI_CONFIG", env, 1);
	return NULL;
}

/* The blackholed twin of a URI of this side: F_BH_LOCAL replaced. */
static void blackhole_uri(const char *own, char *out, size_t cap)
{
	const char *at = strstr(own, F_BH_LOCAL);

	REQUIRE(CHECKF(at != NULL, "the endpoint's URI %s does not name " F_BH_LOCAL, own));
	snprintf(out, cap, "%.*s%s%s", (int)(at - own), own, F_BH_PEER, at + strlen(F_BH_LOCAL));
}

/* A connect, a message and a disconnect with the live server. */
static void live_peer_works(cci_endpoint_t *ep, struct srv *s)
{
	cci_connection_t *c = h_connect(ep, s->uri, CCI_CONN_ATTR_RO, NULL, 0, s);
	cci_event_t *ev;

	CHECK_RC(cci_send(c, "after the blackhole", 19, h_ctx(0), 0), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_SEND, 10000);
	if (ev) {
		CHECK_RC(ev->send.status, CCI_SUCCESS);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
}

/*
 * Everything before the connect: the blackhole, the configuration, the
 * live server and this process's endpoint.  uri gets the blackholed
 * address.
 */
static cci_endpoint_t *set_up(struct f_blackhole *bh, struct srv *s, char *uri, size_t cap)
{
	const char *why = why_not_network();
	struct srv_opts o = { 0 };
	cci_endpoint_t *ep;
	char *own;

	if (why)
		h_skip("%s: %s", h_transport_name(), why);
	why = f_blackhole_make(bh);
	if (why)
		h_skip("no blackholed peer here: %s", why);
	why = bind_blackhole_side();
	if (why)
		h_skip("%s", why);
	srv_start(s, &o);
	ep = h_endpoint(h_setup(), NULL);
	own = h_uri(ep);
	blackhole_uri(own, uri, cap);
	free(own);
	return ep;
}

static void timed_out(void)
{
	struct timeval tv = { .tv_sec = BH_TIMEOUT_MS / 1000,
	                      .tv_usec = (BH_TIMEOUT_MS % 1000) * 1000 };
	struct f_blackhole bh;
	struct srv s;
	char uri[256];
	cci_endpoint_t *ep = set_up(&bh, &s, uri, sizeof(uri));
	long long drops = f_blackhole_drops(&bh);
	cci_event_t *ev;
	uint64_t t0, ms;

	t0 = h_now_ms();
	REQUIRE_RC(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, uri, 0, &tv), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, BH_TIMEOUT_MS + F_SLACK_MS);
	ms = h_now_ms() - t0;
	REQUIRE(CHECKF(ev != NULL, "no CONNECT event for the blackholed %s within %u ms", uri,
	               BH_TIMEOUT_MS + F_SLACK_MS));
	CHECKF(ev->connect.status == CCI_ETIMEDOUT, "the connect to the blackholed %s ended "
	       "with %s", uri, h_status_name(ev->connect.status));
	CHECK(ev->connect.context == uri);
	CHECK(ev->connect.connection == NULL);
	CHECKF(ms >= BH_TIMEOUT_MS * 9 / 10, "the 1 s connect timeout fired after %llu ms",
	       (unsigned long long)ms);
	h_note("a blackholed peer (%s), 1 s timeout: %s after %llu ms", uri,
	       h_status_name(ev->connect.status), (unsigned long long)ms);
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	/* The attempt did go out (and was dropped), it did not fail locally. */
	CHECKF(f_blackhole_drops(&bh) > drops, "the peer namespace saw no packet of the connect");

	live_peer_works(ep, &s);
	srv_stop(&s, NULL);
	h_teardown(ep);
	f_blackhole_end(&bh);
}

static void no_limit(void)
{
	/* 3 s by default; CCI_FAULT_BLACKHOLE_WAIT_MS=150000 sees tcp's kernel
	 * give up (tcp_syn_retries 6: about 130 s).  Within the test's limit. */
	const unsigned wait_ms = (unsigned)h_env_count("CCI_FAULT_BLACKHOLE_WAIT_MS", 3000);
	struct f_blackhole bh;
	struct srv s;
	char uri[256];
	cci_endpoint_t *ep = set_up(&bh, &s, uri, sizeof(uri));
	cci_event_t *ev = NULL;
	uint64_t t0, ms;

	t0 = h_now_ms();
	REQUIRE_RC(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, uri, 0, NULL), CCI_SUCCESS);
	/* The endpoint keeps working beside the pending attempt (done first:
	 * the server does not wait for long waits). */
	live_peer_works(ep, &s);
	srv_stop(&s, NULL);
	/* No limit: the transport may still give up on its own (tcp when the
	 * kernel's SYN retries run out), but only with a failure. */
	while (!ev && h_now_ms() - t0 < wait_ms) {
		int rc = h_poll_event(ep, &ev, (unsigned)(wait_ms - (h_now_ms() - t0)));

		if (rc != CCI_SUCCESS)
			break;
		if (ev->type != CCI_EVENT_CONNECT) {
			CHECKF(0, "unexpected %s event", cci_event_type_str(ev->type));
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
			ev = NULL;
		}
	}
	ms = h_now_ms() - t0;
	if (ev) {
		CHECKF(clear_failure(ev->connect.status), "the connect to the blackholed %s "
		       "without a timeout ended with %s", uri, h_status_name(ev->connect.status));
		CHECK(ev->connect.context == uri);
		h_note("a blackholed peer (%s), no timeout: %s after %llu ms", uri,
		       h_status_name(ev->connect.status), (unsigned long long)ms);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	} else {
		h_note("a blackholed peer (%s), no timeout: still pending after %llu ms "
		       "(no limit)", uri, (unsigned long long)ms);
	}

	/* The attempt does not hold up teardown. */
	t0 = h_now_ms();
	h_teardown(ep);
	ms = h_now_ms() - t0;
	CHECKF(ms < TEARDOWN_LIMIT_MS, "destroy and finalize with a blackholed connect pending "
	       "took %llu ms", (unsigned long long)ms);
	h_note("teardown with the attempt pending: %llu ms", (unsigned long long)ms);
	f_blackhole_end(&bh);
}

const struct h_test t_blackhole_tests[] = {
	{ "a connect to a blackholed peer ends with CCI_ETIMEDOUT at its 1 s timeout, and "
	  "the endpoint then connects to a live peer", timed_out, H_NEEDS_DEVICE, 40 },
	{ "a connect to a blackholed peer without a timeout gives no false result, and "
	  "neither stops a live connect nor holds up teardown", no_limit, H_NEEDS_DEVICE, 300 },
};
const size_t t_blackhole_count = sizeof(t_blackhole_tests) / sizeof(t_blackhole_tests[0]);
