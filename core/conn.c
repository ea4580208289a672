/*
 * conn.c - connection objects: their memory, and the references that
 * keep one alive (the plugin's, and one per queued or lent event, see
 * event.c).  The calls that set connections up and tear them down are in
 * connect.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "spin.h"

#define CONN_ALIGN 64

/*
 * The core part lives in a shell (shell.c) and the plugin's part in an
 * allocation of its own, so that a freed connection's shell can stay
 * mapped, with a dead magic, at the size of every other shell.
 */
cci__conn_t *cci__conn_alloc(cci__ep_t *ep, cci_conn_attribute_t attr, void *context)
{
	size_t priv = (ep->plugin->conn_priv_size + CONN_ALIGN - 1) / CONN_ALIGN * CONN_ALIGN;
	cci__conn_t *c = cci__shell_alloc();

	if (!c)
		return NULL;
	c->priv = aligned_alloc(CONN_ALIGN, priv ? priv : CONN_ALIGN);
	if (!c->priv) {
		cci__shell_free(c);
		return NULL;
	}
	memset(c->priv, 0, priv);
	c->pub.max_send_size = ep->dev->pub.max_send_size;
	c->pub.endpoint = &ep->pub;
	c->pub.attribute = attr;
	c->pub.context = context;
	c->ep = ep;
	c->send_timeout_us = ep->send_timeout_us;
	c->keepalive_us = ep->keepalive_us;
	core_conn(c)->refs = 1; /* the plugin's, dropped by cci__conn_release() */
	core_conn(c)->magic = CCI__MAGIC_CONN;
	return c;
}

/* The last reference is gone: later calls naming c see a dead magic. */
void cci__conn_free(cci__conn_t *c)
{
	if (!c)
		return;
	core_conn(c)->magic = CCI__MAGIC_DEAD_CONN;
	free(c->priv);
	c->priv = NULL;
	cci__shell_free(c);
}

void cci__conn_release(cci__conn_t *c)
{
	cci__ep_t *ep = c->ep;
	int last;

	cci__spin_lock(&core_ep(ep)->lock);
	last = (--core_conn(c)->refs == 0);
	cci__spin_unlock(&core_ep(ep)->lock);
	if (last)
		cci__conn_free(c);
}
