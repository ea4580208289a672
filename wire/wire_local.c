/*
 * wire_local.c - the backend without a launcher: ranks of one host share a
 * directory (CCI_WIRE_DIR, made empty for the job, as cci_wire_launch
 * does) and know their rank and the size from CCI_WIRE_RANK and
 * CCI_WIRE_SIZE.
 *
 * Fence number g of rank r writes every pair r has put so far to
 * DIR/fence.<g>.<r> (a temporary file renamed into place, so a reader sees
 * all of it or nothing); the fence completes when the files of all ranks
 * for g exist, and gets read them.  Files are never rewritten, so a rank
 * that runs ahead into fence g+1 cannot change what g's readers see.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire_int.h"

struct local_pair {
	char *key, *value;
};

struct local_state {
	char dir[PATH_MAX - 64];
	unsigned fence;            /* fences entered */
	struct local_pair *pairs;
	size_t npairs;
	int next_missing;          /* the first rank whose file is not there yet */
};

static int env_int(const char *name, int *out)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end || errno || v < 0 || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 1;
}

static int local_put(struct cci_wire *w, const char *key, const char *value)
{
	struct local_state *s = w->state;
	struct local_pair *grown;
	char *v = strdup(value), *k;

	if (!v)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
	for (size_t i = 0; i < s->npairs; i++)
		if (strcmp(s->pairs[i].key, key) == 0) {
			free(s->pairs[i].value);
			s->pairs[i].value = v;
			return CCI_WIRE_SUCCESS;
		}
	k = strdup(key);
	grown = realloc(s->pairs, (s->npairs + 1) * sizeof(*grown));
	if (!k || !grown) {
		free(k);
		free(v);
		if (grown)
			s->pairs = grown;
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
	}
	s->pairs = grown;
	s->pairs[s->npairs++] = (struct local_pair){ k, v };
	return CCI_WIRE_SUCCESS;
}

static void fence_path(const struct local_state *s, unsigned fence, int rank, char *out,
                       size_t len)
{
	snprintf(out, len, "%s/fence.%u.%d", s->dir, fence, rank);
}

static int local_fence_start(struct cci_wire *w)
{
	struct local_state *s = w->state;
	char path[PATH_MAX], tmp[PATH_MAX];
	FILE *f;
	int bad;

	s->fence++;
	s->next_missing = 0;
	fence_path(s, s->fence, w->rank, path, sizeof(path));
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "CCI_WIRE_DIR=%s: path too long", s->dir);
	f = fopen(tmp, "w");
	if (!f)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "cannot write %s: %s", tmp,
		                 strerror(errno));
	for (size_t i = 0; i < s->npairs; i++)
		fprintf(f, "%s %s\n", s->pairs[i].key, s->pairs[i].value);
	bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
		unlink(tmp);
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "cannot write %s: %s", path,
		                 strerror(errno));
	}
	return CCI_WIRE_SUCCESS;
}

static int local_fence_test(struct cci_wire *w, int *done_p)
{
	struct local_state *s = w->state;
	const struct timespec nap = { .tv_nsec = 2000000L };
	char path[PATH_MAX];

	for (; s->next_missing < w->size; s->next_missing++) {
		fence_path(s, s->fence, s->next_missing, path, sizeof(path));
		if (access(path, F_OK) != 0)
			break;
	}
	*done_p = s->next_missing == w->size;
	if (!*done_p)
		nanosleep(&nap, NULL);
	return CCI_WIRE_SUCCESS;
}

static int local_fence_missing(struct cci_wire *w)
{
	struct local_state *s = w->state;

	return s->next_missing < w->size ? s->next_missing : -1;
}

/* The value of key in a fence file, malloc'd; NULL if absent. */
static char *file_lookup(FILE *f, const char *key)
{
	char line[CCI_WIRE_KEY_MAX + CCI_WIRE_VALUE_MAX + 4];
	size_t n = strlen(key);

	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, n) != 0 || line[n] != ' ')
			continue;
		line[strcspn(line, "\n")] = '\0';
		return strdup(line + n + 1);
	}
	return NULL;
}

static int local_get(struct cci_wire *w, int rank, const char *key, char **value_p)
{
	struct local_state *s = w->state;
	char path[PATH_MAX], *v;
	FILE *f;

	fence_path(s, s->fence, rank, path, sizeof(path));
	f = fopen(path, "r");
	if (!f)
		return wire_fail(w, CCI_WIRE_ENOTFOUND, rank, "get of key '%s' of rank %d: %s: %s",
		                 key, rank, path, strerror(errno));
	v = file_lookup(f, key);
	fclose(f);
	if (!v)
		return wire_fail(w, CCI_WIRE_ENOTFOUND, rank,
		                 "rank %d put no key '%s' before fence %u (%s)", rank, key,
		                 s->fence, path);
	*value_p = v;
	return CCI_WIRE_SUCCESS;
}

static void local_finalize(struct cci_wire *w)
{
	struct local_state *s = w->state;

	for (size_t i = 0; i < s->npairs; i++) {
		free(s->pairs[i].key);
		free(s->pairs[i].value);
	}
	free(s->pairs);
	free(s);
	w->state = NULL;
}

static const struct wire_backend local_ops = {
	.name = "local",
	.put = local_put,
	.fence_start = local_fence_start,
	.fence_test = local_fence_test,
	.get = local_get,
	.finalize = local_finalize,
	.fence_missing = local_fence_missing,
};

int wire_local_open(struct cci_wire *w)
{
	const char *dir = getenv("CCI_WIRE_DIR");
	struct local_state *s;
	int has_rank, has_size;

	has_rank = env_int("CCI_WIRE_RANK", &w->rank);
	has_size = env_int("CCI_WIRE_SIZE", &w->size);
	if ((!dir || !*dir) && has_rank == 0 && has_size == 0)
		return CCI_WIRE_ENOLAUNCHER;
	if (!dir || !*dir || has_rank != 1 || has_size != 1 || w->size < 1 || w->rank >= w->size)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
		                 "local backend: CCI_WIRE_DIR='%s', CCI_WIRE_RANK='%s', "
		                 "CCI_WIRE_SIZE='%s': a directory and 0 <= rank < size needed",
		                 dir ? dir : "", getenv("CCI_WIRE_RANK") ? getenv("CCI_WIRE_RANK") : "",
		                 getenv("CCI_WIRE_SIZE") ? getenv("CCI_WIRE_SIZE") : "");
	if (access(dir, W_OK | X_OK) != 0)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1, "local backend: CCI_WIRE_DIR=%s: %s",
		                 dir, strerror(errno));
	s = calloc(1, sizeof(*s));
	if (!s)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory");
	if (snprintf(s->dir, sizeof(s->dir), "%s", dir) >= (int)sizeof(s->dir)) {
		free(s);
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "CCI_WIRE_DIR=%s: path too long", dir);
	}
	w->state = s;
	w->ops = &local_ops;
	return CCI_WIRE_SUCCESS;
}
