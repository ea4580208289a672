/*
 * baseline.h - what the bare baselines (baseline_tcp, baseline_udp) share:
 * the clock, errors, option values, CPU pinning and pingpong's timing rule
 * (from 1000 iterations on, round trips timed in batches of 100, the
 * median batch), so that their figures compare with ours.
 */
#ifndef CCI_PERF_BASELINE_H
#define CCI_PERF_BASELINE_H

#include <stdint.h>

#define BL_BATCH 100

/* The program's name in error messages (set by main). */
extern const char *bl_prog;

uint64_t bl_now_ns(void);
/* Print "prog: what: strerror(errno)" and exit with failure. */
void bl_die(const char *what) __attribute__((noreturn));
/* A decimal or 0x number with an optional k/m/g suffix; exits on junk. */
uint64_t bl_parse_size(const char *s);
/* "S,C" of --pin into pin[0] (server) and pin[1] (client); exits on junk. */
void bl_parse_pin(const char *arg, int pin[2]);
/* Put this process on cpu (nothing when -1). */
void bl_pin_to(int cpu);
/* One-way microseconds of iters round trips (after warmup untimed ones),
 * each made by round(arg), by the rule above. */
double bl_pingpong_us(uint32_t iters, uint32_t warmup, void (*round)(void *arg), void *arg);

#endif /* CCI_PERF_BASELINE_H */
