/* tp_quant.h - TFLite's integer arithmetic, mirroring host/tinyprop/reference/quant.py function by
 * function (same names without the leading underscore), so C and NumPy agree bit for bit.
 *
 * quant.py computes on int64 NumPy values (wrapping on overflow); these functions do the same
 * with explicit two's-complement wrapping, so no input, however wild, is undefined behaviour.
 */
#ifndef TP_QUANT_H
#define TP_QUANT_H

#include <stdint.h>

#define TP_INT32_MIN (-2147483647 - 1)
#define TP_INT32_MAX 2147483647

/* Value of a 32-bit pattern as int32 (Python's _wrap32). */
int32_t tp_wrap32(int64_t v);

/* gemmlowp SaturatingRoundingDoublingHighMul on int64 inputs (quant.srdhm). */
int64_t tp_srdhm(int64_t a, int64_t b);

/* gemmlowp RoundingDivideByPOT, round half away from zero; 0 <= exponent <= 63. */
int64_t tp_rounding_divide_by_pot(int64_t x, int32_t exponent);

/* TFLite MultiplyByQuantizedMultiplier with double rounding; -31 <= shift <= 30. */
int64_t tp_mbqm(int64_t x, int32_t multiplier, int32_t shift);

/* An IEEE binary64 value held in integers, for the one double computation the int8 spec has
 * (TFLite's reference FULLY_CONNECTED) without floating-point code: a target without a double
 * FPU (the Cortex-M4F, RV32) links no soft-double library. A finite value is
 * (-1)^neg * mant * 2^exp with mant in [2^52, 2^53), or mant 0 for zero. The operations round to
 * nearest even exactly as binary64 does while results stay normal doubles, which holds for
 * every product and quotient of float32s and int64s the kernels form (|exponent| < 500). */
typedef struct {
    uint64_t mant;
    int32_t exp;
    uint8_t neg;
    uint8_t cls; /* TP_F64_* */
} tp_f64;

#define TP_F64_FINITE 0u
#define TP_F64_INF 1u
#define TP_F64_NAN 2u

/* The double of a float32 (given as its bits, exact) and of an int64 ((double)x). */
tp_f64 tp_f64_of_f32_bits(uint32_t bits);
tp_f64 tp_f64_of_i64(int64_t x);
/* a * b and a / b, rounded to nearest even like binary64 (infinities and NaNs as IEEE). */
tp_f64 tp_f64_mul(tp_f64 a, tp_f64 b);
tp_f64 tp_f64_div(tp_f64 a, tp_f64 b);

/* FULLY_CONNECTED's real scale (double)s_in * (double)s_w / (double)s_out (opparams'
 * real_scale), from the float32s' bits. */
tp_f64 tp_real_scale(uint32_t s_in_bits, uint32_t s_w_bits, uint32_t s_out_bits);

/* round(acc * real_scale) in double, half away from zero (quant.requantize_double): TFLite's
 * reference FULLY_CONNECTED. Saturates at +-2^32, far outside int8 (and maps NaN to 0). */
int64_t tp_requantize_double(int64_t acc, const tp_f64 *real_scale);

/* Average pooling's division by a positive count, rounding half away from zero as TFLite
 * does. */
int64_t tp_rounded_div(int64_t sum, int64_t n);

/* Softmax fixed point (gemmlowp): Q5.26 input <= 0, Q0.31 output. */
int32_t tp_exp_on_negative_values(int32_t a);

/* TFLite GetReciprocal: 1/x scaled in Q0.31; *bits_over_unit receives the extra shift. */
int32_t tp_get_reciprocal(int32_t x, int32_t integer_digits, int32_t *bits_over_unit);

#define TP_SOFTMAX_DIFF_INT_BITS 5
#define TP_SOFTMAX_ACCUM_INT_BITS 12

#endif
