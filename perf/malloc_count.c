/*
 * malloc_count.so - counts heap calls of a process (LD_PRELOAD).
 *
 *   MALLOC_COUNT=1 LD_PRELOAD=build/perf/malloc_count.so build/perf/pingpong ...
 *
 * prints, at exit and to stderr, one line per process:
 *   malloc_count[<comm> <pid>]: malloc=N calloc=N realloc=N memalign=N free=N
 * (MALLOC_COUNT_REPORT=1 works too).  perf/alloc_check.sh runs pingpong
 * with two iteration counts and checks that the counts do not grow: the
 * data path must not allocate.
 *
 * The real functions come from dlsym(RTLD_NEXT).  dlsym itself may call
 * calloc before it has returned anything, so allocations made while
 * resolving are served from a small static arena and never freed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

static _Atomic unsigned long n_malloc, n_calloc, n_realloc, n_memalign, n_free;

/* The bootstrap arena: 16-byte aligned chunks, each preceded by its size
 * so that realloc can copy out of it. */
static _Alignas(16) unsigned char arena[16384];
static size_t arena_used;
static bool resolving;

static bool in_arena(const void *p)
{
	return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + sizeof(arena);
}

static void *arena_alloc(size_t n)
{
	size_t need = 16 + ((n + 15) & ~(size_t)15);

	if (need > sizeof(arena) - arena_used)
		return NULL;
	unsigned char *p = arena + arena_used;

	arena_used += need;
	memcpy(p, &n, sizeof(n));
	return p + 16;
}

static size_t arena_size(const void *p)
{
	size_t n;

	memcpy(&n, (const unsigned char *)p - 16, sizeof(n));
	return n;
}

/* dlsym returns void *; copying it avoids the pedantic ISO C complaint
 * about converting an object pointer to a function pointer. */
static void lookup(void *fnptr, const char *name)
{
	void *sym = dlsym(RTLD_NEXT, name);

	memcpy(fnptr, &sym, sizeof(sym));
}

/* Runs on the first call, which happens during start-up while the
 * process has a single thread. */
static void resolve(void)
{
	resolving = true;
	lookup(&real_malloc, "malloc");
	lookup(&real_calloc, "calloc");
	lookup(&real_realloc, "realloc");
	lookup(&real_free, "free");
	lookup(&real_posix_memalign, "posix_memalign");
	lookup(&real_aligned_alloc, "aligned_alloc");
	lookup(&real_memalign, "memalign");
	resolving = false;
}

static bool ready(void)
{
	if (!real_malloc && !resolving)
		resolve();
	return real_malloc != NULL && !resolving;
}

static void count(_Atomic unsigned long *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

EXPORT void *malloc(size_t n)
{
	if (!ready())
		return arena_alloc(n);
	count(&n_malloc);
	return real_malloc(n);
}

EXPORT void *calloc(size_t k, size_t n)
{
	if (!ready())
		return n && k > SIZE_MAX / n ? NULL : arena_alloc(k * n); /* zeroed: fresh arena */
	count(&n_calloc);
	return real_calloc(k, n);
}

EXPORT void *realloc(void *p, size_t n)
{
	bool real = ready();

	if (real)
		count(&n_realloc);
	if (p && !in_arena(p))
		return real_realloc(p, n);
	/* growing out of the arena, or a fresh block */
	void *q = real ? real_malloc(n) : arena_alloc(n);

	if (q && p) {
		size_t old = arena_size(p);

		memcpy(q, p, old < n ? old : n);
	}
	return q;
}

EXPORT void free(void *p)
{
	if (!p || in_arena(p))
		return;
	count(&n_free);
	real_free(p);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (!ready())
		return ENOMEM;
	count(&n_memalign);
	return real_posix_memalign(out, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!ready())
		return NULL;
	count(&n_memalign);
	return real_aligned_alloc(align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
	if (!ready())
		return NULL;
	count(&n_memalign);
	return real_memalign(align, n);
}

static bool wanted(const char *var)
{
	const char *v = getenv(var);

	return v && *v && strcmp(v, "0") != 0;
}

/* Reports with snprintf into a stack buffer and write(2): no heap use
 * while counting the heap. */
__attribute__((destructor)) static void report(void)
{
	char line[512];

	if (!wanted("MALLOC_COUNT") && !wanted("MALLOC_COUNT_REPORT"))
		return;
	int n = snprintf(line, sizeof(line),
			 "malloc_count[%s %ld]: malloc=%lu calloc=%lu realloc=%lu memalign=%lu free=%lu\n",
			 program_invocation_short_name, (long)getpid(), atomic_load(&n_malloc), atomic_load(&n_calloc),
			 atomic_load(&n_realloc), atomic_load(&n_memalign), atomic_load(&n_free));
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
