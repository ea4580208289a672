/*
 * misuse.c - the API misuse suite, run once per transport:
 *
 *   misuse [--transport NAME] [--run SUBSTRING] [--list]
 */
#include "misuse.h"

void m_rma_refused(struct rfix *r, cci_rma_handle_t *lh, cci_rma_handle_t *rh, int flags,
                   const char *what)
{
	int rc = cci_rma(r->c, NULL, 0, lh, 0, rh, 0, 4096, NULL, flags | CCI_FLAG_BLOCKING);

	CHECKF(rc == CCI_ERR_RMA_HANDLE || rc == CCI_EINVAL || rc == CCI_ERR_RMA_OP,
	       "%s: cci_rma gave %s", what, h_status_name(rc));
}

int main(int argc, char **argv)
{
	const struct h_suite suites[] = {
		H_SUITE("NULL arguments", t_misuse_null),
		H_SUITE("foreign and wrong-kind objects", t_misuse_foreign),
		H_SUITE("closed objects", t_misuse_stale),
		H_SUITE("init and finalize", t_misuse_life),
	};

	return h_main("misuse", argc, argv, suites, sizeof(suites) / sizeof(suites[0]));
}
