/*
 * shell.c - the memory of the core's endpoint, connection and
 * registration objects ("shells"), kept so that a pointer the application
 * holds past the object's end is recognised rather than followed.
 *
 * Every shell has one size (the largest of the three core structs), so a
 * pointer to any of them may be read at any kind's magic offset without
 * leaving the allocation.  A closed object keeps its shell, with a dead
 * magic, in a process-wide FIFO; the FIFO hands shells out again only
 * once it holds more than CCI__QUARANTINE of them, oldest first, and is
 * given back to malloc only when the library itself is unloaded (not by
 * the last cci_finalize(), after which old pointers must still be
 * recognised).  The memory kept is thus
 * bounded by the peak number of live objects plus CCI__QUARANTINE shells,
 * and checking an object is a load and a compare on memory that is
 * always mapped.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define SHELL_MAX3(a, b, c) ((a) > (b) ? ((a) > (c) ? (a) : (c)) : ((b) > (c) ? (b) : (c)))
/* The FIFO link lives in the last word, past every struct. */
#define SHELL_LINK_OFF SHELL_MAX3(sizeof(struct cci__ep_core), sizeof(struct cci__conn_core), \
                                  sizeof(struct cci__rma_reg_core))
#define SHELL_SIZE ((SHELL_LINK_OFF + sizeof(void *) + 63) / 64 * 64)

/* api/cci.h promises a foreign pointer is read within its first 256 bytes. */
_Static_assert(offsetof(struct cci__ep_core, magic) < 256 &&
	       offsetof(struct cci__conn_core, magic) < 256 &&
	       offsetof(struct cci__rma_reg_core, magic) < 256 &&
	       offsetof(struct cci__evt_core, magic) < 256,
	       "a mark lies past the first 256 bytes of its object");

static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static void *dead_head, *dead_tail; /* oldest first */
static unsigned long dead_count;

static void **shell_link(void *s)
{
	return (void **)((char *)s + SHELL_LINK_OFF);
}

void cci__shell_lock_all(void)
{
	pthread_mutex_lock(&shell_lock);
}

void cci__shell_unlock_all(void)
{
	pthread_mutex_unlock(&shell_lock);
}

void *cci__shell_alloc(void)
{
	void *s = NULL;

	pthread_mutex_lock(&shell_lock);
	if (dead_count > CCI__QUARANTINE) {
		s = dead_head;
		dead_head = *shell_link(s);
		if (!dead_head)
			dead_tail = NULL;
		dead_count--;
	}
	pthread_mutex_unlock(&shell_lock);
	if (!s)
		s = aligned_alloc(64, SHELL_SIZE);
	if (s)
		memset(s, 0, SHELL_SIZE);
	return s;
}

void cci__shell_free(void *s)
{
	if (!s)
		return;
	*shell_link(s) = NULL;
	pthread_mutex_lock(&shell_lock);
	if (dead_tail)
		*shell_link(dead_tail) = s;
	else
		dead_head = s;
	dead_tail = s;
	dead_count++;
	pthread_mutex_unlock(&shell_lock);
}

/* The library is being unloaded (dlclose(), or the process's exit): no
 * call can bring an old pointer any more, so the kept shells go back to
 * malloc (after a dlclose() nothing would reach them). */
__attribute__((destructor)) static void shells_release(void)
{
	pthread_mutex_lock(&shell_lock);
	while (dead_head) {
		void *next = *shell_link(dead_head);

		free(dead_head);
		dead_head = next;
	}
	dead_tail = NULL;
	dead_count = 0;
	pthread_mutex_unlock(&shell_lock);
}
