#include <stddef.h>
#include <stdint.h>
#include <emmintrin.h>

typedef uint64_t u64u __attribute__((aligned(1), may_alias));
typedef uint32_t u32u __attribute__((aligned(1), may_alias));

__attribute__((optimize("no-tree-loop-distribute-patterns")))
void *kube_retention_memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n <= 16) {
		if (n >= 8) {
			uint64_t a = *(const u64u *)s, b = *(const u64u *)(s + n - 8);
			*(u64u *)d = a;
			*(u64u *)(d + n - 8) = b;
		} else if (n >= 4) {
			uint32_t a = *(const u32u *)s, b = *(const u32u *)(s + n - 4);
			*(u32u *)d = a;
			*(u32u *)(d + n - 4) = b;
		} else if (n > 0) {
			unsigned char a = s[0], b = s[n / 2], c = s[n - 1];
			d[0] = a;
			d[n / 2] = b;
			d[n - 1] = c;
		}
		return dst;
	}
	if (n <= 32) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + n - 16));
		_mm_storeu_si128((__m128i *)d, a);
		_mm_storeu_si128((__m128i *)(d + n - 16), b);
		return dst;
	}
	if (n <= 512) {
		__m128i x = _mm_loadu_si128((const __m128i *)(s + n - 32));
		__m128i y = _mm_loadu_si128((const __m128i *)(s + n - 16));
		for (size_t i = 0; i + 32 < n; i += 32) {
			__m128i a = _mm_loadu_si128((const __m128i *)(s + i));
			__m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
			_mm_storeu_si128((__m128i *)(d + i), a);
			_mm_storeu_si128((__m128i *)(d + i + 16), b);
		}
		_mm_storeu_si128((__m128i *)(d + n - 32), x);
		_mm_storeu_si128((__m128i *)(d + n - 16), y);
		return dst;
	}
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	return dst;
}

void *memcpy(void *restrict, const void *restrict, size_t) __attribute__((alias("kube_retention_memcpy")));
__attribute__((visibility("hidden"))) void *__memcpy_fwd(void *restrict, const void *restrict, size_t) __attribute__((alias("kube_retention_memcpy")));
