/*
 * status.c - see status.h.
 */
#include <errno.h>

#include "cci.h"
#include "status.h"

int cci__errno_status(int err)
{
	switch (err) {
	case 0:
		return CCI_SUCCESS;
	case EAGAIN:
		return CCI_EAGAIN;
	case EINVAL:
		return CCI_EINVAL;
	case ENOMEM:
	case ENOBUFS:
	case EMFILE:
	case ENFILE:
	case ENOSPC:
		return CCI_ENOMEM;
	case EADDRINUSE:
	case EBUSY:
		return CCI_EBUSY;
	case EADDRNOTAVAIL:
	case EAFNOSUPPORT:
		return CCI_EADDRNOTAVAIL;
	case ENOENT:      /* no listener at an sm path */
	case ECONNREFUSED:
		return CCI_ECONNREFUSED;
	case ETIMEDOUT:
		return CCI_ETIMEDOUT;
	case ENODEV:
	case ENODATA:
		return CCI_ENODEV;
	case EMSGSIZE:
		return CCI_EMSGSIZE;
	case ENETDOWN:
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EHOSTDOWN:
		return CCI_ENETDOWN;
	case EPIPE:
	case ECONNRESET:
	case ECONNABORTED:
	case ENOTCONN:
	case ESHUTDOWN:
	case ESRCH:       /* the peer process is gone */
	case ECANCELED:
		return CCI_ERR_DISCONNECTED;
	case EIO:
	case EREMOTEIO:
		return CCI_ERR_RMA_OP;
	default:
		return CCI_ERROR;
	}
}
