/*
 * ofi_test.c - the harness of the ofi transport tests and main().
 *
 * usage: ofi_test --provider NAME [substring]
 *
 * Exits 77 (skipped) with the reason when the provider is not on this
 * host, so "meson test" reports it as skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "exit_audit.h"
#include "ofi_test.h"

const char *ot_provider;

uint64_t ot_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void ot_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Tests that skipped themselves: listed at the end, and when every test
 * that ran did, the run exits 77 rather than reporting passes. */
static unsigned skips;

void ot_skip(const char *why)
{
	printf("\n    SKIP: %s\n", why);
	skips++;
}

int ot_cci_init(void)
{
	char path[64], text[160];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "/tmp/cci-ofitest-%d.ini", (int)getpid());
	/* Network tests stay on loopback: a tcp endpoint binds lo, not the
	 * host's first interface. */
	snprintf(text, sizeof(text), "[ofi-test]\ntransport = ofi\nprovider = %s\n%s", ot_provider,
	         strcmp(ot_provider, "tcp") == 0 ? "iface = lo\n" : "");
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		return CCI_ERROR;
	setenv("CCI_CONFIG", path, 1);
	setenv("CCI_CTP", "ofi", 1);
	rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });
	unlink(path);
	return rc;
}

cci_device_t *ot_init(void)
{
	cci_device_t *const *devs;
	int rc = ot_cci_init();

	CU_ASSERT_EQUAL(rc, CCI_SUCCESS);
	if (rc != CCI_SUCCESS || cci_get_devices(&devs) != CCI_SUCCESS || !devs[0])
		return NULL;
	CU_ASSERT(devs[0]->up);
	return devs[0]->up ? devs[0] : NULL;
}

void ot_fini(cci_endpoint_t *ep)
{
	if (ep)
		CU_ASSERT_EQUAL(cci_destroy_endpoint(ep), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_finalize(), CCI_SUCCESS);
}

cci_endpoint_t *ot_endpoint(cci_device_t *dev)
{
	cci_endpoint_t *ep = NULL;

	CU_ASSERT_EQUAL(cci_create_endpoint(dev, 0, &ep, NULL), CCI_SUCCESS);
	return ep;
}

cci_event_t *ot_wait(cci_endpoint_t *ep, cci_event_type_t type, unsigned ms)
{
	uint64_t stop = ot_now_ms() + ms;

	while (ot_now_ms() < stop) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == type)
			return ev;
		cci_return_event(ev);
	}
	return NULL;
}

/* One step of the server side of ot_pair; 1 once accepted. */
static int pair_server_step(cci_endpoint_t *b, cci_connection_t **cb)
{
	cci_event_t *ev;

	if (cci_get_event(b, &ev) != CCI_SUCCESS)
		return 0;
	if (ev->type == CCI_EVENT_CONNECT_REQUEST)
		CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
	if (ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS)
		*cb = ev->accept.connection;
	cci_return_event(ev);
	return *cb != NULL;
}

int ot_pair(cci_endpoint_t *a, cci_endpoint_t *b, cci_connection_t **ca,
            cci_connection_t **cb)
{
	uint64_t stop = ot_now_ms() + 10000;
	char *uri = NULL;
	int rc;

	*ca = *cb = NULL;
	if (cci_get_opt(b, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS)
		return -1;
	rc = cci_connect(a, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	free(uri);
	if (rc != CCI_SUCCESS)
		return -1;
	while ((!*ca || !*cb) && ot_now_ms() < stop) {
		cci_event_t *ev;
		pair_server_step(b, cb);
		if (!*ca && cci_get_event(a, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS)
				*ca = ev->connect.connection;
			cci_return_event(ev);
		}
	}
	return (*ca && *cb) ? 0 : -1;
}

int ot_send_status(cci_endpoint_t *ep, const void *ctx, unsigned ms)
{
	uint64_t stop = ot_now_ms() + ms;

	while (ot_now_ms() < stop) {
		cci_event_t *ev;
		int st;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type != CCI_EVENT_SEND || ev->send.context != ctx) {
			cci_return_event(ev);
			continue;
		}
		st = ev->send.status;
		cci_return_event(ev);
		return st;
	}
	return CCI_ETIMEDOUT;
}

/* 77 with the reason when the provider is missing. */
static int provider_check(void)
{
	struct fi_info *hints = fi_allocinfo(), *list = NULL;
	int rc;

	if (!hints || !(hints->fabric_attr->prov_name = strdup(ot_provider)))
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list);
	fi_freeinfo(hints);
	if (rc != 0) {
		printf("SKIP: libfabric provider %s is not available here (fi_getinfo: %s)\n",
		       ot_provider, fi_strerror(-rc));
		return 77;
	}
	fi_freeinfo(list);
	return 0;
}

int main(int argc, char **argv)
{
	const char *filter = NULL;
	unsigned failed, ran;
	int rc, exit_child = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--provider") == 0 && i + 1 < argc)
			ot_provider = argv[++i];
		else if (strcmp(argv[i], EXIT_AUDIT_CHILD_ARG) == 0)
			exit_child = 1;
		else
			filter = argv[i];
	}
	if (exit_child && ot_provider)
		return ot_exit_child();
	if (!ot_provider) {
		fprintf(stderr, "usage: %s --provider NAME [substring]\n", argv[0]);
		return 2;
	}
	rc = provider_check();
	if (rc != 0)
		return rc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_set_fail_on_inactive(CU_FALSE);
	if (ot_add_refuse_suite() != 0 || ot_add_rma_suite() != 0 || ot_add_hostile_suite() != 0 ||
	    ot_add_dead_suite() != 0 || ot_add_timeout_suite() != 0 || ot_add_exec_suite() != 0 ||
	    ot_add_exit_suite() != 0) {
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	for (CU_pSuite s = CU_get_registry()->pSuite; filter && s; s = s->pNext)
		for (CU_pTest t = s->pTest; t; t = t->pNext)
			CU_set_test_active(t, strstr(t->pName, filter) ? CU_TRUE : CU_FALSE);
	printf("ofi transport tests: provider %s\n", ot_provider);
	CU_basic_run_tests();
	failed = CU_get_number_of_tests_failed() + CU_get_number_of_failures();
	ran = CU_get_number_of_tests_run();
	CU_cleanup_registry();
	if (skips)
		printf("%u of %u test(s) skipped themselves (SKIP lines above)\n", skips, ran);
	if (!failed && skips == ran)
		return 77;
	return failed ? 1 : 0;
}
