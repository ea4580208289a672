/*
 * credit_test.c - unit tests of credit flow control
 * (plugins/common/credit.c), as ofi and verbs use it.
 */
#include <stdlib.h>

#include <CUnit/Basic.h>

#include "cci.h"
#include "credit.h"
#include "unit_run.h"

static void test_sender_stops_at_the_granted_window(void)
{
	struct cci__credit c;
	int sent = 0;

	cci__credit_init(&c, 4, 8);
	while (cci__credit_take(&c))
		sent++;
	CU_ASSERT_EQUAL(sent, 4);
	CU_ASSERT_EQUAL(cci__credit_in(&c, 3), CCI_SUCCESS);
	CU_ASSERT_EQUAL(c.tx, 3);
	/* more than the peer ever granted is a protocol error */
	CU_ASSERT_EQUAL(cci__credit_in(&c, 2), CCI_ERROR);
	CU_ASSERT_EQUAL(cci__credit_in(&c, 0xffffffffu), CCI_ERROR);
	CU_ASSERT_EQUAL(c.tx, 3);
}

static void test_receiver_holding_events_is_never_overrun(void)
{
	struct cci__credit c;

	cci__credit_init(&c, 4, 4);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(cci__credit_rx(&c), CCI_SUCCESS);
	/* the application holds all four: a fifth is an overrun */
	CU_ASSERT_EQUAL(cci__credit_rx(&c), CCI_ERROR);
	cci__credit_returned(&c);
	/* returned but not yet told to the peer: still counted as used */
	CU_ASSERT_EQUAL(cci__credit_rx(&c), CCI_ERROR);
	CU_ASSERT_EQUAL(cci__credit_piggyback(&c, 0xffffu), 1);
	CU_ASSERT_EQUAL(cci__credit_piggyback(&c, 0xffffu), 0);
	CU_ASSERT_EQUAL(cci__credit_rx(&c), CCI_SUCCESS);
}

static void test_explicit_credit_after_a_quarter(void)
{
	struct cci__credit c;

	cci__credit_init(&c, 8, 8);
	for (int i = 0; i < 8; i++)
		cci__credit_rx(&c);
	cci__credit_returned(&c);
	CU_ASSERT_FALSE(cci__credit_explicit_due(&c));
	cci__credit_returned(&c);
	CU_ASSERT_TRUE(cci__credit_explicit_due(&c));
	cci__credit_init(&c, 1, 1); /* a window of one: every buffer is due */
	cci__credit_rx(&c);
	cci__credit_returned(&c);
	CU_ASSERT_TRUE(cci__credit_explicit_due(&c));
	cci__credit_returned(&c); /* nothing held: no credit made up */
	CU_ASSERT_EQUAL(cci__credit_owed(&c), 1);
}

/* ofi's way: buffers owed without counting what is held, a CREDIT due at
 * the same quarter. */
static void test_owing_without_counting_held_buffers(void)
{
	struct cci__credit c;

	cci__credit_init(&c, 64, 64);
	for (int i = 1; i < 16; i++)
		CU_ASSERT_FALSE(cci__credit_owe(&c));
	CU_ASSERT_FALSE(cci__credit_explicit_due(&c));
	CU_ASSERT_TRUE(cci__credit_owe(&c));
	CU_ASSERT_TRUE(cci__credit_explicit_due(&c));
	CU_ASSERT_EQUAL(cci__credit_owed(&c), 16);
	cci__credit_init(&c, 2, 3); /* a window under four: every buffer is due */
	CU_ASSERT_TRUE(cci__credit_owe(&c));
}

static void test_a_header_carries_at_most_its_field(void)
{
	struct cci__credit c;

	cci__credit_init(&c, 1, 64);
	for (int i = 0; i < 20; i++)
		cci__credit_owe(&c);
	/* a field too narrow for all: the rest stays owed */
	CU_ASSERT_EQUAL(cci__credit_piggyback(&c, 8), 8);
	CU_ASSERT_EQUAL(cci__credit_owed(&c), 12);
	/* a header that did not leave owes its credits again */
	cci__credit_unsent(&c, 8);
	CU_ASSERT_EQUAL(cci__credit_owed(&c), 20);
	cci__credit_unsent(&c, 0);
	CU_ASSERT_EQUAL(cci__credit_piggyback(&c, 0xffffu), 20);
	CU_ASSERT_EQUAL(cci__credit_owed(&c), 0);
	CU_ASSERT_FALSE(cci__credit_explicit_due(&c));
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "sender stops at the window its peer granted", test_sender_stops_at_the_granted_window },
		{ "receiver holding its events is never overrun",
		  test_receiver_holding_events_is_never_overrun },
		{ "explicit CREDIT once a quarter of the window is owed",
		  test_explicit_credit_after_a_quarter },
		{ "owing without counting held buffers: due at the same quarter",
		  test_owing_without_counting_held_buffers },
		{ "a header carries at most its field; an unsent one owes again",
		  test_a_header_carries_at_most_its_field },
	};

	return UNIT_RUN("credit", tests);
}
