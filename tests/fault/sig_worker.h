/*
 * sig_worker.h - the process a signal test ends: a forked child that runs
 * one phase of an application's life (cci_init, traffic, teardown, exit)
 * until a signal arrives, as a rank of a job does when its launcher cancels it.
 *
 * The child tells the test when its phase has begun by writing one byte
 * on ready_fd; the test then sends the signal at a moment of its choice
 * and judges how the child ended (tests/fault/t_signal.c).
 */
#ifndef FAULT_SIG_WORKER_H
#define FAULT_SIG_WORKER_H

enum sig_phase {
	SIG_PHASE_INIT,     /* cci_init, an endpoint, then idle polls */
	SIG_PHASE_TRAFFIC,  /* messages to an echoing server and their echoes */
	SIG_PHASE_TEARDOWN, /* endpoint, connect, send, destroy, finalize, init, ... */
	SIG_PHASE_EXIT      /* endpoint, connect, sends in flight, then exit() with all
	                     * open: the library's destructors run while the signal comes */
};

/* What the application decided for SIGTERM, SIGINT and SIGHUP. */
enum sig_mode {
	SIG_MODE_DEFAULT,   /* the default action: the process dies by the signal */
	SIG_MODE_HANDLER,   /* a handler that records the signal; the worker quits */
	SIG_MODE_IGNORED    /* SIG_IGN: the process goes on (init phase only) */
};

/* How a worker ends when it is not ended by a signal's default action. */
#define SIG_EXIT_HANDLED 100  /* + the signal: its handler saw it, the worker quit */
#define SIG_EXIT_WENT_ON 5    /* ignored the signal; its endpoint took a new connection */
#define SIG_EXIT_IDLE 3       /* no signal came within the phase's bound */
#define SIG_EXIT_FAILED 4     /* a call of the library failed (printed on stderr) */
#define SIG_EXIT_AT_EXIT 6    /* the exit phase's own exit() finished first (or the
                               * handler only recorded the signal meanwhile) */

/* The phase's bound (three times it under a sanitizer): a worker that got
 * no signal by then exits SIG_EXIT_IDLE. */
#define SIG_WORKER_BOUND_MS 4000u

struct sig_job {
	enum sig_phase phase;
	enum sig_mode mode;
	int default_config;  /* run with CCI_CONFIG and CCI_CTP unset, on the default device */
	const char *uri;     /* the echoing server (traffic and teardown) */
	int ready_fd;        /* one byte is written here when the phase begins */
	int go_fd;           /* SIG_MODE_IGNORED: readable once the signal was sent */
};

/*
 * Run job in the calling process, a child forked for it before any
 * cci_init of its own; never returns.  The signals' dispositions are set
 * as job->mode says, whatever the forking process had.  A handler only
 * records the signal (it is installed without SA_RESTART, so the
 * library's system calls see EINTR); the worker notices it between two
 * calls, tears down what it opened and exits SIG_EXIT_HANDLED + signal.
 * With the signals ignored, the init phase is ready once its endpoint is
 * open (the libraries have done what they do to dispositions by then:
 * the signal matters from that moment) and writes its endpoint's URI
 * after the ready byte; once go_fd is readable it checks that its names
 * in /dev/shm are all still there (libfabric shm's regions), accepts the
 * new peer the test started (sig_new_peer_run) and exits
 * SIG_EXIT_WENT_ON once the peer's message arrived: the signal changed
 * nothing.
 */
_Noreturn void sig_worker_run(const struct sig_job *job);

/*
 * A new peer of a worker that ignored its signal, in a child the test
 * forked (from a process without threads, as ThreadSanitizer wants a
 * fork that goes on to start threads): cci_init, an endpoint (the default
 * device with default_config, which unsets CCI_CONFIG and CCI_CTP, else
 * the transport's), connect to uri and send one message.  Exits 0 once
 * the message has gone out, else 1; never returns.
 */
_Noreturn void sig_new_peer_run(const char *uri, int default_config);

#endif /* FAULT_SIG_WORKER_H */
