/*
 * baseline_ofi_rma.c - bare libfabric RMA write streaming, the yardstick
 * the ofi transport's RMA is measured against (fi_rma_bw-style; Debian's
 * libfabric-bin ships no fi_rma_bw), and with -m bare fi_send message
 * streaming, the message-rate yardstick (fi_msg_bw-style) for providers
 * without RMA such as udp;ofi_rxd.  Not a test.
 *
 *   baseline_ofi_rma -p PROVIDER [-S size] [-w window] [-n count] [-d] [-m] [-j]
 *
 * With -m the target keeps OFI_RECVS receives of size bytes posted and
 * the parent keeps window fi_send operations in flight; it prints the
 * messages per second from the first post to the last send completion.
 *
 * Forks a target that registers a buffer of size bytes and keeps
 * progressing; the parent keeps window fi_write operations of size bytes
 * (-d: with FI_DELIVERY_COMPLETE) in flight until count have completed and prints the MB/s (10^6 B/s)
 * from the first post to the last completion.  Keys and addresses go
 * through a pipe.  Handles FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_PROV_KEY,
 * FI_MR_ENDPOINT.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_mr *mr;
	char *buf;
};

struct target_info {
	char name[256];
	size_t name_len;
	uint64_t key, addr;
};

#define CHECK(call) do { int rc_ = (int)(call); if (rc_) { fprintf(stderr, "%s: %s\n", #call, \
	fi_strerror(-rc_)); exit(1); } } while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define OFI_RECVS 256

static int msg_mode; /* -m: fi_send streaming instead of fi_write */

static void side_open(struct side *s, const char *prov, size_t size, uint64_t access)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT, .size = 4096 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE };

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = msg_mode ? FI_MSG : FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
	                              FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->fabric_attr->prov_name = strdup(prov);
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
	CHECK(fi_fabric(s->info->fabric_attr, &s->fabric, NULL));
	CHECK(fi_domain(s->fabric, s->info, &s->domain, NULL));
	CHECK(fi_cq_open(s->domain, &cqa, &s->cq, NULL));
	CHECK(fi_av_open(s->domain, &ava, &s->av, NULL));
	CHECK(fi_endpoint(s->domain, s->info, &s->ep, NULL));
	CHECK(fi_ep_bind(s->ep, &s->av->fid, 0));
	CHECK(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(s->ep));
	if (msg_mode)
		size *= OFI_RECVS; /* one slice per posted receive */
	s->buf = aligned_alloc(4096, (size + 4095) / 4096 * 4096);
	memset(s->buf, 0x5a, size);
	CHECK(fi_mr_reg(s->domain, s->buf, size, access, 0, 42, 0, &s->mr, NULL));
	if (s->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		CHECK(fi_mr_bind(s->mr, &s->ep->fid, 0));
		CHECK(fi_mr_enable(s->mr));
	}
	fi_freeinfo(hints);
}

/* The target: publish, then progress until the parent closes the pipe. */
/* Close what side_open opened, so that a leak checker sees none. */
static void side_close(struct side *s)
{
	fi_close(&s->mr->fid);
	fi_close(&s->ep->fid);
	fi_close(&s->av->fid);
	fi_close(&s->cq->fid);
	fi_close(&s->domain->fid);
	fi_close(&s->fabric->fid);
	fi_freeinfo(s->info);
	free(s->buf);
}

static void target(const char *prov, size_t size, int wfd, int rfd)
{
	struct side s;
	struct target_info ti;
	struct fi_cq_entry e;

	static struct fi_context2 rctx[OFI_RECVS];

	memset(&ti, 0, sizeof(ti));
	side_open(&s, prov, size, msg_mode ? FI_RECV : FI_REMOTE_WRITE | FI_REMOTE_READ);
	for (int i = 0; msg_mode && i < OFI_RECVS; i++)
		CHECK(fi_recv(s.ep, s.buf + (size_t)i * size, size, fi_mr_desc(s.mr), FI_ADDR_UNSPEC,
		              &rctx[i]));
	ti.name_len = sizeof(ti.name);
	CHECK(fi_getname(&s.ep->fid, ti.name, &ti.name_len));
	ti.key = fi_mr_key(s.mr);
	ti.addr = (s.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)s.buf : 0;
	if (write(wfd, &ti, sizeof(ti)) != sizeof(ti))
		exit(1);
	for (;;) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		if (fi_cq_read(s.cq, &e, 1) == 1 && msg_mode) {
			size_t i = (size_t)((struct fi_context2 *)e.op_context - rctx);
			CHECK(fi_recv(s.ep, s.buf + i * size, size, fi_mr_desc(s.mr), FI_ADDR_UNSPEC,
			              e.op_context));
		}
		if (poll(&p, 1, 0) > 0)
			break;
	}
	side_close(&s);
	exit(0);
}

/* Reap one completion; returns 1 when one came. */
static int reap(struct side *s)
{
	struct fi_cq_entry e;
	ssize_t n = fi_cq_read(s->cq, &e, 1);

	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		fi_cq_readerr(s->cq, &err, 0);
		fprintf(stderr, "operation failed: %s\n", fi_strerror(err.err));
		exit(1);
	}
	return n == 1;
}

static uint64_t wflags; /* -d: FI_DELIVERY_COMPLETE, as the transport asks */

static ssize_t post_one(struct side *s, fi_addr_t fa, const struct target_info *ti, size_t size,
                          void *ctx)
{
	struct iovec iov = { s->buf, size };
	void *desc = fi_mr_desc(s->mr);
	struct fi_rma_iov riov = { ti->addr, size, ti->key };
	struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = fa,
	                        .rma_iov = &riov, .rma_iov_count = 1, .context = ctx };

	if (msg_mode)
		return fi_send(s->ep, s->buf, size, desc, fa, ctx);
	if (!wflags)
		return fi_write(s->ep, s->buf, size, desc, fa, ti->addr, ti->key, ctx);
	return fi_writemsg(s->ep, &m, FI_COMPLETION | wflags);
}

static double stream(struct side *s, fi_addr_t fa, const struct target_info *ti, size_t size,
                     unsigned window, unsigned count)
{
	struct fi_context2 *ctx = calloc(window, sizeof(*ctx));
	unsigned posted = 0, done = 0;
	double t0 = now_s();

	while (done < count) {
		while (posted < count && posted - done < window) {
			ssize_t rc = post_one(s, fa, ti, size, &ctx[posted % window]);
			if (rc == -FI_EAGAIN)
				break;
			CHECK(rc);
			posted++;
		}
		done += (unsigned)reap(s);
	}
	free(ctx);
	if (msg_mode)
		return count / (now_s() - t0);
	return (double)size * count / (now_s() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	const char *prov = NULL;
	size_t size = 4u << 20;
	unsigned window = 16, count = 200;
	int to_parent[2], to_child[2], opt, status, json = 0;
	double figure; /* MB/s, or messages/s with -m */
	struct target_info ti;
	struct side s;
	fi_addr_t fa;
	pid_t pid;

	while ((opt = getopt(argc, argv, "djmp:S:w:n:")) != -1) {
		if (opt == 'm')
			msg_mode = 1;
		else if (opt == 'j')
			json = 1;
		else if (opt == 'd')
			wflags = FI_DELIVERY_COMPLETE;
		else if (opt == 'p')
			prov = optarg;
		else if (opt == 'S')
			size = strtoull(optarg, NULL, 0);
		else if (opt == 'w')
			window = (unsigned)atoi(optarg);
		else if (opt == 'n')
			count = (unsigned)atoi(optarg);
	}
	if (!prov || window == 0 || count == 0) {
		fprintf(stderr, "usage: %s -p PROVIDER [-S size] [-w window] [-n count] [-d] [-m] [-j]\n"
		        "  -d  FI_DELIVERY_COMPLETE on every write\n"
		        "  -m  fi_send messages instead of fi_write (a message rate)\n"
		        "  -j  one JSON object on stdout\n",
		        argv[0]);
		return 2;
	}
	if (pipe(to_parent) || pipe(to_child))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		/* Only the parent may hold the write end: its close stops us. */
		close(to_child[1]);
		close(to_parent[0]);
		target(prov, size, to_parent[1], to_child[0]);
	}
	close(to_child[0]);
	close(to_parent[1]);
	if (read(to_parent[0], &ti, sizeof(ti)) != sizeof(ti))
		return 1;
	side_open(&s, prov, size, msg_mode ? FI_SEND : FI_WRITE | FI_READ);
	if (fi_av_insert(s.av, ti.name, 1, &fa, 0, NULL) != 1)
		return 1;
	stream(&s, fa, &ti, size, window, count / 10 + 1); /* warm-up */
	figure = stream(&s, fa, &ti, size, window, count);
	if (msg_mode && json)
		printf("{\"provider\":\"%s\",\"bytes\":%zu,\"window\":%u,\"messages\":%u,"
		       "\"msg_rate\":%.1f}\n",
		       s.info->fabric_attr->prov_name, size, window, count, figure);
	else if (msg_mode)
		printf("%s: fi_send streaming, %zu bytes, window %u, %u messages: %.0f messages/s\n",
		       s.info->fabric_attr->prov_name, size, window, count, figure);
	else if (json)
		printf("{\"provider\":\"%s\",\"delivery_complete\":%s,\"bytes\":%zu,\"window\":%u,"
		       "\"writes\":%u,\"throughput_MBps\":%.3f}\n",
		       s.info->fabric_attr->prov_name, wflags ? "true" : "false", size, window, count, figure);
	else
		printf("%s: fi_write streaming%s, %zu bytes, window %u, %u writes: %.1f MB/s\n",
		       s.info->fabric_attr->prov_name, wflags ? " (delivery complete)" : "", size, window,
		       count, figure);
	close(to_child[1]);
	waitpid(pid, &status, 0);
	side_close(&s);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
