/* tp_kernels.h - the kernel API: int8 forward kernels and float32 gradient kernels over small
 * parameter structs and raw pointers (CMSIS-NN style: a kernel never sees a blob, a session or
 * an interpreter; the caller owns every byte and asks first how much scratch a kernel needs).
 *
 * Reference kernels (kernels/ref/) are host/tinyprop/reference/forward.py and backward.py in C,
 * readable first. A target's optimized kernels live beside them (kernels/<target>/) and must
 * equal them bit for bit; the build's tables (tp_target_forward, tp_target_gradient) take the
 * optimized kernel where one exists and the reference kernel elsewhere.
 *
 * Tensors are NHWC with N = 1. The loader checked every shape, offset and parameter range the
 * interpreters pass here, so kernels cannot fail and return nothing.
 */
#ifndef TP_KERNELS_H
#define TP_KERNELS_H

#include <stdint.h>

#include "tp_gradmap.h"
#include "tp_le.h"

/* Whether this build has the Cortex-M DSP kernels (kernels/arm/): a target with the DSP
 * extension (Cortex-M4, M7, M33), unless TP_KERNELS_REF_ONLY asks for the reference kernels
 * only. TP_KERNELS_DSP_EMULATION builds them on any machine with portable C for the few
 * intrinsics they use (tests; the product's host build runs the reference kernels). */
#if !defined(TP_KERNELS_REF_ONLY) && \
    (defined(__ARM_FEATURE_DSP) || defined(TP_KERNELS_DSP_EMULATION))
#define TP_KERNELS_DSP 1
#else
#define TP_KERNELS_DSP 0
#endif

/* An activation's height, width and channels (N = 1); a vector is 1 x 1 x n. */
typedef struct {
    int32_t h, w, c;
} tp_shape;

/* A weighted op's int8 weights, one row per output channel, and their real scales. Rows a
 * training session holds in RAM (the trained ones) are read there, the others from the blob. */
typedef struct {
    const int8_t *data; /* the blob's tensor: (O, KH, KW, I), (O, I) or depthwise (1, KH, KW, C) */
    const uint8_t *held_map; /* little-endian u16 per output channel: its row in `held`, 0xFFFF
                                when the blob's is used; NULL: no row is held */
    const int8_t *held;      /* held rows, row_len bytes each */
    uint32_t n_out;          /* output channels */
    uint32_t row_len;        /* weights per output channel */
    uint8_t depthwise;       /* the blob's channel o has its taps n_out apart */
    const uint8_t *scales;   /* little-endian float32 per output channel, when n_scales > 1 */
    uint32_t n_scales;
    float scale; /* the per-tensor scale, when n_scales <= 1 */
    /* the DSP 1x1 input gradient's pairs (the blob's PWIG, tp_pairs_of) of an op whose weights
     * do not train: its n_live channels with a nonzero row (u16 LE at live), then per pair of
     * them a row of row_len / 2 words; NULL: none */
    const uint8_t *pairs, *live;
    uint32_t n_live;
} tp_weights;

/* Output channel o's weights, *step apart (1 but for a depthwise channel read from the blob). */
static inline const int8_t *tp_weights_row(const tp_weights *w, uint32_t o, uint32_t *step)
{
    if (w->held_map != 0) {
        uint32_t r = tp_rd_u16(w->held_map + 2u * o);
        if (r != 0xFFFFu) {
            *step = 1u;
            return w->held + r * w->row_len;
        }
    }
    if (w->depthwise) {
        *step = w->n_out;
        return w->data + o;
    }
    *step = 1u;
    return w->data + o * w->row_len;
}

/* Output channel o's real weight scale. */
static inline float tp_weights_scale(const tp_weights *w, uint32_t o)
{
    return w->n_scales > 1u ? tp_le_f32(w->scales, o) : w->scale;
}

/* Per-output-channel requantization, little-endian int32 arrays (bias may be NULL). */
typedef struct {
    const uint8_t *bias, *mult, *shift;
} tp_requant;

/* CONV_2D and DEPTHWISE_CONV_2D. A kernel reads in_shape->h x in_shape->w pixels of
 * in_shape->c channels (rows w * c bytes apart) and treats the taps outside them as padding;
 * a tile is a call on a sub-window with its own padding. A depthwise kernel computes
 * out_shape->c output channels from input channels 0 .. out_shape->c / multiplier - 1, so a
 * caller may run a slice of channels (in, w and q advanced to its first, in_shape->c still the
 * input's pixel stride): the in-place depthwise runs one channel at a time. */
typedef struct {
    uint8_t stride[2], pad[2], k[2]; /* (h, w); pad is the top / left padding */
    int32_t depth_multiplier;        /* depthwise: output channel c * m + j reads input c */
    int32_t in_zp, out_zp, act_min, act_max;
} tp_conv_params;

/* FULLY_CONNECTED: TFLite's reference requantizes in double with s_in * s_w[o] / s_out. */
typedef struct {
    int32_t in_zp, out_zp, act_min, act_max;
    float in_scale, out_scale;
} tp_fc_params;

/* ADD: each input rescaled to a common scale, summed, rescaled to the output. */
typedef struct {
    int32_t in1_zp, in2_zp, out_zp, act_min, act_max, left_shift;
    int32_t mult[3], shift[3]; /* [output, input 1, input 2] */
} tp_add_params;

/* AVERAGE_POOL_2D and MAX_POOL_2D (int8 in and out, same quantization). */
typedef struct {
    uint8_t stride[2], pad[2], k[2];
    int32_t act_min, act_max;
} tp_pool_params;

/* MEAN over H and W: 1/(H*W) folded into the multiplier (TFLite's QuantizedMeanOrSum). */
typedef struct {
    int32_t in_zp, out_zp, mult, shift;
} tp_mean_params;

/* PAD with the zero point. */
typedef struct {
    uint8_t before[2], after[2]; /* (h, w) */
    int32_t value;
} tp_pad_params;

/* SOFTMAX over the last axis (gemmlowp fixed point). */
typedef struct {
    int32_t mult, left_shift, diff_min;
} tp_softmax_params;

/* ---- forward kernels: reference versions ---- */

void tp_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                  const tp_weights *w, const tp_requant *q, const tp_shape *out_shape, int8_t *out,
                  void *scratch);
uint32_t tp_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                    const tp_shape *out_shape);
void tp_depthwise_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                            const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                            int8_t *out, void *scratch);
uint32_t tp_depthwise_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                              const tp_shape *out_shape);
void tp_fully_connected_s8(const tp_fc_params *p, uint32_t n_in, const int8_t *in,
                           const tp_weights *w, const uint8_t *bias, int8_t *out, void *scratch);
uint32_t tp_fully_connected_s8_scratch_bytes(const tp_fc_params *p, uint32_t n_in, uint32_t n_out);
/* The element-wise, pooling and softmax kernels need no scratch. */
void tp_add_s8(const tp_add_params *p, uint32_t n, const int8_t *in1, const int8_t *in2,
               int8_t *out);
void tp_avg_pool2d_s8(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *in,
                      const tp_shape *out_shape, int8_t *out);
void tp_max_pool2d_s8(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *in,
                      const tp_shape *out_shape, int8_t *out);
void tp_mean_hw_s8(const tp_mean_params *p, const tp_shape *in_shape, const int8_t *in,
                   int8_t *out);
void tp_pad_s8(const tp_pad_params *p, const tp_shape *in_shape, const int8_t *in,
               const tp_shape *out_shape, int8_t *out);
void tp_softmax_s8(const tp_softmax_params *p, uint32_t rows, uint32_t depth, const int8_t *in,
                   int8_t *out);

/* ---- forward kernels: Cortex-M DSP versions (kernels/arm/), bit for bit the reference's ----
 * Each asks for its scratch (the planner reserves it; the interpreter runs the reference kernel
 * for an op whose plan gives less) and runs the reference kernel itself for what it does not
 * cover (tp_dsp_prepare: accumulators too wide for its requantization). The *_scratch_bytes
 * functions are plain C on every target: the host planner's mirror is tested against them. */
void tp_arm_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                      const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                      int8_t *out, void *scratch);
uint32_t tp_arm_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                        const tp_shape *out_shape);
void tp_arm_depthwise_conv2d_s8(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *in,
                                const tp_weights *w, const tp_requant *q, const tp_shape *out_shape,
                                int8_t *out, void *scratch);
uint32_t tp_arm_depthwise_conv2d_s8_scratch_bytes(const tp_conv_params *p, const tp_shape *in_shape,
                                                  const tp_shape *out_shape);
void tp_arm_avg_pool2d_s8(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *in,
                          const tp_shape *out_shape, int8_t *out);

/* ---- gradient kernels (float32): reference versions ----
 * Sums run in host/tinyprop/reference/backward.py's order (docs/training.md), so the results
 * are the NumPy reference's bits. Input gradients accumulate into dx (dx += ...). */

/* dX += W^T dY. */
void tp_conv2d_input_grad_f32(const tp_conv_params *p, const tp_shape *in_shape,
                              const tp_shape *out_shape, const tp_weights *w, const float *dy,
                              float *dx);
void tp_depthwise_conv2d_input_grad_f32(const tp_conv_params *p, const tp_shape *in_shape,
                                        const tp_shape *out_shape, const tp_weights *w,
                                        const float *dy, float *dx);
void tp_fully_connected_input_grad_f32(const tp_weights *w, const float *dy, float *dx);
/* Scratch of the input and weight gradient kernels of a weighted op (0: none). */
uint32_t tp_input_grad_f32_scratch_bytes(const tp_shape *in_shape, const tp_shape *out_shape);
uint32_t tp_weight_grad_f32_scratch_bytes(const tp_shape *in_shape, const tp_shape *out_shape);
/* Row o of dW (row_len floats) from the int8 input x (zero point, scale) and dY. */
void tp_conv2d_weight_grad_f32(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                               int32_t x_zp, float x_scale, const tp_shape *out_shape,
                               const float *dy, uint32_t o, float *row);
void tp_depthwise_conv2d_weight_grad_f32(const tp_conv_params *p, const tp_shape *in_shape,
                                         const int8_t *x, int32_t x_zp, float x_scale,
                                         const tp_shape *out_shape, const float *dy, uint32_t o,
                                         float *row);
void tp_fully_connected_weight_grad_f32(uint32_t n_in, const int8_t *x, int32_t x_zp, float x_scale,
                                        const float *dy, uint32_t o, float *row);
/* dB of output channel o: the sum of dY over the output positions (n_out channels each). */
float tp_bias_grad_f32(const float *dy, uint32_t positions, uint32_t n_out, uint32_t o);
void tp_avg_pool2d_input_grad_f32(const tp_pool_params *p, const tp_shape *in_shape,
                                  const tp_shape *out_shape, const float *dy, float *dx);
/* Each output's dY added to its window's largest input x (the first of equals in the window's
 * row-major order), windows in raster order. */
void tp_max_pool2d_input_grad_f32(const tp_pool_params *p, const tp_shape *in_shape,
                                  const int8_t *x, const tp_shape *out_shape, const float *dy,
                                  float *dx);
void tp_mean_hw_input_grad_f32(const tp_shape *in_shape, const float *dy, float *dx);
void tp_pad_input_grad_f32(const tp_pad_params *p, const tp_shape *in_shape,
                           const tp_shape *out_shape, const float *dy, float *dx);
/* dx[i] += dy[i] (ADD's inputs). */
void tp_add_input_grad_f32(uint32_t n, const float *dy, float *dx);

/* ---- gradient kernels with integer maps (tp_gradmap.h): reference versions ----
 * Input gradients hand each row of dX (exact values at the fold's exponent, or dY's) to the
 * writer the caller began (and ends); weighted ops' scratch holds one row of int32 sums, then
 * (CONV_2D, FULLY_CONNECTED) one output pixel's dY'. Weight rows and biases: exact int64 sums
 * as float32 (tp_gm_to_f32). A CONV_2D weight row may take x_live (NULL: none), bit i of word
 * i / 32 clear for each input channel i at x_zp at every position (the training step's scan): its
 * terms dY (x - zp) are 0, so a kernel may leave them out (VWW's inputs from pruned channels);
 * a set bit says nothing. */

/* The fold of dY for a weighted op (tp_gm_fold): its per-channel maxima over `positions`. With
 * a RELU mask (an int8 map of a multiple of 8 channels; else NULL), its zeros are applied to dY
 * in the same scan (the mask's bit j for dY's value j). */
void tp_gm_fold_of(tp_gm_fold *f, const tp_gmap *dy, uint32_t positions, const tp_weights *w,
                   uint32_t n_terms, const uint8_t *mask);

/* Channel sums of dY (after the mask) for channels o .. o + n - 1, made by a fold's scan. */
typedef void (*tp_gm_sums_fn)(const void *ctx, uint32_t o, const int32_t *sums, uint32_t n);

/* tp_gm_fold_of, and, where its scan can make them (an int8 map of 8k channels, the DSP
 * extension), every channel's sum of dY after the mask, handed to done(ctx, ...) eight channels
 * at a time as the scan goes; returns whether it made them (0: done was not called). */
int tp_gm_fold_sums_of(tp_gm_fold *f, const tp_gmap *dy, uint32_t positions, const tp_weights *w,
                       uint32_t n_terms, const uint8_t *mask, tp_gm_sums_fn done, const void *ctx);
void tp_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                            const tp_shape *out_shape, const tp_weights *w, const tp_gm_fold *f,
                            const tp_gmap *dy, tp_gm_writer *dx, void *scratch);
void tp_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                      const tp_shape *out_shape, const tp_weights *w,
                                      const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                      void *scratch);
void tp_fully_connected_input_grad_q(const tp_weights *w, const tp_gm_fold *f, const tp_gmap *dy,
                                     tp_gm_writer *dx, void *scratch);
void tp_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                             int32_t x_zp, float x_scale, const tp_shape *out_shape,
                             const tp_gmap *dy, uint32_t o, float *row, const uint32_t *x_live);
void tp_depthwise_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                       const int8_t *x, int32_t x_zp, float x_scale,
                                       const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                                       float *row);
void tp_fully_connected_weight_grad_q(uint32_t n_in, const int8_t *x, int32_t x_zp, float x_scale,
                                      const tp_gmap *dy, uint32_t o, float *row);
/* The bias gradients' exact sums: sums[j] = sum over the positions of dY[p, o0 + j], j < nc (the
 * gradient is tp_gm_to_f32(sums[j], dy->e, 1)). */
void tp_bias_sums_q(const tp_gmap *dy, uint32_t positions, uint32_t n_out, uint32_t o0, uint32_t nc,
                    int64_t *sums);
void tp_avg_pool2d_input_grad_q(const tp_pool_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx);
void tp_max_pool2d_input_grad_q(const tp_pool_params *p, const tp_shape *in_shape, const int8_t *x,
                                const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx);
void tp_mean_hw_input_grad_q(const tp_shape *in_shape, const tp_gmap *dy, tp_gm_writer *dx);
void tp_pad_input_grad_q(const tp_pad_params *p, const tp_shape *in_shape,
                         const tp_shape *out_shape, const tp_gmap *dy, tp_gm_writer *dx);
void tp_add_input_grad_q(const tp_gmap *dy, tp_gm_writer *dx);

/* The Cortex-M DSP versions (kernels/arm/tp_*_grad_arm.c, TP_KERNELS_DSP builds): the input
 * gradients of 1x1 CONV_2D and 3x3 DEPTHWISE_CONV_2D, the weight gradients of 1x1 CONV_2D and
 * of DEPTHWISE_CONV_2D and the bias sums, in the reference kernels' scratch (the depthwise ones
 * use the stack); they run the reference kernel for what they do not cover. */
void tp_arm_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                const tp_shape *out_shape, const tp_weights *w, const tp_gm_fold *f,
                                const tp_gmap *dy, tp_gm_writer *dx, void *scratch);
void tp_arm_depthwise_conv2d_input_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                          const tp_shape *out_shape, const tp_weights *w,
                                          const tp_gm_fold *f, const tp_gmap *dy, tp_gm_writer *dx,
                                          void *scratch);
void tp_arm_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape, const int8_t *x,
                                 int32_t x_zp, float x_scale, const tp_shape *out_shape,
                                 const tp_gmap *dy, uint32_t o, float *row, const uint32_t *x_live);
void tp_arm_depthwise_conv2d_weight_grad_q(const tp_conv_params *p, const tp_shape *in_shape,
                                           const int8_t *x, int32_t x_zp, float x_scale,
                                           const tp_shape *out_shape, const tp_gmap *dy, uint32_t o,
                                           float *row);
void tp_arm_bias_sums_q(const tp_gmap *dy, uint32_t positions, uint32_t n_out, uint32_t o0,
                        uint32_t nc, int64_t *sums);

/* ---- kernel tables ---- */

typedef struct {
    void (*conv2d)(const tp_conv_params *, const tp_shape *, const int8_t *, const tp_weights *,
                   const tp_requant *, const tp_shape *, int8_t *, void *);
    uint32_t (*conv2d_scratch_bytes)(const tp_conv_params *, const tp_shape *, const tp_shape *);
    void (*depthwise_conv2d)(const tp_conv_params *, const tp_shape *, const int8_t *,
                             const tp_weights *, const tp_requant *, const tp_shape *, int8_t *,
                             void *);
    uint32_t (*depthwise_conv2d_scratch_bytes)(const tp_conv_params *, const tp_shape *,
                                               const tp_shape *);
    void (*fully_connected)(const tp_fc_params *, uint32_t, const int8_t *, const tp_weights *,
                            const uint8_t *, int8_t *, void *);
    uint32_t (*fully_connected_scratch_bytes)(const tp_fc_params *, uint32_t, uint32_t);
    void (*add)(const tp_add_params *, uint32_t, const int8_t *, const int8_t *, int8_t *);
    void (*avg_pool2d)(const tp_pool_params *, const tp_shape *, const int8_t *, const tp_shape *,
                       int8_t *);
    void (*mean_hw)(const tp_mean_params *, const tp_shape *, const int8_t *, int8_t *);
    void (*pad)(const tp_pad_params *, const tp_shape *, const int8_t *, const tp_shape *,
                int8_t *);
    void (*softmax)(const tp_softmax_params *, uint32_t, uint32_t, const int8_t *, int8_t *);
    void (*max_pool2d)(const tp_pool_params *, const tp_shape *, const int8_t *, const tp_shape *,
                       int8_t *);
} tp_forward_kernels;

typedef struct {
    void (*conv2d_input)(const tp_conv_params *, const tp_shape *, const tp_shape *,
                         const tp_weights *, const float *, float *);
    void (*depthwise_conv2d_input)(const tp_conv_params *, const tp_shape *, const tp_shape *,
                                   const tp_weights *, const float *, float *);
    void (*fully_connected_input)(const tp_weights *, const float *, float *);
    void (*conv2d_weight)(const tp_conv_params *, const tp_shape *, const int8_t *, int32_t, float,
                          const tp_shape *, const float *, uint32_t, float *);
    void (*depthwise_conv2d_weight)(const tp_conv_params *, const tp_shape *, const int8_t *,
                                    int32_t, float, const tp_shape *, const float *, uint32_t,
                                    float *);
    void (*fully_connected_weight)(uint32_t, const int8_t *, int32_t, float, const float *,
                                   uint32_t, float *);
    float (*bias)(const float *, uint32_t, uint32_t, uint32_t);
    void (*avg_pool2d_input)(const tp_pool_params *, const tp_shape *, const tp_shape *,
                             const float *, float *);
    void (*max_pool2d_input)(const tp_pool_params *, const tp_shape *, const int8_t *,
                             const tp_shape *, const float *, float *);
    void (*mean_hw_input)(const tp_shape *, const float *, float *);
    void (*pad_input)(const tp_pad_params *, const tp_shape *, const tp_shape *, const float *,
                      float *);
    void (*add_input)(uint32_t, const float *, float *);
    uint32_t (*input_scratch_bytes)(const tp_shape *, const tp_shape *);
    uint32_t (*weight_scratch_bytes)(const tp_shape *, const tp_shape *);
    /* integer maps */
    void (*conv2d_input_q)(const tp_conv_params *, const tp_shape *, const tp_shape *,
                           const tp_weights *, const tp_gm_fold *, const tp_gmap *, tp_gm_writer *,
                           void *);
    void (*depthwise_conv2d_input_q)(const tp_conv_params *, const tp_shape *, const tp_shape *,
                                     const tp_weights *, const tp_gm_fold *, const tp_gmap *,
                                     tp_gm_writer *, void *);
    void (*fully_connected_input_q)(const tp_weights *, const tp_gm_fold *, const tp_gmap *,
                                    tp_gm_writer *, void *);
    void (*conv2d_weight_q)(const tp_conv_params *, const tp_shape *, const int8_t *, int32_t,
                            float, const tp_shape *, const tp_gmap *, uint32_t, float *,
                            const uint32_t *);
    void (*depthwise_conv2d_weight_q)(const tp_conv_params *, const tp_shape *, const int8_t *,
                                      int32_t, float, const tp_shape *, const tp_gmap *, uint32_t,
                                      float *);
    void (*fully_connected_weight_q)(uint32_t, const int8_t *, int32_t, float, const tp_gmap *,
                                     uint32_t, float *);
    void (*bias_sums_q)(const tp_gmap *, uint32_t, uint32_t, uint32_t, uint32_t, int64_t *);
} tp_gradient_kernels;

/* The reference kernels, and the build's: optimized where the target has them (forward and
 * gradient tables live in separate objects, so an inference-only link has no gradient code). */
extern const tp_forward_kernels tp_ref_forward;
extern const tp_forward_kernels tp_target_forward;
extern const tp_gradient_kernels tp_ref_gradient;
extern const tp_gradient_kernels tp_target_gradient;

#endif /* TP_KERNELS_H */
