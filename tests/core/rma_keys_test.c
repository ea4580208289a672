/*
 * rma_keys_test.c - RMA registration handles: random 64-bit keys that are
 * unique and never the address, the serialised layout every transport
 * decodes, and the register/deregister argument checks.
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"

#define NREG 2048

static cci_endpoint_t *ep;
static char buf[NREG];

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_keys_unique_random_not_addresses(void)
{
	cci_rma_handle_t **h = calloc(NREG, sizeof(*h));
	uint64_t *keys = calloc(NREG, sizeof(*keys));
	int dup = 0, addr_like = 0, high_bits = 0;

	CU_ASSERT_FATAL(h && keys);
	for (int i = 0; i < NREG; i++) {
		CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, buf + i, 1, CCI_FLAG_READ, &h[i]),
		                      CCI_SUCCESS);
		keys[i] = h[i]->stuff[0];
		addr_like += keys[i] == (uint64_t)(uintptr_t)(buf + i) ||
		             keys[i] == (uint64_t)(uintptr_t)h[i];
		high_bits += (keys[i] >> 48) != 0; /* user addresses have none */
	}
	qsort(keys, NREG, sizeof(*keys), cmp_u64);
	for (int i = 1; i < NREG; i++)
		dup += keys[i] == keys[i - 1];
	CU_ASSERT_EQUAL(dup, 0);
	CU_ASSERT_EQUAL(keys[0] == 0, 0);
	CU_ASSERT_EQUAL(addr_like, 0);
	CU_ASSERT(high_bits > NREG * 9 / 10); /* random 64-bit keys: almost all */
	for (int i = 0; i < NREG; i++)
		CU_ASSERT_EQUAL(cci_rma_deregister(ep, h[i]), CCI_SUCCESS);
	free(h);
	free(keys);
}

static void test_handle_layout(void)
{
	cci_rma_handle_t *h;

	CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, buf, sizeof(buf), CCI_FLAG_WRITE, &h),
	                      CCI_SUCCESS);
	CU_ASSERT_EQUAL(h->stuff[1], (uint64_t)(uintptr_t)buf);
	CU_ASSERT_EQUAL(h->stuff[2], sizeof(buf));
	CU_ASSERT_EQUAL(h->stuff[3] & 0xffffffffu, CCI_FLAG_WRITE);
	CU_ASSERT_EQUAL(cci_rma_deregister(ep, h), CCI_SUCCESS);
}

static void test_deregister_twice_is_einval(void)
{
	cci_rma_handle_t *h;
	struct cci_rma_handle copy;

	CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, buf, 64, 0, &h), CCI_SUCCESS);
	memcpy(&copy, h, sizeof(copy));
	CU_ASSERT_EQUAL(cci_rma_deregister(ep, h), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_rma_deregister(ep, h), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_rma_deregister(ep, &copy), CCI_EINVAL); /* a copy is not a handle */
}

static void test_register_argument_checks(void)
{
	cci_rma_handle_t *h = NULL;

	CU_ASSERT_EQUAL(cci_rma_register(NULL, buf, 1, 0, &h), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_rma_register(ep, NULL, 1, 0, &h), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_rma_register(ep, buf, 0, 0, &h), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_rma_register(ep, buf, 1, 0, NULL), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_rma_register(ep, buf, UINT64_MAX, 0, &h), CCI_EINVAL); /* wraps */
	CU_ASSERT_PTR_NULL(h); /* outputs are written only on success */
}

int main(void)
{
	CU_pSuite s;
	int failed;

	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ||
	    cci_create_endpoint(NULL, 0, &ep, NULL) != CCI_SUCCESS)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_set_fail_on_inactive(CU_FALSE);
	s = CU_add_suite("rma keys", NULL, NULL);
	CU_add_test(s, "keys are unique, random 64-bit values, never addresses",
	            test_keys_unique_random_not_addresses);
	CU_add_test(s, "a handle carries address, length and access", test_handle_layout);
	CU_add_test(s, "deregistering twice, or a copy of a handle, is CCI_EINVAL",
	            test_deregister_twice_is_einval);
	CU_add_test(s, "bad registration arguments are CCI_EINVAL", test_register_argument_checks);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)(CU_get_number_of_failures() + CU_get_number_of_tests_failed());
	CU_cleanup_registry();
	cci_destroy_endpoint(ep);
	cci_finalize();
	return failed ? 1 : 0;
}
