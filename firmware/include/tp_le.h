/* tp_le.h - little-endian fields, read and written byte by byte.
 *
 * Blobs, protocol frames and params records are little-endian on every target and may sit at
 * any alignment (a blob in flash, a payload inside a frame buffer), so they are never read by
 * casting pointers. One set of helpers for the core, the protocol and the applications.
 */
#ifndef TP_LE_H
#define TP_LE_H

#include <stdint.h>

/* 1 on a little-endian target (the byte order of its words in memory): SWAR code that stores
 * whole words takes it, others their byte by byte path. */
static inline int tp_little_endian(void)
{
    const union {
        uint32_t u;
        uint8_t b[4];
    } one = {1u};
    return one.b[0] == 1u;
}

static inline uint16_t tp_rd_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t tp_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline int32_t tp_rd_i32(const uint8_t *p)
{
    uint32_t u = tp_rd_u32(p);
    /* two's complement without implementation-defined conversion */
    return u <= 0x7FFFFFFFu ? (int32_t)u : -(int32_t)(~u) - 1;
}

static inline int16_t tp_rd_i16(const uint8_t *p)
{
    uint16_t u = tp_rd_u16(p);
    return u <= 0x7FFFu ? (int16_t)u : (int16_t)(-(int32_t)(uint16_t)~u - 1);
}

static inline float tp_rd_f32(const uint8_t *p)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.u = tp_rd_u32(p);
    return v.f;
}

/* Element i of a little-endian uint16 array (held row maps). */
static inline uint16_t tp_le_u16(const uint8_t *arr, uint32_t i)
{
    return tp_rd_u16(arr + 2u * i);
}

/* Element i of a little-endian int32 array (biases, multipliers, shifts). */
static inline int32_t tp_le_i32(const uint8_t *arr, uint32_t i)
{
    return tp_rd_i32(arr + 4u * i);
}

/* Element i of a little-endian float32 array (per-channel scales). */
static inline float tp_le_f32(const uint8_t *arr, uint32_t i)
{
    return tp_rd_f32(arr + 4u * i);
}

static inline void tp_wr_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static inline void tp_wr_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)((v >> 8) & 0xFFu);
    p[2] = (uint8_t)((v >> 16) & 0xFFu);
    p[3] = (uint8_t)(v >> 24);
}

static inline void tp_wr_i32(uint8_t *p, int32_t v)
{
    tp_wr_u32(p, (uint32_t)v);
}

static inline void tp_wr_f32(uint8_t *p, float f)
{
    union {
        uint32_t u;
        float f;
    } v;
    v.f = f;
    tp_wr_u32(p, v.u);
}

#endif /* TP_LE_H */
