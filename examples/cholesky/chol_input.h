/* Input, check and counts of the tiled Cholesky showcase, copied verbatim from the peers'
 * chol_common.h (shared/bench/peers/cholesky) so that dagrt factors exactly the same matrix
 * and is judged by the same check as the OpenMP and StarPU peers. Keep the two identical.
 *
 * Matrix: n x n, double, column-major, ONE array with leading dimension n.
 * Tile (i, j) (tile row i, tile column j) of size b x b starts at A + j*b*n + i*b and
 * is addressed with leading dimension n: tiles are strided views, never copied out.
 * Input: reproducible SPD matrix A = S + n*I, S symmetric with entries uniform in [0, 1)
 * from a fixed-seed xorshift64* generator (identical for every peer).
 * Check: ||A - L L^T||_F / ||A||_F over the full symmetric matrix.
 */
#ifndef CHOL_INPUT_H
#define CHOL_INPUT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>

/* OpenBLAS extensions (declared here so that cblas.h variants without them still build). */
extern int openblas_get_num_threads(void);
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern void openblas_set_num_threads(int);

static inline double chol_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The calling thread's CPU time, in seconds. */
static inline double chol_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static inline double chol_rand01(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* Fill the full (both triangles) symmetric SPD matrix. */
static void chol_gen_spd(double *A, int n)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++) {
            double v = chol_rand01(&s);
            if (i == j) v += n;
            A[(size_t)j * n + i] = v;
            A[(size_t)i * n + j] = v;
        }
}

/* ||A0 - L L^T||_F / ||A0||_F, L = lower triangle of F (upper part of F ignored).
 * Uses one O(n^3) dsyrk; symmetric, so off-diagonal entries of the lower triangle count twice. */
static double chol_residual(const double *A0, const double *F, int n)
{
    double *L = malloc((size_t)n * n * sizeof(double));
    double *C = malloc((size_t)n * n * sizeof(double));
    if (!L || !C) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            L[(size_t)j * n + i] = (i >= j) ? F[(size_t)j * n + i] : 0.0;
    memcpy(C, A0, (size_t)n * n * sizeof(double));
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, n, n, -1.0, L, n, 1.0, C, n);
    double num = 0.0, den = 0.0;
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++) {
            double w = (i == j) ? 1.0 : 2.0;
            double c = C[(size_t)j * n + i], a = A0[(size_t)j * n + i];
            num += w * c * c;
            den += w * a * a;
        }
    free(L);
    free(C);
    return sqrt(num) / sqrt(den);
}

/* Tiled right-looking Cholesky task counts for N = n/b tile rows. */
static inline long chol_task_count(long N)
{
    return N                          /* POTRF */
         + N * (N - 1) / 2            /* TRSM  */
         + N * (N - 1) / 2            /* SYRK  */
         + N * (N - 1) * (N - 2) / 6; /* GEMM  */
}

static inline double chol_gflops(int n, double sec)
{
    return (double)n * n * n / 3.0 / sec / 1e9;
}

#endif
