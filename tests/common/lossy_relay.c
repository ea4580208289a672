/*
 * lossy_relay.c - see lossy_relay.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lossy_relay.h"

#define HELD_MAX 4096
#define DGRAM_MAX 65536
#define POLL_MS 50

struct held {
	uint64_t due_us;
	int dir;
	size_t len;
	uint8_t *data;
};

struct lossy_relay {
	struct lossy_relay_conf conf;
	int fd[2];                   /* the relay's sockets, A side and B side */
	int wake;                    /* eventfd: stop */
	struct sockaddr_in peer[2];  /* A and B */
	int peer_known[2];
	uint64_t rng[2];             /* by direction */
	atomic_int blackout;
	pthread_t thread;
	pthread_mutex_t lock;        /* stats */
	struct lossy_relay_stats st;
	struct held held[HELD_MAX];
	size_t nheld;
	uint8_t buf[DGRAM_MAX];
};

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void count(struct lossy_relay *r, uint64_t *field)
{
	pthread_mutex_lock(&r->lock);
	(*field)++;
	pthread_mutex_unlock(&r->lock);
}

static void forward(struct lossy_relay *r, int dir, const uint8_t *data, size_t len)
{
	int to = 1 - dir;

	if (!r->peer_known[to]) {
		count(r, &r->st.unroutable);
		return;
	}
	/* Out of the other side's socket, so the peer sees the relay's port there. */
	sendto(r->fd[to], data, len, 0, (const struct sockaddr *)&r->peer[to], sizeof(r->peer[to]));
	count(r, &r->st.forwarded[dir]);
}

static void hold(struct lossy_relay *r, int dir, const uint8_t *data, size_t len, uint64_t due)
{
	struct held *h;

	if (r->nheld == HELD_MAX || !(r->held[r->nheld].data = malloc(len ? len : 1))) {
		count(r, &r->st.overflow);
		return;
	}
	h = &r->held[r->nheld++];
	memcpy(h->data, data, len);
	h->len = len;
	h->dir = dir;
	h->due_us = due;
}

/* Send what is due, in arrival order among equals; returns the ms until
 * the next one (POLL_MS at most). */
static int release_due(struct lossy_relay *r)
{
	uint64_t now = now_us(), next = now + POLL_MS * 1000u;
	size_t keep = 0;

	for (size_t i = 0; i < r->nheld; i++) {
		struct held *h = &r->held[i];

		if (h->due_us <= now) {
			forward(r, h->dir, h->data, h->len);
			free(h->data);
			continue;
		}
		if (h->due_us < next)
			next = h->due_us;
		r->held[keep++] = *h;
	}
	r->nheld = keep;
	return (int)((next - now + 999) / 1000);
}

static void learn_peer(struct lossy_relay *r, int side, const struct sockaddr_in *from)
{
	uint16_t fixed = side == LOSSY_A ? r->conf.a_peer : r->conf.b_peer;

	if (fixed)
		return;
	r->peer[side] = *from;
	r->peer_known[side] = 1;
}

/* One datagram arrived on side dir's socket: decide its fate.  The three
 * draws are made whatever happens, so that fates depend only on order. */
static void on_datagram(struct lossy_relay *r, int dir, size_t len)
{
	uint64_t *rng = &r->rng[dir];
	int lose = next_rand(rng) % 1000000u < r->conf.loss_ppm;
	int late = next_rand(rng) % 1000000u < r->conf.reorder_ppm;
	int twice = next_rand(rng) % 1000000u < r->conf.dup_ppm;
	uint64_t due = now_us() + r->conf.delay_us;

	count(r, &r->st.received[dir]);
	if (atomic_load(&r->blackout)) {
		count(r, &r->st.blackout[dir]);
		return;
	}
	if (lose) {
		count(r, &r->st.dropped[dir]);
		return;
	}
	if (late) {
		count(r, &r->st.reordered[dir]);
		hold(r, dir, r->buf, len, due + r->conf.reorder_us);
	} else if (r->conf.delay_us == 0 && r->nheld == 0) {
		forward(r, dir, r->buf, len);
	} else {
		hold(r, dir, r->buf, len, due);
	}
	if (twice) {
		count(r, &r->st.duplicated[dir]);
		if (r->conf.delay_us == 0 && !late && r->nheld == 0)
			forward(r, dir, r->buf, len);
		else
			hold(r, dir, r->buf, len, due);
	}
}

static void drain_socket(struct lossy_relay *r, int side)
{
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(r->fd[side], r->buf, sizeof(r->buf), MSG_DONTWAIT,
		                     (struct sockaddr *)&from, &fl);

		if (n < 0)
			return;
		learn_peer(r, side, &from);
		on_datagram(r, side, (size_t)n);
	}
}

static void *relay_main(void *arg)
{
	struct lossy_relay *r = arg;

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = r->fd[0], .events = POLLIN },
			{ .fd = r->fd[1], .events = POLLIN },
			{ .fd = r->wake, .events = POLLIN },
		};
		int timeout = release_due(r);

		if (poll(p, 3, timeout) < 0 && errno != EINTR)
			break;
		if (p[2].revents)
			break;
		for (int side = 0; side < 2; side++)
			if (p[side].revents & POLLIN)
				drain_socket(r, side);
	}
	return NULL;
}

static int bind_loopback(uint16_t port, uint16_t *bound_p)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t al = sizeof(a);
	int big = 1 << 20;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	*bound_p = ntohs(a.sin_port);
	return fd;
}

static void fixed_peer(struct lossy_relay *r, int side, uint16_t port)
{
	if (!port)
		return;
	r->peer[side] = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port) };
	r->peer[side].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->peer_known[side] = 1;
}

int lossy_relay_start(const struct lossy_relay_conf *conf, struct lossy_relay **relay_p)
{
	struct lossy_relay *r = calloc(1, sizeof(*r));
	int e;

	if (!r)
		return -1;
	r->conf = *conf;
	r->fd[0] = r->fd[1] = r->wake = -1;
	pthread_mutex_init(&r->lock, NULL);
	r->rng[0] = conf->seed ^ 0x5a5a5a5a5a5a5a5aull;
	r->rng[1] = conf->seed ^ 0xa5a5a5a5a5a5a5a5ull;
	fixed_peer(r, LOSSY_A, conf->a_peer);
	fixed_peer(r, LOSSY_B, conf->b_peer);
	if ((r->fd[0] = bind_loopback(conf->a_port, &r->conf.a_port)) < 0 ||
	    (r->fd[1] = bind_loopback(conf->b_port, &r->conf.b_port)) < 0 ||
	    (r->wake = eventfd(0, EFD_CLOEXEC)) < 0)
		goto err_close;
	if ((e = pthread_create(&r->thread, NULL, relay_main, r)) != 0) {
		errno = e;
		goto err_close;
	}
	*relay_p = r;
	return 0;

err_close:
	e = errno;
	for (int i = 0; i < 2; i++)
		if (r->fd[i] >= 0)
			close(r->fd[i]);
	if (r->wake >= 0)
		close(r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r);
	errno = e;
	return -1;
}

uint16_t lossy_relay_port(const struct lossy_relay *r, int side)
{
	return side == LOSSY_A ? r->conf.a_port : r->conf.b_port;
}

void lossy_relay_blackout(struct lossy_relay *r, int on)
{
	atomic_store(&r->blackout, on);
}

void lossy_relay_get_stats(struct lossy_relay *r, struct lossy_relay_stats *st)
{
	pthread_mutex_lock(&r->lock);
	*st = r->st;
	pthread_mutex_unlock(&r->lock);
}

void lossy_relay_stop(struct lossy_relay *r)
{
	uint64_t one = 1;

	if (write(r->wake, &one, sizeof(one)) != sizeof(one))
		pthread_cancel(r->thread); /* cannot happen with an eventfd; do not hang */
	pthread_join(r->thread, NULL);
	for (size_t i = 0; i < r->nheld; i++)
		free(r->held[i].data);
	close(r->fd[0]);
	close(r->fd[1]);
	close(r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
