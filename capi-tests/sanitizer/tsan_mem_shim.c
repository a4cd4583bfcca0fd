/*
 * Linked into the C test programs by scripts/test-tsan.sh only. libdagrt built by rustc with
 * -Zsanitizer=thread calls __tsan_memcpy / __tsan_memmove / __tsan_memset (newer LLVM
 * instrumentation), which GCC 12's libtsan does not define. Route them through the libc
 * functions, which libtsan intercepts and checks.
 */
#include <string.h>

void *__tsan_memcpy(void *dst, const void *src, size_t n);
void *__tsan_memmove(void *dst, const void *src, size_t n);
void *__tsan_memset(void *dst, int c, size_t n);

void *__tsan_memcpy(void *dst, const void *src, size_t n)
{
    return memcpy(dst, src, n);
}

void *__tsan_memmove(void *dst, const void *src, size_t n)
{
    return memmove(dst, src, n);
}

void *__tsan_memset(void *dst, int c, size_t n)
{
    return memset(dst, c, n);
}
