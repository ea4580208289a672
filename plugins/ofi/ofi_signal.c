/*
 * ofi_signal.c - the application's signal dispositions, kept across what
 * libfabric and the libraries it links do to them.
 *
 * Two of them install handlers of their own (Debian 12, libfabric 1.17):
 *  - libinfinipath.so.4, linked by libfabric for its psm provider, sets
 *    handlers for SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM in
 *    its constructor, with or without InfiniPath hardware.  Its handler
 *    calls exit(1) (after a backtrace for the faults): a process told to
 *    end by SIGTERM or SIGINT exits with status 1 instead of dying by the
 *    signal, and since exit() runs the destructors from inside a handler,
 *    a process interrupted inside malloc deadlocks for good on malloc's
 *    lock.  It replaces the application's own handlers the same way.  The
 *    library skips that code when IPATH_NO_BACKTRACE is set, so we set it
 *    for the load only, and undo whatever the load changed all the same.
 *  - The shm provider sets handlers for SIGBUS, SIGSEGV, SIGTERM and
 *    SIGINT at the first endpoint of the process: they unlink its regions
 *    in /dev/shm, put back the disposition found then and raise the signal
 *    again, so the application's disposition still decides; we keep them,
 *    as they clean up.  Except over an ignored signal: the region would
 *    be unlinked while the process goes on (peers could no longer reach
 *    it), so an ignored signal stays ignored.
 *    Those handlers read the dispositions they replaced from an array
 *    that libfabric's destructor frees at exit, and the handlers stay
 *    installed: a signal during the rest of exit() ran sigaction() and the
 *    replaced handler from freed memory (a SIGSEGV, once reused).  So this
 *    module's destructor, which runs before libfabric's, puts back what
 *    they replaced (ofi_sig_provider_forget).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

/* The environment variable that keeps libinfinipath from installing its
 * handlers. */
#define OFI_IPATH_ENV "IPATH_NO_BACKTRACE"

static int sig_same(const struct sigaction *a, const struct sigaction *b)
{
	return a->sa_handler == b->sa_handler && a->sa_flags == b->sa_flags;
}

void ofi_sig_save(struct ofi_sigs *s)
{
	for (int n = 1; n < NSIG; n++)
		if (sigaction(n, NULL, &s->act[n]) != 0)
			s->act[n].sa_handler = SIG_ERR; /* one glibc keeps for itself */
}

/* Put back signal n's saved disposition if what replaced it qualifies. */
static void sig_put_back(const struct ofi_sigs *s, int n, int ignored_only, const char *by)
{
	struct sigaction now;

	if (s->act[n].sa_handler == SIG_ERR || sigaction(n, NULL, &now) != 0 ||
	    sig_same(&now, &s->act[n]))
		return;
	if (ignored_only && s->act[n].sa_handler != SIG_IGN)
		return;
	sigaction(n, &s->act[n], NULL);
	OFI_LOG(CCI_LOG_INIT, "ofi: %s changed the disposition of signal %d (%s): put back",
	        by, n, sigabbrev_np(n) ? sigabbrev_np(n) : "?");
}

void ofi_sig_keep(const struct ofi_sigs *s, const char *by)
{
	for (int n = 1; n < NSIG; n++)
		sig_put_back(s, n, 0, by);
}

static void sig_keep_ignored(const struct ofi_sigs *s, const char *by)
{
	for (int n = 1; n < NSIG; n++)
		sig_put_back(s, n, 1, by);
}

/* The dispositions the provider's handlers replaced, and the handlers:
 * recorded at the endpoint that installed them (shm does it once per
 * process), put back at exit or at the module's unload. */
static pthread_mutex_t prov_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ofi_sigs prov_replaced;
static struct sigaction prov_installed[NSIG];
static unsigned char prov_noted[NSIG];

void ofi_sig_provider_note(const struct ofi_sigs *s)
{
	struct sigaction now;

	sig_keep_ignored(s, "the provider's endpoint");
	pthread_mutex_lock(&prov_lock);
	for (int n = 1; n < NSIG; n++) {
		if (s->act[n].sa_handler == SIG_ERR || sigaction(n, NULL, &now) != 0 ||
		    sig_same(&now, &s->act[n]))
			continue;
		prov_replaced.act[n] = s->act[n];
		prov_installed[n] = now;
		prov_noted[n] = 1;
	}
	pthread_mutex_unlock(&prov_lock);
}

void ofi_sig_provider_forget(void)
{
	struct sigaction now;

	pthread_mutex_lock(&prov_lock);
	for (int n = 1; n < NSIG; n++) {
		if (!prov_noted[n])
			continue;
		/* A handler the application set since is the application's. */
		if (sigaction(n, NULL, &now) == 0 && sig_same(&now, &prov_installed[n]))
			sigaction(n, &prov_replaced.act[n], NULL);
		prov_noted[n] = 0;
	}
	pthread_mutex_unlock(&prov_lock);
}

/*
 * dlopen libfabric.so.1 with the dispositions kept.  No signal is blocked
 * meanwhile: the load takes 0.2 s (libinfinipath calibrating its clock),
 * more than a second on a loaded machine, and a signal that comes then
 * must act at once; with IPATH_NO_BACKTRACE set, nothing the load runs
 * takes it.  A library that did would have it until the load returns.
 */
void *ofi_sig_dlopen(const char *name, int flags)
{
	int set_env = getenv(OFI_IPATH_ENV) == NULL;
	struct ofi_sigs s;
	void *dl;

	ofi_sig_save(&s);
	if (set_env)
		setenv(OFI_IPATH_ENV, "1", 0);
	dl = dlopen(name, flags);
	if (set_env)
		unsetenv(OFI_IPATH_ENV);
	ofi_sig_keep(&s, "loading libfabric");
	return dl;
}
