/* The host's speed now: milliseconds for a fixed ALU loop, the fastest of 3 runs (about 56
 * ms on these machines in a fast phase; slow phases of the host take 2-4x longer for
 * seconds to minutes). scripts/bench.sh runs it before and after each half of each round,
 * so that a round whose dagrt half and peers half ran on two different machines shows. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void)
{
    double best = 1e30;
    for (int k = 0; k < 3; k++) {
        double t0 = now_ms();
        volatile uint64_t x = 0;
        for (uint64_t i = 0; i < 100000000ULL; i++)
            x += i * i;
        double ms = now_ms() - t0;
        if (ms < best)
            best = ms;
    }
    printf("%.1f\n", best);
    return 0;
}
