/*
 * How long a cache line takes to go from one CPU to another and back: the
 * cost the decrypt fan-out pays for every line of a packet, job box or ring
 * slot it moves between workers (docs/multicore.md, "Why the fan-out does
 * not pay on this machine").
 *
 *   cc -O2 -pthread -static -o c2c-latency bench/c2c-latency.c
 *   ./c2c-latency A B [A B ...]      # CPU pairs; default: 0 1
 *
 * Two threads pinned to CPUs A and B pass a counter back and forth through
 * one cache line (each waits for the other's value, then writes the next):
 * every step is one transfer of the line. Prints, per pair, the median and
 * the 90th percentile of 31 rounds of 100000 round trips, in nanoseconds
 * per round trip (two transfers), from CLOCK_MONOTONIC.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define TRIPS 100000
#define ROUNDS 31

static _Alignas(64) _Atomic uint64_t line;
static _Alignas(64) _Atomic int go;

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
		fprintf(stderr, "cannot pin to CPU %d\n", cpu);
		exit(1);
	}
}

static void *echo(void *arg)
{
	pin(*(int *)arg);
	for (int r = 0; r < ROUNDS; r++) {
		while (atomic_load_explicit(&go, memory_order_acquire) <= r)
			;
		for (uint64_t i = 1; i <= 2 * TRIPS; i += 2) {
			while (atomic_load_explicit(&line, memory_order_acquire) != i)
				;
			atomic_store_explicit(&line, i + 1, memory_order_release);
		}
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	int pairs[64][2] = { { 0, 1 } }, n = 1;
	if (argc > 1) {
		n = 0;
		for (int i = 1; i + 1 < argc && n < 64; i += 2, n++) {
			pairs[n][0] = atoi(argv[i]);
			pairs[n][1] = atoi(argv[i + 1]);
		}
	}
	for (int p = 0; p < n; p++) {
		int b = pairs[p][1];
		double ns[ROUNDS];
		pthread_t t;
		atomic_store(&line, 0);
		atomic_store(&go, 0);
		pthread_create(&t, NULL, echo, &b);
		pin(pairs[p][0]);
		for (int r = 0; r < ROUNDS; r++) {
			atomic_store(&line, 0);
			atomic_store_explicit(&go, r + 1, memory_order_release);
			double t0 = now_ns();
			for (uint64_t i = 0; i < 2 * TRIPS; i += 2) {
				atomic_store_explicit(&line, i + 1, memory_order_release);
				while (atomic_load_explicit(&line, memory_order_acquire) != i + 2)
					;
			}
			ns[r] = (now_ns() - t0) / TRIPS;
		}
		pthread_join(t, NULL);
		qsort(ns, ROUNDS, sizeof ns[0], cmp);
		printf("cpus %d %d: round trip p50 %.1f ns, p90 %.1f ns\n", pairs[p][0], b,
		       ns[ROUNDS / 2], ns[ROUNDS * 9 / 10]);
	}
	return 0;
}
