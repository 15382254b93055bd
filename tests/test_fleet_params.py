"""tinyprop.fleet.params: a blob's trainable parameters as named arrays (byte-exact both ways,
equal to what the C core holds), the bytes that travel, the aggregations' properties (one
board's or identical updates come back bit for bit; the real-domain mean within one unit;
stochastic rounding unbiased and reproducible) and every reason an update is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tinyprop.cli import main
from tinyprop.compile.blobfile import load_blob
from tinyprop.device.device import params_record
from tinyprop.engines import BlobModel, HParams, open_engine
from tinyprop.errors import TinypropError
from tinyprop.fleet.params import (  # tinyprop.fleet before flwr: Flower's telemetry off
    AGGREGATIONS,
    REJECT_REASONS,
    ParamsLayout,
    Update,
    UpdateRejected,
    aggregate,
    trimmed_count,
)

pytest.importorskip("flwr")  # tinyprop[fleet]: scripts/setup.sh installs it

from flwr.app import Array, ArrayRecord  # noqa: E402

# biases of the last 4 weighted ops, a quarter of a depthwise op's rows, half of a pointwise
# op's and the classifier, with momentum's velocities after the parameters
SCHEME = {"bias_last": 4, "weights": [{"op": 25, "fraction": 0.25}, {"op": 26, "fraction": 0.5},
                                      {"op": 29}]}


@pytest.fixture(scope="module")
def blob(vww_model_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet-params")
    (d / "scheme.json").write_text(json.dumps(SCHEME))
    tpb = d / "vww.tpb"
    assert main(["convert", str(vww_model_path), "-o", str(tpb), "--scheme",
                 str(d / "scheme.json"), "--momentum"]) == 0
    return load_blob(tpb)


@pytest.fixture(scope="module")
def layout(blob):
    return ParamsLayout.from_blob(blob.blob)


@pytest.fixture(scope="module")
def trained(blob):
    """The host board's params region after 6 momentum steps on random samples."""
    rng = np.random.default_rng(1)
    with open_engine("host", blob, HParams(lr=0.05, seed=3, momentum=0.9)) as engine:
        initial = engine.params()
        for i in range(6):
            engine.train(rng.integers(-128, 128, (96, 96, 3), dtype=np.int8), i % 2)
        return initial, engine.params()


def test_layout_names_the_trained_arrays_where_the_core_keeps_them(blob, layout, trained):
    names = [a.name for a in layout.arrays]
    assert names == ["op24.bias", "op25.bias", "op25.weights", "op26.bias", "op26.weights",
                     "op29.bias", "op29.weights"]
    shapes = {a.name: a.shape for a in layout.arrays}
    assert shapes["op25.weights"] == (64, 9)  # a quarter of 256 depthwise channels, 3x3 taps
    assert shapes["op26.weights"] == (128, 256)
    assert shapes["op29.weights"] == (2, 256)
    # the scheme's channels and the program's are the same rows
    program = blob.program
    for a in layout.arrays:
        if a.name.endswith("weights"):
            channels, _ = program.held_rows[a.tensor]
            assert list(a.channels) == list(channels)
        assert program.trainable_offsets[a.tensor] == a.offset
    assert layout.params_bytes == sum(a.nbytes for a in layout.arrays) == program.params_bytes
    assert layout.optimizer_bytes == program.optimizer_bytes > 0
    # the blob alone gives the region the C core starts from, byte for byte
    initial, _ = trained
    assert layout.initial + bytes(layout.optimizer_bytes) == initial


def test_a_blob_that_does_not_train_is_refused(vww_model_path):
    inference = BlobModel.load(vww_model_path)  # the .tflite packed without a program
    with pytest.raises(TinypropError, match="has no training program.*convert it with a "
                       "--scheme"):
        ParamsLayout.from_blob(inference.blob, "vww.tpb")


def test_split_and_join_are_byte_exact(layout, trained):
    initial, region = trained
    arrays = layout.split(region)
    assert {n: a.dtype for n, a in arrays.items()} == {a.name: a.dtype for a in layout.arrays}
    assert layout.join(arrays, region) == region
    assert any((arrays[a.name] != layout.initial_arrays()[a.name]).any()
               for a in layout.arrays)  # the steps changed something, or the test is empty
    # the trained parameters into the initial region: the initial velocities stay (zero)
    mixed = layout.join(arrays, initial)
    assert mixed[: layout.params_bytes] == region[: layout.params_bytes]
    assert mixed[layout.params_bytes :] == bytes(layout.optimizer_bytes)
    assert region[layout.params_bytes :] != bytes(layout.optimizer_bytes)
    # through a params record (PUSH_PARAMS, the board's store) and back
    record = params_record(region, layout.blob_id, step=6)
    back, step = layout.split_record(record)
    assert step == 6
    assert params_record(layout.join(back, region), layout.blob_id, 6) == record


def test_a_region_or_record_of_another_blob_is_refused(layout, trained):
    _, region = trained
    with pytest.raises(UpdateRejected) as e:
        layout.split(region[:-4])
    assert e.value.reason == "shape"
    with pytest.raises(UpdateRejected) as e:
        layout.split_record(params_record(region, layout.blob_id ^ 1), "board 2")
    assert e.value.reason == "blob_id" and "board 2" in str(e.value)
    record = bytearray(params_record(region, layout.blob_id))
    record[40] ^= 1
    with pytest.raises(TinypropError, match="CRC"):
        layout.split_record(bytes(record))


def test_only_the_trainable_parameters_travel(layout, trained):
    """The params region's parameters, without the frozen weights or the velocities; the
    ArrayRecord Flower sends adds some 140 bytes a named array."""
    arrays = layout.split(trained[1])
    record = ArrayRecord({n: Array(a) for n, a in arrays.items()})
    overhead = record.count_bytes() - layout.params_bytes
    assert 0 < overhead < 200 * len(arrays)  # 968 B for these 7
    assert layout.params_bytes < layout.model_bytes / 2
    assert {n: record[n].numpy().tobytes() for n in arrays} == \
        {n: a.tobytes() for n, a in arrays.items()}  # int8 and int32 cross Flower unchanged


# -- aggregation: properties over random updates of a small layout -------------------------

def _random_update(layout: ParamsLayout, rng: np.random.Generator, name: str, steps: int,
                   spread: int | None = None) -> Update:
    out = {}
    for a in layout.arrays:
        if spread is None:
            lo, hi = (-128, 128) if a.dtype == np.int8 else (-(2**31), 2**31)
            out[a.name] = rng.integers(lo, hi, a.shape, dtype=np.int64).astype(a.dtype)
        else:  # near the blob's values: what boards that trained a little send
            base = layout.initial_arrays()[a.name].astype(np.int64)
            v = base + rng.integers(-spread, spread + 1, a.shape)
            lo, hi = (-128, 127) if a.dtype == np.int8 else (-(2**31), 2**31 - 1)
            out[a.name] = np.clip(v, lo, hi).astype(a.dtype)
    return Update(name, out, steps)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), round_=st.integers(0, 1000), copies=st.integers(1, 5),
       steps=st.lists(st.integers(1, 2**20), min_size=5, max_size=5),
       method=st.sampled_from(AGGREGATIONS), data_seed=st.integers(0, 2**31))
def test_one_update_or_identical_updates_come_back_bit_for_bit(layout, seed, round_, copies,
                                                               steps, method, data_seed):
    one = _random_update(layout, np.random.default_rng(data_seed), "board", steps[0])
    updates = [Update(f"b{i}", one.arrays, steps[i]) for i in range(copies)]
    merged = aggregate(layout, updates, method, seed, round_)
    for a in layout.arrays:
        assert merged[a.name].dtype == a.dtype
        assert merged[a.name].tobytes() == one.arrays[a.name].tobytes()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 5), method=st.sampled_from(AGGREGATIONS), seed=st.integers(0, 99),
       data_seed=st.integers(0, 2**31), full_range=st.booleans())
def test_the_aggregate_is_the_real_mean_within_one_unit(layout, n, method, seed, data_seed,
                                                        full_range):
    """Real values (q x the blob's scale) of the aggregate lie within one unit of each
    channel's scale of the real-domain aggregate, and between the boards' extremes."""
    rng = np.random.default_rng(data_seed)
    updates = [_random_update(layout, rng, f"b{i}", int(rng.integers(1, 500)),
                              None if full_range else 3) for i in range(n)]
    merged = aggregate(layout, updates, method, seed, 1)
    w = np.array([u.steps for u in updates], np.float64)
    for a in layout.arrays:
        real = np.stack([a.real(u.arrays[a.name]) for u in updates])
        if method == "fedavg":
            want = np.tensordot(w / w.sum(), real, axes=1)
        elif method == "fedmedian":
            want = np.median(real, axis=0)
        else:
            k = trimmed_count(n)
            want = np.sort(real, axis=0)[k : n - k].mean(axis=0)
        got = a.real(merged[a.name])
        unit = a.scale.astype(np.float64) if got.ndim == 1 else a.scale[:, None]
        assert (np.abs(got - want) <= unit * (1 + 1e-9)).all(), a.name
        q = np.stack([u.arrays[a.name] for u in updates])
        assert (merged[a.name] >= q.min(axis=0)).all() and (merged[a.name] <= q.max(axis=0)).all()


def test_stochastic_rounding_is_unbiased_and_reproducible(layout):
    """One of three boards moves every parameter by +1 (mean +1/3): round-to-nearest would
    erase it; stochastic rounding keeps it on average, the same way for the same seed."""
    base = layout.initial_arrays()
    moved = {n: np.where(v < 127, v + 1, v).astype(v.dtype) for n, v in base.items()}
    updates = [Update("a", base, 10), Update("b", base, 10), Update("c", moved, 10)]
    first = aggregate(layout, updates, "fedavg", seed=5, round_=1)
    assert all((first[n] == aggregate(layout, updates, "fedavg", 5, 1)[n]).all() for n in base)
    ups = np.concatenate([(first[n] - base[n]).ravel() for n in base])
    movable = np.concatenate([(moved[n] != base[n]).ravel() for n in base])
    assert set(np.unique(ups)) <= {0, 1}
    assert abs(ups[movable].mean() - 1 / 3) < 0.01  # over 34,626 parameters
    other = aggregate(layout, updates, "fedavg", seed=5, round_=2)
    assert any((other[n] != first[n]).any() for n in base)  # a new round draws again


def test_robust_aggregations_ignore_one_poisoned_board(layout):
    rng = np.random.default_rng(4)
    honest = [_random_update(layout, rng, f"h{i}", 50, spread=2) for i in range(2)]
    poison = Update("poison", {a.name: np.full(a.shape, 127 if a.dtype == np.int8 else 2**31 - 1,
                                               a.dtype) for a in layout.arrays}, 10_000)
    for method in ("fedmedian", "trimmed"):
        merged = aggregate(layout, [*honest, poison], method, 0, 1)
        for a in layout.arrays:
            lo = np.minimum(honest[0].arrays[a.name], honest[1].arrays[a.name])
            hi = np.maximum(honest[0].arrays[a.name], honest[1].arrays[a.name])
            assert ((merged[a.name] >= lo) & (merged[a.name] <= hi)).all(), (method, a.name)
    avg = aggregate(layout, [*honest, poison], "fedavg", 0, 1)
    assert (avg["op29.weights"] > 100).all()  # the weighted mean follows the poison
    assert [trimmed_count(n) for n in range(1, 8)] == [0, 0, 1, 1, 1, 1, 1]
    assert trimmed_count(10, 0.3) == 3


def test_aggregate_refuses_an_unknown_method_or_an_empty_round(layout):
    with pytest.raises(TinypropError, match="fedavg, fedmedian, trimmed"):
        aggregate(layout, [Update("a", layout.initial_arrays(), 1)], "krum")
    with pytest.raises(TinypropError, match="every board of the round failed"):
        aggregate(layout, [], "fedavg")


# -- validation -----------------------------------------------------------------------------

def _bad(layout: ParamsLayout, name: str, value) -> dict:
    arrays = dict(layout.initial_arrays())
    arrays[name] = value
    return arrays


@pytest.mark.parametrize("case", ["blob_id", "names_missing", "names_extra", "shape", "nan",
                                  "inf", "fraction", "int8_range", "int32_range", "steps_zero",
                                  "steps_float", "strings"])
def test_every_bad_update_is_refused_with_its_reason(layout, case):
    ok = layout.initial_arrays()
    w = "op29.weights"
    args = {
        "blob_id": (ok, layout.blob_id ^ 0x10, 5, "blob_id"),
        "names_missing": ({k: v for k, v in ok.items() if k != w}, layout.blob_id, 5, "names"),
        "names_extra": ({**ok, "op3.weights": ok[w]}, layout.blob_id, 5, "names"),
        "shape": (_bad(layout, w, ok[w][:, :-1]), layout.blob_id, 5, "shape"),
        "nan": (_bad(layout, w, np.where(ok[w] > 0, np.nan, 1.0)), layout.blob_id, 5,
                "not_finite"),
        "inf": (_bad(layout, "op26.bias", np.full(256, np.inf)), layout.blob_id, 5,
                "not_finite"),
        "fraction": (_bad(layout, w, ok[w] + 0.5), layout.blob_id, 5, "not_integer"),
        "int8_range": (_bad(layout, w, ok[w].astype(np.int16) + 200), layout.blob_id, 5,
                       "out_of_range"),
        "int32_range": (_bad(layout, "op29.bias", np.array([2**31, 0])), layout.blob_id, 5,
                        "out_of_range"),
        "steps_zero": (ok, layout.blob_id, 0, "steps"),
        "steps_float": (ok, layout.blob_id, 2.5, "steps"),
        "strings": (_bad(layout, "op29.bias", np.array(["a", "b"])), layout.blob_id, 5,
                    "not_integer"),
    }
    arrays, blob_id, steps, reason = args[case]
    with pytest.raises(UpdateRejected) as e:
        layout.check(arrays, blob_id, steps, board="night")
    assert e.value.reason == reason
    msg = str(e.value)
    assert msg.startswith("night: update refused") and REJECT_REASONS[reason] in msg
    assert "\n" not in msg


def test_a_good_update_passes_as_the_layouts_dtypes(layout, trained):
    arrays = layout.split(trained[1])
    wide = {n: a.astype(np.float64) for n, a in arrays.items()}  # a client's other carrier
    back = layout.check(wide, layout.blob_id, 12, "haze")
    assert all(back[n].dtype == arrays[n].dtype and (back[n] == arrays[n]).all()
               for n in arrays)
