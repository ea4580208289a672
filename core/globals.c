/*
 * globals.c - the library-wide state (cci__g) and what reads it whole:
 * whether the library is initialised, and the hand-out of its lists.
 *
 * It sits under every file that takes the global lock, so that the
 * lists' owners (devices, plugins) and the calls that start and stop the
 * library (init.c) can all reach it without reaching each other.
 */
#include "core.h"

struct cci__globals cci__g = { .lock = PTHREAD_MUTEX_INITIALIZER };

int cci__check_initialized(void)
{
	int rc;

	pthread_mutex_lock(&cci__g.lock);
	rc = cci__g.refcount > 0 ? CCI_SUCCESS : CCI_ERROR;
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}

int cci__list_handout(void *const *list_p, const int *n_p, const void *const **out)
{
	static const void *const empty[] = { NULL };
	int rc = CCI_SUCCESS;

	if (!out)
		return CCI_EINVAL;
	pthread_mutex_lock(&cci__g.lock);
	if (cci__g.refcount == 0)
		rc = CCI_ERROR;
	else
		*out = *n_p == 0 ? empty : *(const void *const *const *)list_p;
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}
