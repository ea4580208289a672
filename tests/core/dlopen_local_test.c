/*
 * dlopen_local_test.c - the library works when it is loaded the way
 * language FFIs load it (Python's ctypes and cffi, and others): with
 * dlopen(RTLD_NOW | RTLD_LOCAL), so that nothing it defines is visible to
 * the plugins it loads in turn.  A plugin that imported a public cci_*
 * symbol would fail to load and its transport would vanish.
 *
 *   dlopen_local_test /path/to/libcci.so.2
 *
 * With CCI_CONFIG naming a tcp device on loopback: the tcp device must be
 * listed, and two endpoints of this process connect over it and exchange
 * a message.  Prints "N passed, N failed".
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cci.h" /* types only: every call goes through dlsym */

static struct {
	int (*init)(uint32_t, uint32_t, uint32_t *);
	int (*finalize)(void);
	int (*get_devices)(cci_device_t *const **);
	int (*create_endpoint)(cci_device_t *, int, cci_endpoint_t **, cci_os_handle_t *);
	int (*destroy_endpoint)(cci_endpoint_t *);
	int (*get_opt)(cci_opt_handle_t *, cci_opt_name_t, void *);
	int (*connect)(cci_endpoint_t *, const char *, const void *, uint32_t,
	               cci_conn_attribute_t, const void *, int, const struct timeval *);
	int (*accept)(cci_event_t *, const void *);
	int (*get_event)(cci_endpoint_t *, cci_event_t **);
	int (*return_event)(cci_event_t *);
	int (*send)(cci_connection_t *, const void *, uint32_t, const void *, int);
} api;

static int passed, failed;

static void check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	if (ok)
		passed++;
	else
		failed++;
}

static int bind_api(void *lib)
{
	struct { void **slot; const char *name; } syms[] = {
		{ (void **)&api.init, "cci_init" },
		{ (void **)&api.finalize, "cci_finalize" },
		{ (void **)&api.get_devices, "cci_get_devices" },
		{ (void **)&api.create_endpoint, "cci_create_endpoint" },
		{ (void **)&api.destroy_endpoint, "cci_destroy_endpoint" },
		{ (void **)&api.get_opt, "cci_get_opt" },
		{ (void **)&api.connect, "cci_connect" },
		{ (void **)&api.accept, "cci_accept" },
		{ (void **)&api.get_event, "cci_get_event" },
		{ (void **)&api.return_event, "cci_return_event" },
		{ (void **)&api.send, "cci_send" },
	};

	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(lib, syms[i].name);
		if (!*syms[i].slot) {
			fprintf(stderr, "dlsym %s: %s\n", syms[i].name, dlerror());
			return 0;
		}
	}
	return 1;
}

static cci_device_t *find_tcp_device(void)
{
	cci_device_t *const *devs = NULL;

	if (api.get_devices(&devs) != CCI_SUCCESS)
		return NULL;
	for (int i = 0; devs[i]; i++)
		if (strcmp(devs[i]->transport, "tcp") == 0)
			return devs[i];
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Poll both endpoints for 10 s at most: the server accepts, the client's
 * connection sends "hello", the server must receive it. */
static int exchange(cci_endpoint_t *server, cci_endpoint_t *client, const char *uri)
{
	cci_connection_t *conn = NULL;
	int received = 0;
	uint64_t stop = now_ms() + 10000;

	if (api.connect(client, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL) != CCI_SUCCESS)
		return 0;
	while (!received && now_ms() < stop) {
		cci_event_t *ev;

		if (api.get_event(server, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				api.accept(ev, NULL);
			else if (ev->type == CCI_EVENT_RECV)
				received = ev->recv.len == 5 && memcmp(ev->recv.ptr, "hello", 5) == 0;
			api.return_event(ev);
		}
		if (api.get_event(client, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS) {
				conn = ev->connect.connection;
				api.send(conn, "hello", 5, NULL, CCI_FLAG_SILENT);
			}
			api.return_event(ev);
		}
	}
	return received;
}

int main(int argc, char **argv)
{
	cci_endpoint_t *server = NULL, *client = NULL;
	cci_device_t *dev;
	uint32_t caps = 0;
	char *uri = NULL;
	void *lib;

	if (argc != 2) {
		fprintf(stderr, "usage: %s /path/to/libcci.so.2\n", argv[0]);
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	check(lib != NULL, "libcci opens with dlopen(RTLD_NOW | RTLD_LOCAL)");
	if (!lib) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		goto out;
	}
	check(bind_api(lib), "every call used here resolves with dlsym");
	if (failed)
		goto out;
	check(api.init(CCI_ABI_VERSION, 0, &caps) == CCI_SUCCESS, "cci_init succeeds");
	if (failed)
		goto out;
	dev = find_tcp_device();
	check(dev != NULL, "the tcp device of CCI_CONFIG is listed (its plugin loaded)");
	if (dev) {
		check(api.create_endpoint(dev, 0, &server, NULL) == CCI_SUCCESS &&
		      api.create_endpoint(dev, 0, &client, NULL) == CCI_SUCCESS &&
		      api.get_opt(server, CCI_OPT_ENDPT_URI, &uri) == CCI_SUCCESS,
		      "two tcp endpoints open");
		if (uri)
			check(exchange(server, client, uri), "a message crosses a tcp connection");
		free(uri);
		if (client)
			api.destroy_endpoint(client);
		if (server)
			api.destroy_endpoint(server);
	}
	check(api.finalize() == CCI_SUCCESS, "cci_finalize succeeds");
out:
	if (lib)
		dlclose(lib);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
