/*
 * cci_info_leftovers.c - cci_info --leftovers / --remove-leftovers: what
 * processes of the library left on this host (shm regions of libfabric's
 * shm provider, sm directories with their socket files), whose they are,
 * how big, and, when asked, their removal.
 *
 * The finding and the judging of owners are plugins/common/leftover.h's,
 * the same code the plugins sweep with: only entries of our uid whose names
 * have the pattern of their kind are looked at, and an entry whose owner
 * runs (pid and start time) is listed as in use and never removed.  What
 * cannot be removed is said, with the reason, and makes the exit status 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cci_info.h"
#include "leftover.h"

#define BASES_MAX 16

struct found {
	struct leftover lo;
	int err; /* -1: not tried (listing, or in use); 0 removed; else errno */
};

struct found_list {
	struct found *v;
	size_t n, cap;
	int oom; /* the list stops short */
};

static int found_add(const struct leftover *lo, void *arg)
{
	struct found_list *l = arg;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct found *v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			l->oom = 1; /* the list so far is shown, and the failure said */
			return 1;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].lo = *lo;
	l->v[l->n++].err = -1;
	return 0;
}

/* The sm bases to look in: the default one of our uid, and the path= of
 * every sm device of the configuration, once each. */
static int sm_bases(cci_device_t *const *devices, char bases[][PATH_MAX])
{
	int n = 1;

	snprintf(bases[0], PATH_MAX, "/tmp/cci-sm-%u", (unsigned)geteuid());
	for (int i = 0; devices && devices[i]; i++) {
		if (strcmp(devices[i]->transport, "sm") != 0)
			continue;
		for (int k = 0; devices[i]->conf_argv[k] && n < BASES_MAX; k++) {
			const char *kv = devices[i]->conf_argv[k];
			int dup = 0;

			if (strncmp(kv, "path=", 5) != 0)
				continue;
			for (int j = 0; j < n; j++)
				dup |= strcmp(bases[j], kv + 5) == 0;
			if (!dup)
				snprintf(bases[n++], PATH_MAX, "%s", kv + 5);
		}
	}
	return n;
}

static const char *kind_name(enum leftover_kind kind)
{
	return kind == LEFTOVER_SHM_REGION ? "ofi shm region" : "sm directory";
}

/* Why an entry stays, in words. */
static const char *why_kept(int err)
{
	switch (err) {
	case EBUSY: return "its owner runs now";
	case ESTALE: return "another entry took its name since it was listed";
	case ENOENT: return "it was gone already";
	default: return strerror(err);
	}
}

static void text_print(const struct found_list *l, int remove)
{
	uint64_t dead_bytes = 0;
	size_t dead = 0, failed = 0;

	for (size_t i = 0; i < l->n; i++) {
		const struct found *f = &l->v[i];

		dead += !f->lo.owner_alive;
		dead_bytes += f->lo.owner_alive ? 0 : f->lo.bytes;
		failed += f->err > 0;
	}
	printf("leftovers: %zu of dead processes (%llu bytes), %zu in use by running ones\n",
	       dead, (unsigned long long)dead_bytes, l->n - dead);
	for (size_t i = 0; i < l->n; i++) {
		const struct found *f = &l->v[i];

		printf("  %s\n    %s, %llu bytes, pid %d: %s", f->lo.path, kind_name(f->lo.kind),
		       (unsigned long long)f->lo.bytes, (int)f->lo.pid,
		       f->lo.owner_alive ? "running (in use, not a leftover)" : "gone");
		if (remove && !f->lo.owner_alive)
			printf("; %s%s", f->err == 0 ? "removed" : "NOT removed: ",
			       f->err == 0 ? "" : why_kept(f->err));
		putchar('\n');
	}
	if (remove)
		printf("removed %zu, could not remove %zu\n", dead - failed, failed);
	else if (dead)
		printf("remove them with: cci_info --remove-leftovers\n");
}

static void json_print(const struct found_list *l, int remove)
{
	printf("{\n  \"uid\": %u,\n  \"leftovers\": [", (unsigned)geteuid());
	for (size_t i = 0; i < l->n; i++) {
		const struct found *f = &l->v[i];

		printf("%s\n    {\"path\": ", i ? "," : "");
		info_json_str(f->lo.path);
		printf(", \"kind\": \"%s\", \"pid\": %d, \"owner\": \"%s\", \"bytes\": %llu",
		       f->lo.kind == LEFTOVER_SHM_REGION ? "shm-region" : "sm-dir", (int)f->lo.pid,
		       f->lo.owner_alive ? "running" : "gone", (unsigned long long)f->lo.bytes);
		if (remove && !f->lo.owner_alive) {
			printf(", \"removed\": %s, \"error\": ", f->err == 0 ? "true" : "false");
			info_json_str(f->err == 0 ? NULL : why_kept(f->err));
		}
		putchar('}');
	}
	printf("%s]\n}\n", l->n ? "\n  " : "");
}

int info_leftovers(cci_device_t *const *devices, int remove, int json)
{
	char bases[BASES_MAX][PATH_MAX];
	struct found_list l = { 0 };
	int nbases = sm_bases(devices, bases), rc = 0, err;

	err = leftover_scan(LEFTOVER_SHM_REGION, LEFTOVER_SHM_DIR, found_add, &l);
	if (err && err != ENOENT) {
		fprintf(stderr, "cci_info: cannot read %s: %s\n", LEFTOVER_SHM_DIR, strerror(err));
		rc = 1;
	}
	for (int b = 0; b < nbases; b++) {
		err = leftover_scan(LEFTOVER_SM_DIR, bases[b], found_add, &l);
		if (err && err != ENOENT) {
			fprintf(stderr, "cci_info: cannot read %s: %s\n", bases[b], strerror(err));
			rc = 1;
		}
	}
	if (l.oom) {
		fprintf(stderr, "cci_info: out of memory after %zu leftovers: the list is short\n",
		        l.n);
		rc = 1;
	}
	for (size_t i = 0; remove && i < l.n; i++) {
		if (l.v[i].lo.owner_alive)
			continue;
		l.v[i].err = leftover_remove(&l.v[i].lo);
		if (l.v[i].err) {
			fprintf(stderr, "cci_info: cannot remove %s (pid %d): %s\n", l.v[i].lo.path,
			        (int)l.v[i].lo.pid, why_kept(l.v[i].err));
			rc = 1;
		}
	}
	if (json)
		json_print(&l, remove);
	else
		text_print(&l, remove);
	free(l.v);
	return rc;
}
