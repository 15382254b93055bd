/*
 * Unity tests of the portable core on the build machine (`pio test -e native`): the protocol's
 * CRC and frame codec, the parts every board's link depends on. tests/test_platformio.py also
 * compiles and runs this file with gcc when PlatformIO cannot fetch its native platform.
 */
#include <string.h>
#include <unity.h>

#include "tinyprop.h" /* tp_crc32 */
#include "tp_proto.h"

void setUp(void)
{
}

void tearDown(void)
{
}

static void test_crc32_matches_zlib(void)
{
    const uint8_t check[] = "123456789";
    TEST_ASSERT_EQUAL_HEX32(0xCBF43926u, tp_crc32(0, check, 9));
    /* continued in two parts, as the device does over header and params */
    TEST_ASSERT_EQUAL_HEX32(0xCBF43926u, tp_crc32(tp_crc32(0, check, 4), check + 4, 5));
}

/* Encode a frame, feed the wire bytes to the decoder; return the decoder's status. */
static tp_status round_trip(uint8_t *wire, size_t n, tp_frame *frame)
{
    static uint8_t body[TP_PROTO_MAX_BODY];
    tp_frame_decoder d;
    size_t used = 0;
    TEST_ASSERT_EQUAL_INT(TP_OK, tp_frame_decoder_init(&d, body, sizeof body));
    return tp_frame_decoder_feed(&d, wire, n, &used, frame);
}

static void test_frame_round_trip_keeps_type_seq_and_payload(void)
{
    uint8_t wire[64];
    const uint8_t payload[] = {0, 1, 0, 0, 255, 0}; /* zeros: COBS must carry them */
    size_t n = 0;
    tp_frame frame;
    TEST_ASSERT_EQUAL_INT(TP_OK, tp_frame_encode(wire, sizeof wire, TP_MSG_HELLO, 513, NULL, 0,
                                                 payload, sizeof payload, &n));
    TEST_ASSERT_EQUAL_UINT8(0u, wire[n - 1]); /* the delimiter ends it, and only it */
    TEST_ASSERT_NULL(memchr(wire, 0, n - 1));
    TEST_ASSERT_EQUAL_INT(TP_OK, round_trip(wire, n, &frame));
    TEST_ASSERT_EQUAL_UINT8(TP_MSG_HELLO, frame.type);
    TEST_ASSERT_EQUAL_UINT16(513u, frame.seq);
    TEST_ASSERT_EQUAL_UINT16(sizeof payload, frame.len);
    TEST_ASSERT_EQUAL_MEMORY(payload, frame.payload, sizeof payload);
}

static void test_corrupted_frame_fails_its_crc(void)
{
    uint8_t wire[64];
    const uint8_t payload[] = {7, 7, 7, 7};
    size_t n = 0;
    tp_frame frame;
    TEST_ASSERT_EQUAL_INT(TP_OK, tp_frame_encode(wire, sizeof wire, TP_MSG_HELLO, 1, payload,
                                                 sizeof payload, NULL, 0, &n));
    uint8_t *data = memchr(wire, 7, n); /* a payload byte: COBS passes it through as is */
    TEST_ASSERT_NOT_NULL(data);
    *data = 8;
    TEST_ASSERT_EQUAL_INT(TP_ERR_BAD_CRC, round_trip(wire, n, &frame));
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_crc32_matches_zlib);
    RUN_TEST(test_frame_round_trip_keeps_type_seq_and_payload);
    RUN_TEST(test_corrupted_frame_fails_its_crc);
    return UNITY_END();
}
