/* tp_optim.c - the quantized-domain update (reference/backward.py ReferenceTrainer): QAS,
 * stochastic rounding keyed by (seed, step, offset), optional classical momentum. */
#include "tp_optim.h"
#include "tinyprop.h"

#include <string.h>

#include "tp_attr.h"
#include "tp_le.h"

static float floor_f32(float x)
{
    float t = (float)(int32_t)x;
    return x < t ? t - 1.0f : t;
}

static uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static float uniform01(uint32_t key, uint32_t index)
{
    uint32_t h = fmix32(index * 0x9E3779B1u + key);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

/* floor(delta) + (r < frac), after NaN -> 0 and a clamp to +-limit. */
static int32_t stochastic_round(float d, float r, float limit)
{
    float fl, frac;
    if (d != d) {
        d = 0.0f;
    }
    d = d < -limit ? -limit : d;
    d = d > limit ? limit : d;
    fl = floor_f32(d);
    frac = d - fl;
    return (int32_t)fl + (r < frac ? 1 : 0);
}

uint32_t tp_optim_step_key(uint32_t seed, uint32_t step)
{
    return fmix32(seed + step * 0x85EBCA77u);
}

/* Classical momentum on velocity i and the real-valued gradient g: v = m * v + g (two
 * float32 roundings, no FMA), stored back; returns v, which the update then scales exactly
 * like a plain SGD gradient (QAS included). Without optimizer state the update is plain SGD
 * on g. memcpy: the caller's params region may have any alignment. */
static float momentum_step(const tp_update *u, uint32_t i, float g)
{
    float v, mv;
    if (u->velocity == NULL) {
        return g;
    }
    memcpy(&v, u->velocity + 4u * i, 4u);
    mv = u->momentum * v;
    v = mv + g;
    memcpy(u->velocity + 4u * i, &v, 4u);
    return v;
}

void tp_optim_update_bias(const tp_update *u, uint32_t bias_params, uint32_t o, float db, float sw)
{
    uint8_t *b = u->params + bias_params + 4u * o;
    float seff = sw > u->scale_floor ? sw : u->scale_floor, step, delta;
    uint32_t bits;
    int64_t v;
    memcpy(&bits, &db, 4u);
    if (u->velocity == NULL && bits << 1 == 0u) {
        return; /* a +-0 gradient (a dead channel's): step and delta +-0 or NaN, the update 0 */
    }
    step = u->lr * momentum_step(u, o, db);
    delta = u->qas ? -(step / (seff * u->s_x)) : -(step * (sw * u->s_x));
    v = (int64_t)tp_rd_i32(b) +
        stochastic_round(delta, uniform01(u->key, bias_params + 4u * o), 1e9f);
    tp_wr_i32(b, v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : (int32_t)v));
}

/* (k / 2^24) as float32, k < 2^24 (exact): one fixed-point VCVT where the FPU has it. */
static inline float unit24(uint32_t k)
{
#if defined(__ARM_FP) && (__ARM_FP & 4) && defined(__thumb2__)
    float r;
    __asm__("vmov %0, %1\n\tvcvt.f32.u32 %0, %0, #24" : "=t"(r) : "r"(k));
    return r;
#else
    return (float)k * (1.0f / 16777216.0f);
#endif
}

/* trunc(q 2^24) as int32: one fixed-point VCVT where the FPU has it, which saturates (|q| >= 128
 * gives +-(2^31 - 1) or -2^31) and takes NaN to 0; else q is checked first, |q| < 64. Returns 0
 * when q is out of range. */
#if defined(__ARM_FP) && (__ARM_FP & 4) && defined(__thumb2__)
static inline int fix24(float q, int32_t *d)
{
    __asm__("vcvt.s32.f32 %0, %0, #24" : "+t"(q));
    memcpy(d, &q, 4u);
    return 1;
}
#else
static inline int fix24(float q, int32_t *d)
{
    uint32_t qb;
    memcpy(&qb, &q, 4u);
    if ((qb & 0x7FFFFFFFu) >= 0x42800000u) { /* |q| >= 64, infinite or NaN */
        return 0;
    }
    *d = (int32_t)(q * 16777216.0f);
    return 1;
}
#endif

/* QAS's delta = RN(step / neg) settled without the division where it can be: q = RN(step inv),
 * inv = RN(1 / neg), is within 3.0002 |delta| 2^-24 of delta when |q| < 64 (two roundings of
 * relative error 2^-24 each, and delta's own; tiny and zero values lose only below 2^-126). The
 * update is floor(delta) + [r < frac] with r = k 2^-24: floor((delta 2^24 - k) / 2^24) + 1,
 * except where delta 2^24 - k is within half a unit of a multiple of 2^24 (the negative deltas'
 * fraction (delta - t) + 1 is rounded to float32, by at most 2^-25). With d = trunc(q 2^24)
 * (delta 2^24 within d - 3.0002 |q| - 1 .. d + 3.0002 |q| + 1) and a margin m >= 8 |q| + 3
 * (12 while |d| <= 2^24, else |d| / 2^21 + 4), every value in d - k +- m with the same
 * floor(/ 2^24) gives that update: it is taken (*st) and 1 returned; else 0 (row_step divides:
 * about one weight in 2^19.4 when |delta| < 1: 24 units of 2^24). A NaN q (d 0 from the VCVT) is a
 * NaN delta, which stochastic_round takes as 0: the update of delta 0. Offset binary: x = d - k +
 * 2^31 lies in (2^30 - 2^24, 3 2^30). */
static inline int qas_quick(float q, uint32_t k, int32_t *st)
{
    uint32_t m, x;
    int32_t d;
    if (!fix24(q, &d)) {
        return 0;
    }
    if ((uint32_t)d + 0x01000000u <= 0x02000000u) { /* |d| <= 2^24 */
        m = 12u;
    } else if ((uint32_t)d + 0x40000000u < 0x80000000u) { /* |d| < 2^30 */
        m = ((d < 0 ? 0u - (uint32_t)d : (uint32_t)d) >> 21) + 4u;
    } else {
        return 0;
    }
    x = (uint32_t)d - k + 0x80000000u;
    if ((x - m) >> 24 != (x + m) >> 24) {
        return 0;
    }
    *st = (int32_t)((x - m) >> 24) - 127;
    return 1;
}

/* One weight's update (tp_optim_update_row), the flags constant in each caller below so each
 * loop is straight code: QAS or not, with momentum (velocity vel) or not. neg is -seff (QAS)
 * or -sw: -(a / b) = a / -b and -(a * b) = a * -b exactly. h is the weight's hash input
 * (uniform01's). In the usual case |delta| < 256 (tested on its bits: NaN fails too):
 * t = trunc(delta), delta - t exact (the fraction's bits of delta), negative when floor(delta)
 * = t - 1, whose fraction delta - (t - 1) is then (delta - t) + 1 rounded as float32 (the same
 * real value); else stochastic_round's clamp. */
static inline int32_t row_step(uint8_t *vel, float lr, float mom_f, float g, float neg, float inv,
                               uint32_t h, int qas, int mom)
{
    float v = g, step, delta, r, t, frac;
    int32_t fl;
    uint32_t bits, k = fmix32(h) >> 8;
    if (mom) {
        float mv;
        memcpy(&v, vel, 4u);
        mv = mom_f * v;
        v = mv + g;
        memcpy(vel, &v, 4u);
    }
    step = lr * v;
    if (qas && qas_quick(step * inv, k, &fl)) {
        return fl;
    }
    delta = qas ? step / neg : step * neg;
    r = unit24(k);
    memcpy(&bits, &delta, 4u);
    if (bits << 1 >= 0x43800000u << 1) {
        return stochastic_round(delta, r, 256.0f);
    }
    fl = (int32_t)delta;
    t = (float)fl;
    frac = delta - t;
    if (frac < 0.0f) {
        return fl - 1 + (r < frac + 1.0f ? 1 : 0);
    }
    return fl + (r < frac ? 1 : 0);
}

/* The 0x80 bits of the word of 4 weights at w flag those that may be -128: the zero-byte test
 * of w ^ 0x80 (exact for the lowest, maybe set above a true one too; never a miss). */
static inline uint32_t min_flags(const int8_t *w)
{
    uint32_t v;
    memcpy(&v, w, 4u);
    v ^= 0x80808080u;
    return (v - 0x01010101u) & ~v & 0x80808080u;
}

/* Bits j of the (up to 32) weights w[0..n) that may be -128 (min_flags'), a word's four flags
 * gathered by one product (as tp_gradmap.c's gather8). */
static uint32_t at_min(const int8_t *w, uint32_t n)
{
    uint32_t j, bits = 0u, f;
    for (j = 0; j + 4u <= n; j += 4u) {
        f = min_flags(w + j);
        if (!tp_little_endian()) { /* byte j + b at bit 7 + 8 (3 - b) */
            f = (f >> 24 | (f >> 8 & 0xFF00u) | (f << 8 & 0xFF0000u) | f << 24);
        }
        bits |= ((f >> 7) * 0x00204081u >> 21 & 0xFu) << j;
    }
    for (; j < n; j++) {
        bits |= (w[j] == -128 ? 1u : 0u) << j;
    }
    return bits;
}

/* Whether the n weights w may hold a -128 (min_flags' over the row). */
static int row_may_hold_min(const int8_t *w, uint32_t n)
{
    uint32_t j, f = 0u;
    for (j = 0; j + 4u <= n; j += 4u) {
        f |= min_flags(w + j);
    }
    for (; j < n; j++) {
        f |= w[j] == -128 ? 0x80u : 0u;
    }
    return f != 0u;
}

/* The weights of a row's block of 32 from k0 (n in all) update_row visits with live and no
 * velocity: those whose gradient may be nonzero and (mins: the row may hold one) those whose
 * weight may be -128. */
TP_ALWAYS_INLINE uint32_t visited(const int8_t *w, uint32_t k0, uint32_t n, const uint32_t *live,
                                  int mins)
{
    uint32_t cnt = n - k0 < 32u ? n - k0 : 32u;
    uint32_t all = cnt == 32u ? 0xFFFFFFFFu : (1u << cnt) - 1u, lw = live[k0 >> 5] & all;
    return lw == all || !mins ? lw : lw | at_min(w + k0, cnt);
}

/* Weight k of update_row's row: left as it is when its gradient is +-0 without a velocity
 * (delta +-0, whose update is 0: a pruned input's) unless it is -128 (clamped to -127). */
TP_ALWAYS_INLINE void update_one(int8_t *w, uint8_t *vel, const float *grad, uint32_t k,
                                 uint32_t h0, float lr, float mom_f, float neg, float inv, int qas,
                                 int mom)
{
    uint32_t gb;
    int32_t nv;
    memcpy(&gb, grad + k, 4u);
    if (!mom && gb << 1 == 0u && w[k] != -128) {
        return;
    }
    nv = (int32_t)w[k] + row_step(mom ? vel + 4u * k : NULL, lr, mom_f, grad[k], neg, inv,
                                  h0 + k * 0x9E3779B1u, qas, mom);
    w[k] = (int8_t)(nv > 127 ? 127 : (nv < -127 ? -127 : nv));
}

/* update_row's four loops each specialized by its constant flags, whatever its size: every
 * weight in order, or (live, no velocity) in blocks of 32 the ones visited() names, a bit's
 * index by count-trailing-zeros (RBIT and CLZ on Thumb-2). */
TP_ALWAYS_INLINE void update_row(const tp_update *u, uint32_t row_params, uint32_t v0,
                                 const float *grad, uint32_t n, float neg, int qas, int mom,
                                 const uint32_t *live)
{
    uint32_t k, k0, h0 = row_params * 0x9E3779B1u + u->key;
    int8_t *w = (int8_t *)(u->params + row_params);
    uint8_t *vel = mom ? u->velocity + 4u * v0 : NULL;
    float lr = u->lr, mom_f = u->momentum, inv = qas ? 1.0f / neg : 0.0f;
    int mins;
    if (mom || live == NULL) {
        for (k = 0; k < n; k++) {
            update_one(w, vel, grad, k, h0, lr, mom_f, neg, inv, qas, mom);
        }
        return;
    }
    mins = row_may_hold_min(w, n);
    for (k0 = 0; k0 < n; k0 += 32u) {
        uint32_t todo = visited(w, k0, n, live, mins);
        while (todo != 0u) {
            k = k0 + (uint32_t)__builtin_ctz(todo);
            todo &= todo - 1u;
            update_one(w, vel, grad, k, h0, lr, mom_f, neg, inv, qas, 0);
        }
    }
}

/* Whether a row's gradient is all +-0 (a dead channel's: its dY is zero everywhere): four
 * values a turn, the sign bits shifted out of their OR. */
static int row_is_zero(const float *grad, uint32_t n)
{
    uint32_t i = 0u, bits = 0u, v[4];
    for (; i + 4u <= n && bits == 0u; i += 4u) {
        memcpy(&v[0], grad + i, 4u); /* word loads, never a call of the C library's memcpy */
        memcpy(&v[1], grad + i + 1u, 4u);
        memcpy(&v[2], grad + i + 2u, 4u);
        memcpy(&v[3], grad + i + 3u, 4u);
        bits = (v[0] | v[1] | v[2] | v[3]) << 1;
    }
    for (; i < n && bits == 0u; i++) {
        memcpy(v, grad + i, 4u);
        bits = v[0] << 1;
    }
    return bits == 0u;
}

void tp_optim_update_row(const tp_update *u, uint32_t row_params, uint32_t v0, const float *grad,
                         uint32_t n, float sw, const uint32_t *live)
{
    float seff = sw > u->scale_floor ? sw : u->scale_floor;
    if (u->velocity == NULL && row_is_zero(grad, n)) {
        return; /* every delta +-0 (or NaN, taken as 0): every update 0 */
    }
    if (u->qas && u->velocity != NULL) {
        update_row(u, row_params, v0, grad, n, -seff, 1, 1, live);
    } else if (u->qas) {
        update_row(u, row_params, v0, grad, n, -seff, 1, 0, live);
    } else if (u->velocity != NULL) {
        update_row(u, row_params, v0, grad, n, -sw, 0, 1, live);
    } else {
        update_row(u, row_params, v0, grad, n, -sw, 0, 0, live);
    }
}
