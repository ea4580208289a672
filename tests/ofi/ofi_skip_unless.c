/*
 * ofi_skip_unless.c - run a command only where a libfabric provider can
 * serve the ofi transport:
 *
 *   ofi_skip_unless PROVIDER COMMAND [ARGS...]
 *
 * When fi_getinfo offers no FI_EP_RDM endpoint with FI_MSG | FI_RMA for
 * PROVIDER, prints why and exits 77, which meson reports as a skipped
 * test; otherwise runs COMMAND in its place.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

int main(int argc, char **argv)
{
	struct fi_info *hints, *list = NULL;
	int rc;

	if (argc < 3) {
		fprintf(stderr, "usage: %s PROVIDER COMMAND [ARGS...]\n", argv[0]);
		return 2;
	}
	hints = fi_allocinfo();
	if (!hints || !(hints->fabric_attr->prov_name = strdup(argv[1])))
		return 2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
	                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list);
	fi_freeinfo(hints);
	if (rc != 0) {
		printf("SKIP: libfabric provider %s is not available here (fi_getinfo: %s)\n",
		       argv[1], fi_strerror(-rc));
		return 77;
	}
	fi_freeinfo(list);
	fflush(stdout);
	execv(argv[2], argv + 2);
	perror(argv[2]);
	return 2;
}
