/*
 * ofi_status.c - libfabric's errors as CCI statuses: its own codes and
 * the meanings it gives some errno values, then the shared errno map
 * (plugins/common/status.h).
 */
#include "ofi.h"

/* A libfabric error (positive FI_* value) as a CCI status. */
int ofi_fi_status(int fi_err)
{
	switch (fi_err) {
	case FI_ETOOSMALL:
		return CCI_EMSGSIZE;
	case FI_EACCES: /* a completion error: the target refused the key */
	case FI_EKEYREJECTED:
	case FI_ENOKEY:
		return CCI_ERR_RMA_HANDLE;
	default:
		return cci__errno_status(fi_err);
	}
}
