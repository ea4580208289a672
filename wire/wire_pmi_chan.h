/*
 * wire_pmi_chan.h - the launcher's end of PMI_FD that the PMI-1 and PMI-2
 * backends share: the descriptor, the bytes read from it and not yet
 * taken, the launcher's hang-up, and mpiexec.hydra's SIGUSR1 telling of a
 * rank's death.  Each backend keeps its protocol (requests, framing,
 * answers) in its own file.
 *
 * A backend's state embeds struct pmi_chan as its first member, so that
 * w->state is both: pmi_chan_open() allocates it and pmi_chan_close()
 * frees it, and every function here finds the channel at w->state.
 * Failures are recorded with wire_fail(), naming the protocol and PMI_FD.
 */
#ifndef CCI_WIRE_PMI_CHAN_H
#define CCI_WIRE_PMI_CHAN_H

#include <signal.h>
#include <stddef.h>

#include "wire_int.h"

#define PMI_CHAN_BUF 8192       /* the longest message of either protocol */

struct pmi_chan {
	int fd;
	const char *proto;         /* "PMI-1" or "PMI-2": a static string, for messages */
	size_t cap;                /* the longest message the protocol takes, <= PMI_CHAN_BUF */
	char buf[PMI_CHAN_BUF];
	size_t have;               /* bytes in buf, not yet taken by pmi_chan_recv() */
	int in_fence;              /* non-zero while a fence is under way (the backend's steps) */
	int closed;                /* the launcher closed PMI_FD */
	int caught_usr1;           /* old_usr1 is to be restored by pmi_chan_close() */
	struct sigaction old_usr1;
	double failed_seen;        /* when the fence first saw the launcher lose a rank, or 0 */
};

/* Where a complete message lies in buf: body bytes from start are the
 * caller's; the message (its header and end included) takes len bytes. */
struct pmi_msg {
	size_t start, body, len;
};

/*
 * A protocol's framing: whether c->buf begins with a complete message.
 * CCI_WIRE_SUCCESS with m->len = 0 when more bytes are needed, with m
 * filled when one is there; a failure (recorded) when the bytes cannot be
 * one of the protocol's messages.
 */
typedef int pmi_frame_fn(struct cci_wire *w, const struct pmi_chan *c, struct pmi_msg *m);

/* A message that ends with a newline (PMI-1, and PMI-2's first answer);
 * the newline is not in the body. */
pmi_frame_fn pmi_chan_line;

/*
 * Start a backend on the descriptor PMI_FD=fd (the variable's text): on
 * success w->state is a zeroed block of state_size bytes beginning with
 * its struct pmi_chan, w->ops is ops, handshake(w) has spoken the
 * protocol's first words, and a SIGUSR1 left at its default is caught
 * until pmi_chan_close().  On failure the descriptor (when it was one) is
 * closed, w->state is NULL and w->err says why.
 */
int pmi_chan_open(struct cci_wire *w, const char *proto, size_t cap, const char *fd,
                  size_t state_size, const struct wire_backend *ops,
                  int (*handshake)(struct cci_wire *w));

/* All n bytes of data to the launcher, retried after signals. */
int pmi_chan_write(struct cci_wire *w, const char *data, size_t n);

/*
 * One message, as frame finds it, into out (its body, cut to len - 1
 * characters), waiting at most timeout_ms (-1: the handle's timeout).
 * *got_p = 0 when none came in time.  A launcher that closes PMI_FD sets
 * closed and fails the call.
 */
int pmi_chan_recv(struct cci_wire *w, pmi_frame_fn *frame, char *out, size_t len,
                  int timeout_ms, int *got_p);

/*
 * A fence's wait, 10 ms at most, for the launcher's answer (into out, as
 * pmi_chan_recv() does; *got_p = 1).  A launcher that lost a rank
 * signals or hangs up: for a grace longer than the caller's for a dead
 * peer this returns CCI_WIRE_SUCCESS without an answer, so the caller's
 * watch of this host's ranks can name the dead one; then it fails, saying
 * what the launcher did.  The caller sets failed_seen = 0 as a fence starts.
 */
int pmi_chan_fence_wait(struct cci_wire *w, pmi_frame_fn *frame, char *out, size_t len,
                        int *got_p);

/* Close PMI_FD, give SIGUSR1 back its old action, free w->state (the
 * backend has freed what its state points to) and set it to NULL. */
void pmi_chan_close(struct cci_wire *w);

#endif /* CCI_WIRE_PMI_CHAN_H */
