/* LD_PRELOAD kernel timer for the tiled Cholesky programs (dagrt's example and the peers'):
 * wraps the four tile kernels (cblas_dgemm, cblas_dsyrk, cblas_dtrsm, LAPACKE_dpotrf), sums
 * the time spent inside them and prints it at exit:
 *     KERNELS <calls> total_ms <ms>
 * Calls on matrices larger than 512 (the whole-matrix residual check) are not counted.
 * scripts/chol_efficiency.sh divides the total by threads x wall time: the share of the
 * workers' time spent in kernels, which does not depend on how fast this (noisy, shared)
 * machine runs the kernels at that moment, unlike GFLOP/s.
 * With KERNEL_TIMER_CPU=1 it also sums each call's thread CPU time (CLOCK_THREAD_CPUTIME_ID,
 * a system call: two more per kernel) and prints it as "cpu_ms <ms>" after the total: wall
 * over CPU time is the share of kernel time a lane lost to preemption.
 * With KERNEL_TIMER_LOG=FILE it also appends one line per counted call to FILE at exit,
 * "tid start_ns end_ns" (CLOCK_MONOTONIC; the first 1 << 20 calls): the gaps between one
 * thread's kernels are what the runtime costs it per task (scripts/chol_gaps.py). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>
#include <stdatomic.h>
#include <cblas.h>
#include <lapacke.h>
static _Atomic long ns_total, calls, cpu_total;
#define LOG_MAX (1L << 20)
static struct { int tid; long t0, t1; } *log_buf;
static _Atomic long log_n;
static int with_log;
/* Set up before main, not at the first kernel call: lanes making their first calls at once
 * would each allocate a buffer, and the calls logged into the one replaced would be lost. */
__attribute__((constructor)) static void log_setup(void) {
  const char *v = getenv("KERNEL_TIMER_LOG");
  if (v && *v) log_buf = calloc(LOG_MAX, sizeof *log_buf);
  with_log = log_buf != NULL;
}
static void log_call(long t0, long t1) {
  if (!with_log) return;
  long i = atomic_fetch_add(&log_n, 1);
  if (i < LOG_MAX) { log_buf[i].tid = (int)gettid(); log_buf[i].t0 = t0; log_buf[i].t1 = t1; }
}
static int with_cpu = -1;
static long now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1000000000L+t.tv_nsec;}
static long cpu_now(void){
  if (with_cpu < 0) { const char *v = getenv("KERNEL_TIMER_CPU"); with_cpu = v && *v == '1'; }
  if (!with_cpu) return 0;
  struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t); return t.tv_sec*1000000000L+t.tv_nsec;}
/* Time one kernel call into the totals. */
#define TIMED(call) long c0=cpu_now(), t0=now(); call; long t1=now(), d=t1-t0; atomic_fetch_add(&cpu_total,cpu_now()-c0); atomic_fetch_add(&ns_total,d); atomic_fetch_add(&calls,1); log_call(t0,t1);
void cblas_dgemm(const enum CBLAS_ORDER o, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
  const blasint m, const blasint n, const blasint k, const double alpha, const double *a, const blasint lda,
  const double *b, const blasint ldb, const double beta, double *c, const blasint ldc) {
  static void (*r)(); if(!r) r=dlsym(RTLD_NEXT,"cblas_dgemm");
  TIMED(r(o,ta,tb,m,n,k,alpha,a,lda,b,ldb,beta,c,ldc))
}
void cblas_dsyrk(const enum CBLAS_ORDER o, const enum CBLAS_UPLO u, const enum CBLAS_TRANSPOSE t,
  const blasint n, const blasint k, const double alpha, const double *a, const blasint lda,
  const double beta, double *c, const blasint ldc) {
  static void (*r)(); if(!r) r=dlsym(RTLD_NEXT,"cblas_dsyrk");
  if (n > 512) { r(o,u,t,n,k,alpha,a,lda,beta,c,ldc); return; }   /* the residual check */
  TIMED(r(o,u,t,n,k,alpha,a,lda,beta,c,ldc))
}
void cblas_dtrsm(const enum CBLAS_ORDER o, const enum CBLAS_SIDE s, const enum CBLAS_UPLO u,
  const enum CBLAS_TRANSPOSE t, const enum CBLAS_DIAG dg, const blasint m, const blasint n,
  const double alpha, const double *a, const blasint lda, double *b, const blasint ldb) {
  static void (*r)(); if(!r) r=dlsym(RTLD_NEXT,"cblas_dtrsm");
  TIMED(r(o,s,u,t,dg,m,n,alpha,a,lda,b,ldb))
}
lapack_int LAPACKE_dpotrf(int layout, char uplo, lapack_int n, double *a, lapack_int lda) {
  static lapack_int (*r)(int,char,lapack_int,double*,lapack_int); if(!r) r=dlsym(RTLD_NEXT,"LAPACKE_dpotrf");
  if (n > 512) return r(layout,uplo,n,a,lda);
  lapack_int x; TIMED(x=r(layout,uplo,n,a,lda)) return x;
}
__attribute__((destructor)) static void report(void) {
  if (with_log) {
    FILE *f = fopen(getenv("KERNEL_TIMER_LOG"), "a");
    long n = log_n < LOG_MAX ? log_n : LOG_MAX;
    for (long i = 0; f && i < n; i++) fprintf(f, "%d %ld %ld\n", log_buf[i].tid, log_buf[i].t0, log_buf[i].t1);
    if (f) fclose(f);
  }
  if (calls && with_cpu > 0)
    fprintf(stderr, "KERNELS %ld total_ms %.2f cpu_ms %.2f\n", calls, ns_total / 1e6, cpu_total / 1e6);
  else if (calls)
    fprintf(stderr, "KERNELS %ld total_ms %.2f\n", calls, ns_total / 1e6);
}
