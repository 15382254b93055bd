/* tp_fmath.h - float32 e^x for x <= 0 and ln(x) for x >= 1 from IEEE + - * / only, so the
 * loss is the same bits on x86, a Cortex-M4F and a soft-float RISC-V (reference/fmath.py). */
#ifndef TP_FMATH_H
#define TP_FMATH_H

float tp_exp_neg(float x);
float tp_log_pos(float x);

#endif /* TP_FMATH_H */
