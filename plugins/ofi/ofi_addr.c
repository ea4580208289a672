/*
 * ofi_addr.c - addresses: the endpoint URI and its parsing, services of
 * cci_create_endpoint_at, the address vector entries shared by
 * connections to one peer, and the identity of peer processes of this
 * host (watched for death through pidfds).
 *
 * URI: ofi://<provider>/<address>, <provider> the core provider name (tcp,
 * shm, verbs, ...).  <address> is printed by address format:
 *   FI_SOCKADDR_IN   a.b.c.d:port
 *   FI_SOCKADDR_IN6  [v6]:port
 *   FI_ADDR_STR      the provider's string (e.g. fi_shm://4242:0:0)
 *   anything else    0x followed by the hex bytes of fi_getname()
 */
#include <ctype.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ifaddr.h"
#include "ofi.h"
#include "uri.h"

#define URI_SCHEME "ofi://"

static int addr_hex(const uint8_t *a, size_t len, char *out, size_t cap)
{
	if (cap < 2 * len + 3)
		return CCI_EINVAL;
	out[0] = '0';
	out[1] = 'x';
	for (size_t i = 0; i < len; i++)
		snprintf(out + 2 + 2 * i, 3, "%02x", a[i]);
	return CCI_SUCCESS;
}

/* Printable and without characters that end a URI. */
static int str_printable(const uint8_t *a, size_t len)
{
	if (len < 2 || a[len - 1] != '\0')
		return 0;
	for (size_t i = 0; i + 1 < len; i++)
		if (!isgraph(a[i]))
			return 0;
	return 1;
}

/*
 * A string address the provider may be given: printable, NUL-terminated,
 * with a scheme ("fi_shm://4242:0:0", "fi_ns://7000").  libfabric 1.17's
 * shm provider refuses other names at fi_av_insert, but a refused insert
 * leaves its address vector such that the next send to another entry
 * crashes the process: such addresses never reach it.
 */
static int str_addr_ok(const uint8_t *a, size_t len)
{
	const char *sep;

	if (!str_printable(a, len))
		return 0;
	sep = strstr((const char *)a, "://");
	return sep && sep != (const char *)a && sep[3] != '\0';
}

static int addr_print(const struct ofi_ep *sep, char *out, size_t cap)
{
	const uint8_t *a = sep->addr;
	uint32_t fmt = sep->info->addr_format;
	const struct sockaddr *sa = (const void *)a;

	if ((fmt == FI_SOCKADDR_IN && sep->addr_len >= sizeof(struct sockaddr_in) &&
	     sa->sa_family == AF_INET) ||
	    (fmt == FI_SOCKADDR_IN6 && sep->addr_len >= sizeof(struct sockaddr_in6) &&
	     sa->sa_family == AF_INET6)) {
		cci__sockaddr_str(sa, out, cap);
		return CCI_SUCCESS;
	}
	if (fmt == FI_ADDR_STR && str_printable(a, sep->addr_len) && sep->addr_len <= cap) {
		memcpy(out, a, sep->addr_len);
		return CCI_SUCCESS;
	}
	return addr_hex(a, sep->addr_len, out, cap);
}

int ofi_uri_make(struct ofi_ep *sep, char **uri_p)
{
	char text[2 * OFI_ADDR_MAX + 8];

	if (addr_print(sep, text, sizeof(text)) != CCI_SUCCESS)
		return CCI_EINVAL;
	if (asprintf(uri_p, "%s%s/%s", URI_SCHEME, sep->dev->core_name, text) < 0) {
		*uri_p = NULL;
		return CCI_ENOMEM;
	}
	return CCI_SUCCESS;
}

static int hex_parse(const char *s, uint8_t *out, size_t *len_p)
{
	size_t n = strlen(s);

	if (n == 0 || n % 2 || n / 2 > OFI_ADDR_MAX)
		return CCI_EINVAL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1]) ||
		    sscanf(s + 2 * i, "%2x", &v) != 1)
			return CCI_EINVAL;
		out[i] = (uint8_t)v;
	}
	*len_p = n / 2;
	return CCI_SUCCESS;
}

_Static_assert(sizeof(struct sockaddr_storage) <= OFI_ADDR_MAX, "a resolved address fits");

/* host:port into a sockaddr of family fam (out holds OFI_ADDR_MAX bytes). */
static int sockaddr_parse(const char *s, int fam, uint8_t *out, size_t *len_p)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char host[256];
	uint16_t p;
	int rc;

	if (uri_parse_host_port(s, host, sizeof(host), &p) != 0 || p == 0)
		return CCI_EINVAL;
	rc = cci__addr_resolve(host, p, fam, &ss, &sl);
	if (rc == CCI_SUCCESS) {
		memcpy(out, &ss, sl);
		*len_p = sl;
	}
	return rc;
}

int ofi_uri_parse(struct ofi_ep *sep, const char *uri, uint8_t *addr, size_t *len_p)
{
	const char *prov = uri + strlen(URI_SCHEME), *slash;
	size_t plen;

	if (strncmp(uri, URI_SCHEME, strlen(URI_SCHEME)) != 0 || !(slash = strchr(prov, '/')))
		return CCI_EINVAL;
	plen = (size_t)(slash - prov);
	if (plen != strlen(sep->dev->core_name) || strncmp(prov, sep->dev->core_name, plen))
		return plen == 0 ? CCI_EINVAL : CCI_EADDRNOTAVAIL;
	slash++;
	if (slash[0] == '0' && slash[1] == 'x') {
		int rc = hex_parse(slash + 2, addr, len_p);
		/* A string address must be one in hex too: see below. */
		if (rc == CCI_SUCCESS && sep->info->addr_format == FI_ADDR_STR &&
		    !str_addr_ok(addr, *len_p))
			return CCI_EADDRNOTAVAIL;
		return rc;
	}
	switch (sep->info->addr_format) {
	case FI_SOCKADDR_IN:
		return sockaddr_parse(slash, AF_INET, addr, len_p);
	case FI_SOCKADDR_IN6:
		return sockaddr_parse(slash, AF_INET6, addr, len_p);
	case FI_ADDR_STR:
		if (*slash == '\0' || strlen(slash) + 1 > OFI_ADDR_MAX)
			return CCI_EINVAL;
		memcpy(addr, slash, strlen(slash) + 1);
		*len_p = strlen(slash) + 1;
		return str_addr_ok(addr, *len_p) ? CCI_SUCCESS : CCI_EADDRNOTAVAIL;
	default:
		return CCI_EINVAL;
	}
}

/* A service of cci_create_endpoint_at: a port for IP providers, a short
 * name for string-addressed ones (shm).  CCI_EINVAL otherwise. */
int ofi_service_check(const struct fi_info *info, const char *service)
{
	size_t n = strlen(service);
	uint16_t port;

	if (n == 0 || n > 32)
		return CCI_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)service[i]) && !strchr("_.-", service[i]))
			return CCI_EINVAL;
	if (info->addr_format == FI_ADDR_STR)
		return CCI_SUCCESS;
	if (info->addr_format != FI_SOCKADDR_IN && info->addr_format != FI_SOCKADDR_IN6 &&
	    info->addr_format != FI_SOCKADDR)
		return CCI_EINVAL;
	return (uri_parse_port(service, &port) != 0 || port == 0) ? CCI_EINVAL : CCI_SUCCESS;
}

/* ---- Processes of this host ---- */

static uint64_t fnv1a(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

/* The file at path into buf (cap bytes), NUL-terminated: the bytes read,
 * or -1 when it cannot be opened (for /proc/<pid>: no such process). */
static ssize_t file_read(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* Start time of pid (field 22 of /proc/pid/stat), 0 if unknown. */
static uint64_t proc_start(uint32_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (file_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
	                        "%*d %*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

int ofi_proc_exited(const struct ofi_proc *p)
{
	char path[64], buf[1024], *s;

	snprintf(path, sizeof(path), "/proc/%u/stat", p->pid);
	if (file_read(path, buf, sizeof(buf)) <= 0)
		return 1;
	s = strrchr(buf, ')');
	/* a zombie has exited too, its parent has not reaped it yet */
	return !s || s[1] != ' ' || strchr("ZX", s[2]) || proc_start(p->pid) != p->start;
}

void ofi_proc_self(struct ofi_proc *p)
{
	char boot[64] = "", host[256] = "";
	ssize_t n = file_read("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));

	gethostname(host, sizeof(host) - 1);
	memset(p, 0, sizeof(*p));
	p->host = fnv1a(fnv1a(0xcbf29ce484222325ull, boot, n > 0 ? (size_t)n : 0), host,
	                strlen(host));
	p->pid = (uint32_t)getpid();
	p->start = proc_start(p->pid);
}

/* A watch on the peer process p when it runs on this host, else NULL.
 * The watch is marked dead when the process is already gone. */
struct ofi_pidw *ofi_pidw_get(struct ofi_ep *sep, const struct ofi_proc *p)
{
	struct ofi_pidw *w;

	if (p->host != sep->self.host || p->pid == sep->self.pid || p->start == 0)
		return NULL;
	pthread_mutex_lock(&sep->lock);
	for (w = sep->pidws; w; w = w->next)
		if (w->pid == p->pid && w->start == p->start)
			break;
	if (w) {
		w->refs++;
	} else if ((w = calloc(1, sizeof(*w))) != NULL) {
		w->pid = p->pid;
		w->start = p->start;
		w->refs = 1;
		w->fd = (int)syscall(SYS_pidfd_open, (pid_t)p->pid, 0);
		/* Check the start time after opening: a reused pid is another process. */
		atomic_init(&w->dead, w->fd < 0 || proc_start(p->pid) != p->start);
		w->next = sep->pidws;
		sep->pidws = w;
		if (!atomic_load_explicit(&w->dead, memory_order_relaxed))
			cci__engine_cmd(&sep->eng, OFI_CMD_PIDW); /* the thread watches it */
	}
	pthread_mutex_unlock(&sep->lock);
	return w;
}

/* Has the watched process ended (seen by the thread, or its pidfd
 * readable now, before the thread saw it)?  w may be NULL. */
int ofi_pidw_exited(const struct ofi_pidw *w)
{
	struct pollfd pfd;

	if (!w)
		return 0;
	if (atomic_load_explicit(&w->dead, memory_order_acquire))
		return 1;
	pfd = (struct pollfd){ .fd = w->fd, .events = POLLIN };
	return w->fd >= 0 && poll(&pfd, 1, 0) > 0;
}

/*
 * Is the watched peer process unable to take a message now: gone, or, on
 * a provider that reaches it through shared memory (FI_ADDR_STR: shm),
 * stopped?  libfabric 1.17's shm provider takes the receiver's region lock
 * to send, and a process stopped or killed while it held that lock (in its
 * own progress) holds it until it runs again, or forever: a send there
 * spins until then.  Courtesy messages (DISC at teardown, keepalive PINGs)
 * ask first, so that quitting never waits on a frozen or dead peer.
 */
int ofi_pidw_unreachable(const struct ofi_ep *sep, const struct ofi_pidw *w)
{
	char path[64], buf[512], *p;

	if (!w)
		return 0;
	if (ofi_pidw_exited(w))
		return 1;
	if (sep->info->addr_format != FI_ADDR_STR)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/stat", w->pid);
	if (file_read(path, buf, sizeof(buf)) < 0)
		return 1;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && strchr("tTZX", p[2]) != NULL;
}

/* Drop a reference (sep->lock held).  Like address vector entries, a
 * watch nobody uses stays a while for a peer that reconnects. */
void ofi_pidw_put(struct ofi_pidw *w)
{
	if (w && --w->refs == 0)
		w->idle_ns = cci__now_ns();
}

/* ---- Address vector entries ---- */

/* An address for the log: the URI's form. */
static const char *peer_text(const struct ofi_ep *sep, const uint8_t *addr, size_t len,
                             char *buf, size_t cap)
{
	uint32_t fmt = sep->info->addr_format;

	if ((fmt == FI_SOCKADDR_IN || fmt == FI_SOCKADDR_IN6) && len >= sizeof(struct sockaddr_in))
		cci__sockaddr_str((const struct sockaddr *)addr, buf, cap);
	else if (fmt == FI_ADDR_STR && str_printable(addr, len) && len <= cap)
		memcpy(buf, addr, len);
	else if (addr_hex(addr, len < 32 ? len : 32, buf, cap) != CCI_SUCCESS)
		buf[0] = '\0';
	return buf;
}

/* A peer's address as text, for messages. */
const char *ofi_peer_text(const struct ofi_ep *sep, const struct ofi_peer *peer, char *buf,
                          size_t cap)
{
	if (!peer) {
		snprintf(buf, cap, "?");
		return buf;
	}
	return peer_text(sep, peer->addr, peer->len, buf, cap);
}

/* Entries nobody uses leave the AV now, to make room for another;
 * sep->lock held. */
static void peers_make_room(struct ofi_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	for (struct ofi_peer *p = sep->peers; p; p = p->next)
		if (p->refs == 0 && !atomic_load_explicit(&p->cut, memory_order_acquire)) {
			atomic_store_explicit(&p->cut, 1, memory_order_release);
			fi_av_remove(sep->av, &p->fa, 1, 0);
			sep->npeers--;
		}
}

/* A new AV entry for addr, with a reference in *peer_p: CCI_SUCCESS, or
 * CCI_ENOMEM past the provider's count of peers (domain_attr->ep_cnt:
 * 256 for shm) or memory, CCI_ECONNREFUSED when the AV refuses the
 * address.  sep->lock held. */
static int peer_insert(struct ofi_ep *sep, const uint8_t *addr, size_t len,
                       struct ofi_pidw *owner, struct ofi_peer **peer_p)
{
	struct ofi_peer *p;
	char text[2 * OFI_ADDR_MAX + 8];
	int rc;

	assert(cci__mutex_held(&sep->lock));
	if (sep->peer_max && sep->npeers >= sep->peer_max)
		peers_make_room(sep);
	if (sep->peer_max && sep->npeers >= sep->peer_max) {
		OFI_WARN("ofi: endpoint %s talks to %u peers, the most %s takes: %s refused",
		         sep->ep->uri, sep->npeers, sep->info->fabric_attr->prov_name,
		         peer_text(sep, addr, len, text, sizeof(text)));
		return CCI_ENOMEM;
	}
	if (!(p = calloc(1, sizeof(*p)))) {
		OFI_WARN("ofi: no memory for the address %s", peer_text(sep, addr, len, text, sizeof(text)));
		return CCI_ENOMEM;
	}
	memcpy(p->addr, addr, len);
	p->len = len;
	p->probe_fd = -1;
	rc = fi_av_insert(sep->av, p->addr, 1, &p->fa, 0, NULL);
	if (rc != 1) {
		OFI_LOG(CCI_LOG_CONN, "ofi: fi_av_insert of %s: %s", peer_text(sep, addr, len, text,
		        sizeof(text)), rc < 0 ? ofi_lib.strerror(-rc) : "refused");
		free(p);
		return rc == -FI_ENOMEM ? CCI_ENOMEM : CCI_ECONNREFUSED;
	}
	p->owner = owner;
	p->refs = 1;
	p->next = sep->peers;
	sep->peers = p;
	sep->npeers++;
	*peer_p = p;
	return CCI_SUCCESS;
}

/* The entry of addr in use, with a reference, or NULL; sep->lock held. */
static struct ofi_peer *peer_find(struct ofi_ep *sep, const uint8_t *addr, size_t len)
{
	assert(cci__mutex_held(&sep->lock));
	for (struct ofi_peer *p = sep->peers; p; p = p->next)
		if (!atomic_load_explicit(&p->cut, memory_order_relaxed) && p->len == len &&
		    memcmp(p->addr, addr, len) == 0) {
			p->refs++;
			return p;
		}
	return NULL;
}

/* shm: is an endpoint at addr (ofi_reach.c)?  CCI_SUCCESS with a watch
 * on its process in *owner_p (NULL when unknown, or this process), or
 * CCI_ECONNREFUSED when nobody is there. */
static int peer_owner(struct ofi_ep *sep, const uint8_t *addr, size_t len,
                      struct ofi_pidw **owner_p)
{
	struct ofi_proc pr = { .host = sep->self.host };
	struct ofi_pidw *w = NULL;
	int r;

	*owner_p = NULL;
	if (sep->reach != OFI_REACH_BY_SHM)
		return CCI_SUCCESS;
	r = ofi_reach_shm(addr, len, &pr.pid);
	if (r == OFI_REACH_THERE && pr.pid != sep->self.pid) {
		pr.start = proc_start(pr.pid);
		w = pr.start ? ofi_pidw_get(sep, &pr) : NULL;
		if (!pr.start || (w && atomic_load_explicit(&w->dead, memory_order_acquire)))
			r = OFI_REACH_NOBODY;
	}
	if (r != OFI_REACH_NOBODY) {
		*owner_p = w;
		return CCI_SUCCESS;
	}
	if (w) {
		pthread_mutex_lock(&sep->lock);
		ofi_pidw_put(w);
		pthread_mutex_unlock(&sep->lock);
	}
	OFI_LOG(CCI_LOG_CONN, "ofi: nobody at shm address %s: its region is missing or its "
	        "process is gone", (const char *)addr);
	return CCI_ECONNREFUSED;
}

/* The AV entry of addr, shared: a reference in *peer_p, or
 * CCI_ECONNREFUSED when nobody is there (shm) or the AV refuses the
 * address, CCI_ENOMEM past a limit (peer_insert). */
int ofi_peer_get(struct ofi_ep *sep, const uint8_t *addr, size_t len, struct ofi_peer **peer_p)
{
	struct ofi_pidw *owner;
	int rc = CCI_SUCCESS;

	pthread_mutex_lock(&sep->lock);
	*peer_p = peer_find(sep, addr, len);
	pthread_mutex_unlock(&sep->lock);
	if (*peer_p)
		return CCI_SUCCESS;
	rc = peer_owner(sep, addr, len, &owner);
	if (rc != CCI_SUCCESS)
		return rc;
	pthread_mutex_lock(&sep->lock);
	*peer_p = peer_find(sep, addr, len); /* inserted meanwhile? */
	if (*peer_p || (rc = peer_insert(sep, addr, len, owner, peer_p)) != CCI_SUCCESS)
		ofi_pidw_put(owner); /* not handed to a new entry */
	pthread_mutex_unlock(&sep->lock);
	return rc;
}

/* shm: has the process that owned the peer's region exited since?  Then
 * the provider's mapping of it is a dead region. */
int ofi_peer_owner_gone(const struct ofi_peer *peer)
{
	return peer->owner && ofi_pidw_exited(peer->owner);
}

/* A reference to the watch on the peer's process (shm), or NULL. */
struct ofi_pidw *ofi_peer_owner_ref(struct ofi_ep *sep, struct ofi_peer *peer)
{
	pthread_mutex_lock(&sep->lock);
	if (peer->owner)
		peer->owner->refs++;
	pthread_mutex_unlock(&sep->lock);
	return peer->owner;
}

/* Drop a reference.  An entry nobody uses is removed a while later
 * (ofi_peers_sweep), so a peer reconnecting soon finds it (and whatever
 * the provider holds for it, e.g. an rxm connection) still there.
 * sep->lock held. */
void ofi_peer_put_locked(struct ofi_peer *peer)
{
	if (--peer->refs > 0)
		return;
	peer->idle_ns = cci__now_ns();
}

void ofi_peer_put(struct ofi_ep *sep, struct ofi_peer *peer)
{
	if (!peer)
		return;
	pthread_mutex_lock(&sep->lock);
	ofi_peer_put_locked(peer);
	pthread_mutex_unlock(&sep->lock);
}

/* ---- Is anybody listening (tcp)? ---- */

static void probe_done(struct ofi_peer *p, int r)
{
	char text[64];

	atomic_store_explicit(&p->probe_refused, r == OFI_REACH_NOBODY, memory_order_relaxed);
	if (r != OFI_REACH_NOBODY)
		return;
	cci__sockaddr_str((const struct sockaddr *)p->addr, text, sizeof(text));
	OFI_LOG(CCI_LOG_CONN, "ofi: nobody listens at %s (connection refused)", text);
}

/*
 * Ask whether anybody listens at the peer, for a connect to it that
 * started at since and has no answer yet (sep->lock held): the kernel's
 * listeners for an address of this host, else, if may_connect (rxm has
 * no connection there: our REQ is not out), a TCP connect.  One probe at
 * a time; after one found nobody, at once again for a connect newer than
 * it (a client retrying against a server that is gone); else once every
 * OFI_PROBE_EVERY_NS, so that a live server is probed rarely.
 */
void ofi_peer_probe(struct ofi_peer *peer, uint64_t since, uint64_t now, int may_connect)
{
	int r;

	if (peer->probe_fd >= 0 || atomic_load_explicit(&peer->cut, memory_order_acquire))
		return;
	if (peer->probe_ns &&
	    !(atomic_load_explicit(&peer->probe_refused, memory_order_relaxed) &&
	      since > peer->probe_ns) &&
	    now - peer->probe_ns < OFI_PROBE_EVERY_NS)
		return;
	r = ofi_reach_listener(peer->addr, peer->len);
	if (r == OFI_REACH_UNKNOWN && !may_connect)
		return;
	peer->probe_ns = now;
	atomic_store_explicit(&peer->probe_refused, 0, memory_order_relaxed);
	if (r == OFI_REACH_UNKNOWN)
		r = ofi_reach_probe(peer->addr, peer->len, &peer->probe_fd);
	probe_done(peer, r);
}

/* The probes under way: answered, or given up after OFI_PROBE_WAIT_NS
 * (progress thread). */
void ofi_peers_probe_poll(struct ofi_ep *sep, uint64_t now)
{
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_peer *p = sep->peers; p; p = p->next) {
		int r;
		if (p->probe_fd < 0)
			continue;
		r = ofi_reach_probe_poll(&p->probe_fd);
		if (r != OFI_REACH_PENDING)
			probe_done(p, r);
		else if (now - p->probe_ns > OFI_PROBE_WAIT_NS)
			ofi_reach_probe_cancel(&p->probe_fd);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Did a probe started after since find nobody listening?  sep->lock held. */
int ofi_peer_refused(const struct ofi_peer *peer, uint64_t since)
{
	return atomic_load_explicit(&peer->probe_refused, memory_order_relaxed) &&
	       peer->probe_ns >= since;
}

/* Remove the AV entries and close the pid watches unused for
 * OFI_PEER_IDLE_NS (progress thread, loop lock held). */
void ofi_peers_sweep(struct ofi_ep *sep, uint64_t now)
{
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_peer **pp = &sep->peers; *pp;) {
		struct ofi_peer *p = *pp;
		if (p->refs > 0 || (int64_t)(now - p->idle_ns) < (int64_t)OFI_PEER_IDLE_NS) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (!atomic_load_explicit(&p->cut, memory_order_acquire)) {
			fi_av_remove(sep->av, &p->fa, 1, 0);
			sep->npeers--;
		}
		ofi_reach_probe_cancel(&p->probe_fd);
		ofi_pidw_put(p->owner);
		free(p);
	}
	for (struct ofi_pidw **pp = &sep->pidws; *pp;) {
		struct ofi_pidw *w = *pp;
		if (w->refs > 0 || (!atomic_load_explicit(&w->dead, memory_order_acquire) &&
		                    (int64_t)(now - w->idle_ns) < (int64_t)OFI_PEER_IDLE_NS)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		if (ev_is_active(&w->io_w))
			ev_io_stop(sep->eng.loop, &w->io_w);
		if (w->fd >= 0)
			close(w->fd);
		free(w);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Endpoint destruction, its connections freed and its loop gone: the
 * address vector closes with the endpoint, so just free. */
void ofi_peers_free(struct ofi_ep *sep)
{
	for (struct ofi_peer *p; CCI__SLIST_POP(&sep->peers, p, next);) {
		ofi_reach_probe_cancel(&p->probe_fd);
		free(p);
	}
	for (struct ofi_pidw *w; CCI__SLIST_POP(&sep->pidws, w, next);) {
		if (w->fd >= 0)
			close(w->fd);
		free(w);
	}
}
