/* tp_crc32.c - CRC-32 (IEEE 802.3, zlib's) for blob trailers, frames and params records. */
#include "tinyprop.h"

uint32_t tp_crc32(uint32_t crc, const uint8_t *data, size_t n)
{
    /* Half-byte table: 64 bytes of flash instead of 1 KB, fast enough for a serial link. */
    static const uint32_t nibble[16] = {0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu,
                                        0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
                                        0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
                                        0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};
    size_t i;
    crc = ~crc;
    for (i = 0; i < n; i++) {
        crc ^= data[i];
        crc = (crc >> 4) ^ nibble[crc & 15u];
        crc = (crc >> 4) ^ nibble[crc & 15u];
    }
    return ~crc;
}
