/* tp_optim.h - the optimizer: SGD (optionally with momentum) in the quantized domain, with
 * quantization-aware scaling and stochastic rounding (docs/training.md). */
#ifndef TP_OPTIM_H
#define TP_OPTIM_H

#include <stdint.h>

/* One op's update in one step. */
typedef struct {
    uint8_t *params;   /* the params region: int32 biases and int8 weight rows */
    uint8_t *velocity; /* this op's float32 velocities (biases, then held rows), or NULL */
    float lr, momentum;
    float scale_floor; /* QAS: weight scales below this count as this */
    float s_x;         /* the op's input scale */
    uint32_t key;      /* stochastic rounding key of the step (tp_optim_step_key) */
    int qas;           /* 0: the no-QAS ablation */
} tp_update;

/* The stochastic rounding key of a step: rounding is keyed by (seed, step, parameter offset),
 * so a resumed run rounds exactly as an uninterrupted one. */
uint32_t tp_optim_step_key(uint32_t seed, uint32_t step);

/* Update int32 bias o (at params offset bias_params + 4 o, velocity o) with gradient db;
 * sw is channel o's weight scale. */
void tp_optim_update_bias(const tp_update *u, uint32_t bias_params, uint32_t o, float db, float sw);

/* Update a held int8 weight row (n weights at params offset row_params, velocities from v0)
 * with its gradient; sw is the row's channel scale. live: NULL, or bit k of live[k / 32] clear
 * where grad[k] is +-0 (a 1x1 conv's input at its zero point everywhere): without a velocity
 * such a weight is read only to clamp a -128 to -127. */
void tp_optim_update_row(const tp_update *u, uint32_t row_params, uint32_t v0, const float *grad,
                         uint32_t n, float sw, const uint32_t *live);

#endif /* TP_OPTIM_H */
