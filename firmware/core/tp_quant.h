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

/* round(acc * real_scale) in double, half away from zero (quant.requantize_double): TFLite's
 * reference FULLY_CONNECTED. Saturates far outside int32 (and maps NaN to 0) instead of UB. */
int64_t tp_requantize_double(int64_t acc, double real_scale);

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
