/* tp_attr.h - the core's function attributes (GCC and Clang; other compilers get plain
 * functions). */
#ifndef TP_ATTR_H
#define TP_ATTR_H

#if defined(__GNUC__)
/* A hot loop nest kept out of its caller: inlined into a large function, its loop counters and
 * pointers are spilled to the stack and every multiply-accumulate reloads them. Also a rare
 * path kept off a hot one's frame. */
#define TP_NOINLINE __attribute__((noinline))
/* The body of a loop its callers specialize (constant arguments), inlined whatever its size. */
#define TP_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define TP_NOINLINE
#define TP_ALWAYS_INLINE static inline
#endif

#endif /* TP_ATTR_H */
