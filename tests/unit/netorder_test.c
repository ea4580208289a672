/*
 * netorder_test.c - the wire's integers (plugins/common/netorder.h) are
 * in network byte order: most significant byte first, at any alignment,
 * and read back whole.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "netorder.h"
#include "unit_run.h"

static void t_order(void)
{
	uint8_t b[1 + 8];
	static const uint8_t want64[8] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08 };

	cci__put16(b + 1, 0x0102);
	CU_ASSERT(b[1] == 0x01 && b[2] == 0x02);
	cci__put32(b + 1, 0x01020304);
	CU_ASSERT(b[1] == 0x01 && b[2] == 0x02 && b[3] == 0x03 && b[4] == 0x04);
	cci__put64(b + 1, 0x0102030405060708ull); /* unaligned on purpose */
	CU_ASSERT(memcmp(b + 1, want64, 8) == 0);
	CU_ASSERT_EQUAL(cci__get64(b + 1), 0x0102030405060708ull);
	CU_ASSERT_EQUAL(cci__get32(b + 1), 0x01020304u);
	CU_ASSERT_EQUAL(cci__get16(b + 1), 0x0102u);
	cci__put32(b, 0xfffffffeu);
	CU_ASSERT_EQUAL(cci__get32(b), 0xfffffffeu);
}

static const struct unit_test tests[] = {
	{ "wire integers are big-endian at any alignment and read back whole", t_order },
};

int main(void)
{
	return UNIT_RUN("network byte order", tests);
}
