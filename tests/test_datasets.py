"""Dataset layout, splits, and the int8 preprocessing checked against TFLite's own QUANTIZE op."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from tinyprop.data.datasets import (
    CLASSES,
    fit_rgb,
    holdout_split,
    load_dataset,
    load_images,
    load_split,
    quantize_pixels,
    quantize_real,
    to_gray,
    to_model_input,
)
from tinyprop.errors import TinypropError

VWW_SCALE = np.float32(0.003921568859)  # the MLPerf int8 model's input scale (float32 of 1/255)


def _write(folder, name, rgb):
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb).save(folder / name)


def _tiny_dataset(root, holdout=("b.png",)):
    grey = np.full((8, 8, 3), 100, np.uint8)
    for cls, names in (("person", ["a.png", "b.png"]), ("non_person", ["c.png"])):
        for n in names:
            _write(root / cls, n, grey)
    (root / "holdout.txt").write_text("".join(n + "\n" for n in holdout))
    return root


def test_vww_mini_layout_and_splits(vww_data_dir):
    ds = load_dataset(vww_data_dir)
    assert CLASSES == ds.classes == ("non_person", "person") and ds.kind == "images"
    assert len(ds.split("all")) == 397
    assert len(ds.split("train")) == 276
    holdout = ds.split("holdout")
    assert len(holdout) == 121
    assert {s.name for s in holdout} == set((vww_data_dir / "holdout.txt").read_text().split())
    assert sum(s.label for s in ds.samples) == 175  # person images
    assert all(s.path.parent.name == CLASSES[s.label] for s in ds.samples)


def test_tiny_dataset_labels_and_split(tmp_path):
    ds = load_dataset(_tiny_dataset(tmp_path))
    assert [(s.name, s.label, s.split) for s in ds.samples] == [
        ("c.png", 0, "train"), ("a.png", 1, "train"), ("b.png", 1, "holdout"),
    ]
    with pytest.raises(TinypropError, match="split 'test' is unknown"):
        ds.split("test")


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda r: None, "dataset folder not found"),
        (lambda r: r.mkdir(), "no class folder"),
        (lambda r: [(r / c).mkdir(parents=True) for c in CLASSES], "no samples .* add samples of "
         "class 'non_person'"),
        (lambda r: _tiny_dataset(r, holdout=("zz.png",)), "not in the class folders"),
        (lambda r: (_tiny_dataset(r), (r / "non_person" / "x.npy").write_bytes(b"")),
         "both images and .npy"),
        (lambda r: (_tiny_dataset(r), (r / "classes.txt").write_text("person\ncat\n")),
         "no folder cat/ for class 'cat'"),
    ],
)
def test_bad_layouts_name_the_folder(tmp_path, setup, message):
    root = tmp_path / "data"
    setup(root)
    with pytest.raises(TinypropError, match=message) as err:
        load_dataset(root)
    assert str(root) in str(err.value)


def test_empty_holdout_split_is_an_error(tmp_path):
    root = _tiny_dataset(tmp_path, holdout=())
    with pytest.raises(TinypropError, match="split 'holdout' is empty"):
        load_split(root, "holdout", VWW_SCALE, -128)


def test_vww_scale_is_exactly_pixel_minus_128():
    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    q = quantize_pixels(pixels, VWW_SCALE, -128)
    assert q.dtype == np.int8
    np.testing.assert_array_equal(q.astype(np.int16), pixels.astype(np.int16) - 128)


@pytest.fixture(scope="module")
def tflite_input_quantizer():
    """A real TFLite model whose first op is QUANTIZE (float input kept, int8 inside). Its input
    range 0..4 gives scale 4/255, where pixel/255/scale lands exactly on .5 for many pixels, so
    the rounding mode is really tested."""
    import tensorflow as tf

    inp = tf.keras.Input((16, 16, 3))
    model = tf.keras.Model(inp, tf.keras.layers.Conv2D(2, 1)(inp))

    def representative():
        for v in (0.0, 4.0):
            yield [np.full((1, 16, 16, 3), v, np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    interp = tf.lite.Interpreter(
        model_content=conv.convert(),
        experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF,
    )
    interp.allocate_tensors()
    (quantize_op,) = [op for op in interp._get_ops_details() if op["op_name"] == "QUANTIZE"]
    return interp, quantize_op["outputs"][0]


def test_quantization_matches_tflite_quantize_op(tflite_input_quantizer):
    interp, q_index = tflite_input_quantizer
    (scale,), (zero_point,) = (
        interp._get_tensor_details(q_index, 0)["quantization_parameters"][k]
        for k in ("scales", "zero_points")
    )
    pixels = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    # Feed exactly what quantize_pixels feeds itself: x = pixel/255 in float32.
    x = pixels.astype(np.float32) / np.float32(255.0)
    ties = np.abs(x / np.float32(scale) % 1 - 0.5) == 0
    assert ties.sum() > 10  # half-to-even rounding would fail here
    interp.set_tensor(interp.get_input_details()[0]["index"], x[None])
    interp.invoke()
    expected = interp.get_tensor(q_index)[0]
    np.testing.assert_array_equal(quantize_pixels(pixels, scale, zero_point), expected)


def test_to_model_input_center_crops_then_resizes():
    # 120 x 200: a green center square between red side bands that the crop must drop.
    img = np.zeros((120, 200, 3), np.uint8)
    img[:, :, 0] = 255
    img[:, 40:160] = (0, 200, 0)
    out = to_model_input(img, VWW_SCALE, -128)
    assert out.shape == (96, 96, 3) and out.dtype == np.int8
    assert np.all(out == np.array([-128, 72, -128], np.int8))
    # Portrait images crop top and bottom.
    assert fit_rgb(img.transpose(1, 0, 2), (96, 96)).shape == (96, 96, 3)
    with pytest.raises(TinypropError, match="expected a uint8"):
        to_model_input(img.astype(np.float32), VWW_SCALE, -128)


def test_load_split_matches_the_files(vww_data_dir):
    x, labels, names = load_split(vww_data_dir, "holdout", VWW_SCALE, -128)
    assert x.shape == (121, 96, 96, 3) and x.dtype == np.int8 and labels.dtype == np.int64
    first = np.asarray(Image.open(vww_data_dir / CLASSES[labels[0]] / names[0]).convert("RGB"))
    np.testing.assert_array_equal(x[0].astype(np.int16), first.astype(np.int16) - 128)
    night, night_labels, night_names = load_split(vww_data_dir, "holdout", VWW_SCALE, -128, "night")
    assert night_names == names and np.array_equal(night_labels, labels)
    assert night.astype(np.float32).mean() < x.astype(np.float32).mean()


def test_load_images_resizes_any_size(tmp_path):
    root = tmp_path / "d"
    _write(root / "person", "p.png", np.full((50, 70, 3), 30, np.uint8))
    _write(root / "non_person", "n.png", np.full((300, 200, 3), 220, np.uint8))
    x, labels, names = load_images(root, "all")
    assert x.shape == (2, 96, 96, 3) and names == ["n.png", "p.png"]
    assert labels.tolist() == [0, 1]
    assert np.all(x[0] == 220) and np.all(x[1] == 30)


def test_any_number_of_classes_sorted_and_seeded_holdout(tmp_path):
    root = tmp_path / "d"
    for k, cls in enumerate(("zebra", "apple", "mango")):  # label = index among sorted names
        for i in range(10):
            _write(root / cls, f"{cls}{i}.png", np.full((20, 30, 3), 10 * k, np.uint8))
    ds = load_dataset(root, holdout=0.3)
    assert ds.classes == ("apple", "mango", "zebra")
    held = [s for s in ds.samples if s.split == "holdout"]
    assert sorted((s.label, s.path.parent.name) for s in held) == sorted(
        [(0, "apple")] * 3 + [(1, "mango")] * 3 + [(2, "zebra")] * 3)
    # the same split in every call, and from the files alone (not their order on disk)
    assert [s.name for s in held] == [s.name for s in load_dataset(root, 0.3).samples
                                      if s.split == "holdout"]
    assert holdout_split([(0, "b"), (0, "a")], 0.5) == holdout_split([(0, "a"), (0, "b")], 0.5)
    x, y, names = load_split(root, "train", VWW_SCALE, -128, holdout=0.3)
    assert x.shape == (21, 96, 96, 3) and np.bincount(y).tolist() == [7, 7, 7]
    # classes.txt names the folders and their order
    (root / "classes.txt").write_text("zebra\napple\n")
    ds = load_dataset(root)
    assert ds.classes == ("zebra", "apple") and {s.label for s in ds.samples} == {0, 1}
    with pytest.raises(TinypropError, match="--holdout 1.5: not a fraction"):
        load_dataset(root, holdout=1.5)


def test_grayscale_models_get_pillows_luma(tmp_path):
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    want = np.asarray(Image.fromarray(rgb).convert("L"))
    np.testing.assert_array_equal(to_gray(rgb)[..., 0], want)
    every = np.array(np.meshgrid(np.arange(0, 256, 5), np.arange(256), np.arange(0, 256, 3)),
                     np.uint8).reshape(3, -1).T.reshape(-1, 64, 3)[:1024]
    np.testing.assert_array_equal(to_gray(every)[..., 0],
                                  np.asarray(Image.fromarray(every).convert("L")))
    root = tmp_path / "g"
    _write(root / "a", "x.png", rgb)
    _write(root / "b", "y.png", rgb[::-1])
    x, y, _ = load_split(root, "all", VWW_SCALE, -128, size=(32, 32, 1))
    assert x.shape == (2, 32, 32, 1)
    gray = to_gray(fit_rgb(rgb, (32, 32)))
    np.testing.assert_array_equal(x[0], quantize_pixels(gray, VWW_SCALE, -128))
    np.testing.assert_array_equal(to_model_input(rgb, VWW_SCALE, -128, (32, 32, 1)), x[0])
    with pytest.raises(TinypropError, match="takes 4 channels"):
        load_split(root, "all", VWW_SCALE, -128, size=(32, 32, 4))


def test_npy_features_real_and_int8(tmp_path):
    root = tmp_path / "kws"
    rng = np.random.default_rng(2)
    real = {c: [rng.normal(size=(49, 10, 1)).astype(np.float32) for _ in range(3)]
            for c in ("no", "yes")}
    for c, xs in real.items():
        (root / c).mkdir(parents=True)
        for i, v in enumerate(xs):
            np.save(root / c / f"{i}.npy", v if i else v.reshape(-1))  # flat is fine too
    x, y, names = load_split(root, "all", 0.05, 3, size=(49, 10, 1))
    assert x.shape == (6, 49, 10, 1) and y.tolist() == [0, 0, 0, 1, 1, 1]
    np.testing.assert_array_equal(x[4], quantize_real(real["yes"][1], 0.05, 3))
    np.save(root / "yes" / "0.npy", np.full((49, 10, 1), -7, np.int8))  # already quantized
    assert np.all(load_split(root, "all", 0.05, 3, size=(49, 10, 1))[0][3] == -7)
    with pytest.raises(TinypropError, match="camera shifts act on images"):
        load_split(root, "all", 0.05, 3, shift="haze", size=(49, 10, 1))
    np.save(root / "no" / "bad.npy", np.zeros((10, 49), np.float32))
    with pytest.raises(TinypropError, match=r"bad.npy: a float32 sample of shape 10x49; the "
                       r"model takes 49x10x1"):
        load_split(root, "all", 0.05, 3, size=(49, 10, 1))


def test_npz_dataset(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(20, 640)).astype(np.float32)
    y = np.arange(20) % 2
    path = tmp_path / "toycar.npz"
    np.savez(path, x=x, y=y, classes=np.array(["normal", "anomaly"]))
    ds = load_dataset(path, holdout=0.25)
    assert ds.classes == ("normal", "anomaly") and ds.kind == "arrays"
    assert sum(s.split == "holdout" for s in ds.samples) == 6
    xs, ys, names = load_split(path, "all", 0.1, 0, size=(640,))
    assert xs.shape == (20, 640) and ys.tolist() == [0] * 10 + [1] * 10
    np.testing.assert_array_equal(xs[0], quantize_real(x[0], 0.1, 0))
    # one class is a dataset (an autoencoder's normal sounds; train refuses it for a classifier:
    # test_autoencoder)
    np.savez(tmp_path / "normal.npz", x=x, y=np.full(20, 0), classes=np.array(["normal"]))
    assert load_dataset(tmp_path / "normal.npz").classes == ("normal",)
    np.savez(tmp_path / "noy.npz", x=x)
    with pytest.raises(TinypropError, match="has x; a .npz dataset holds x"):
        load_dataset(tmp_path / "noy.npz")


def test_an_image_that_does_not_decode_is_named(tmp_path):
    root = _tiny_dataset(tmp_path / "d")
    (root / "person" / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(TinypropError, match=r"broken.jpg: cannot decode image .* remove or "
                       "replace it"):
        load_split(root, "all", VWW_SCALE, -128)
