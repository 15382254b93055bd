"""Sensor shifts: documented formulas, determinism keyed by image name, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from tinyprop.data import shifts
from tinyprop.data.shifts import SHIFTS, apply_shift
from tinyprop.errors import TinypropError


def _photo(seed=0, shape=(96, 96, 3)):
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def test_none_is_identity_and_a_copy():
    img = _photo()
    out = apply_shift("none", img, "a.jpg")
    np.testing.assert_array_equal(out, img)
    assert out is not img


@pytest.mark.parametrize("name", sorted(SHIFTS))
def test_shape_dtype_and_determinism(name):
    img = _photo()
    first = apply_shift(name, img, "x.jpg")
    apply_shift(name, _photo(1), "other.jpg")  # other images in between must not matter
    assert first.shape == img.shape and first.dtype == np.uint8
    np.testing.assert_array_equal(apply_shift(name, img, "x.jpg"), first)


def test_night_noise_is_keyed_by_name():
    img = _photo()
    a, b = apply_shift("night", img, "a.jpg"), apply_shift("night", img, "b.jpg")
    assert not np.array_equal(a, b)
    # Same image, different noise: the difference is the noise alone, ~sqrt(2) * sigma.
    diff = a.astype(np.float64) - b.astype(np.float64)
    assert abs(diff.std() - np.sqrt(2) * shifts.NIGHT_NOISE_SIGMA) < 0.5


def test_night_follows_the_documented_formula():
    # A flat colour: blur leaves it alone, so the mean is gain * luma^gamma and the spread is
    # the sensor noise.
    rgb = np.empty((96, 96, 3), np.uint8)
    rgb[:] = (200, 120, 40)
    out = apply_shift("night", rgb, "flat.jpg").astype(np.float64)
    assert np.array_equal(out[..., 0], out[..., 1]) and np.array_equal(out[..., 0], out[..., 2])
    luma = (0.299 * 200 + 0.587 * 120 + 0.114 * 40) / 255
    expected = 255 * shifts.NIGHT_GAIN * luma**shifts.NIGHT_GAMMA
    assert abs(out[..., 0].mean() - expected) < 0.3
    assert abs(out[..., 0].std() - shifts.NIGHT_NOISE_SIGMA) < 0.3
    assert expected < luma * 255 * 0.8  # it does darken


def test_blur_smooths_edges_and_keeps_flat_regions():
    flat = np.full((32, 32, 3), 77, np.uint8)
    np.testing.assert_array_equal(apply_shift("blur", flat, "f"), flat)
    step = np.zeros((32, 32, 3), np.uint8)
    step[:, 16:] = 255
    row = apply_shift("blur", step, "s")[0, :, 0].astype(int)
    assert row[0] == 0 and row[-1] == 255
    assert np.all(np.diff(row) >= 0)
    assert 0 < row[15] < 128 < row[16] < 255  # the edge is now a ramp
    # Total light is preserved (normalised kernel, mirrored edges).
    img = _photo()
    assert abs(apply_shift("blur", img, "p").astype(float).mean() - img.mean()) < 0.5


def test_unknown_shift_lists_names():
    with pytest.raises(TinypropError, match="use one of none, night, blur"):
        apply_shift("fog", _photo(), "a.jpg")


def test_rejects_non_rgb_uint8():
    with pytest.raises(TinypropError, match="expected uint8 H x W x 3"):
        apply_shift("night", _photo().astype(np.float32), "a.jpg")
    with pytest.raises(TinypropError, match="expected uint8 H x W x 3"):
        apply_shift("blur", _photo(shape=(8, 8)), "a.jpg")


def test_haze_halves_contrast_and_lifts_blacks():
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    out = apply_shift("haze", ramp, "ramp.jpg")[0, :, 0].astype(int)
    expected = np.rint(shifts.HAZE_CONTRAST * np.arange(256) + shifts.HAZE_LIFT).astype(int)
    np.testing.assert_array_equal(out, expected)
    assert out[0] == 95 and out[-1] == 235  # blacks lifted, whites dimmed: contrast 0.55


def test_sodium_casts_orange_and_drops_blue():
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[None, :, None], 3, axis=2)
    out = apply_shift("sodium", ramp, "ramp.jpg")[0].astype(int)
    for c in range(3):
        expected = np.clip(np.rint(shifts.SODIUM_GAIN[c] * np.arange(256) + shifts.SODIUM_LIFT[c]),
                           0, 255)
        np.testing.assert_array_equal(out[:, c], expected)
    assert tuple(out[-1]) == (254, 188, 89) and tuple(out[0]) == (25, 10, 0)
