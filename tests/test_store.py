"""The parameter store (firmware/core/tp_store.c) under power cuts, on a simulated NOR flash
(tests/c/store_campaign.c: erased = 0xFF, programming only clears bits, page erase).

A real params record (the IR model's blob, trained on its samples) is saved four times in a row
into a blank region (the first save on blank flash, then saves over older records, the ring
wrapping); the power is cut at every erase and word program of every save, once cleanly and
once torn (the word half programmed: some of its bits cleared; the page half erased: erased up
to a point, random bits set beyond). After each cut the board reboots and loads: exactly the
record saved before (or nothing, before the first save) or the new one, never a mix, never
garbage; restored and stepped once, the parameters equal the unbroken run's; the next save
completes and loads. Geometries: the nRF52840's 4 KB pages of 4-byte words, the ESP32's 4 KB
sectors written 16 bytes at a time, and 256-byte pages, where a record spans five pages and
wraps at the region's end. Mutants of the store (overwriting the newest record; the header
before the record) lose records in the same campaign: it can fail.
And the save policy (tp_save_policy): every N labelled steps, at most every M seconds, in C,
in the learn application and in the device loop on the host board."""

from __future__ import annotations

import json
import subprocess

import pytest
from learn_camera import CLASSES
from test_device_host import LR, SEED, load_ir_model
from test_platformio import build_host_board
from tinyprop.device.device import Device
from tinyprop.device.firmware import core_cflags, core_library
from tinyprop.device.link import Link, PipeTransport
from tinyprop.device.runners import start_host_board
from tinyprop.faults.store import CAMPAIGN, Geometry, campaign_program, measure, run_campaign
from tinyprop.learn.camera import (
    NO_LABEL,
    camera_mode,
    read_frames,
    read_label_script,
    write_camera,
)
from tinyprop.learn.run import LearnConfig, learn_firmware
from tinyprop.paths import REPO_ROOT

SAVES = 4
GEOMETRIES = [Geometry("nrf52840", 4096, 4, 3), Geometry("esp32", 4096, 16, 3),
              Geometry("small-pages", 256, 4, 11)]


@pytest.fixture(scope="module")
def model():
    return load_ir_model()


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: g.name)
def test_every_cut_and_tear_loads_the_old_or_the_new_record(model, geometry):
    r = run_campaign(model.blob, model.inputs, model.labels, geometry, saves=SAVES, tears=1)
    need = geometry.pages_per_save(r["record_bytes"])
    assert r["pages_per_save"] == need and r["erases"] == SAVES * need
    assert r["ops"] > SAVES * (r["record_bytes"] // geometry.word_bytes)  # every word programmed
    assert r["power_cuts"] == r["torn_ops"] == r["ops"]  # every one cut, and torn
    assert r["records_lost"] == 0 and r["torn_records_lost"] == 0
    assert r["loaded_old"] + r["loaded_new"] == r["power_cuts"] + r["torn_ops"]
    assert r["loaded_old"] > 0
    assert r["resume_mismatches"] == 0 and r["recovery_failures"] == 0
    assert r["flash_violations"] == 0  # no word programmed twice, none across a page
    assert r["page_erases_max"] - r["page_erases_min"] <= 1  # the ring spreads the wear


HEADER_LAST = """    memset(h, 0xFF, sizeof h);
    for (uint32_t i = 0; i < w; i += 4u) {
        tp_wr_u32(h + i, TP_STORE_MAGIC);
    }
    tp_wr_u32(h + w, sequence);
    tp_wr_u32(h + w + 4u, n);
    tp_wr_u32(h + w + 8u, tp_crc32(0u, src, n));
    tp_wr_u32(h + w + 12u, header_crc(h + w));
    if (f->program(f->ctx, base + w, h + w, hb - w) != 0 || f->program(f->ctx, base, h, w) != 0) {
        return TP_ERR_IO;
    }
"""
RECORD_START = "    whole = n / w * w;\n"
TRUST_HEADER = ("st = record_intact(f, &s);", "st = record_intact(f, &s) >= 0;")
MUTANTS = {
    # the save goes over the newest record (one slot, not a ring)
    "overwrites-newest": [("start = (newest.page + newest.pages) % f->pages;",
                           "start = newest.page;")],
    # the header programmed before the record, and trusted without the record's CRC
    "header-first": [(HEADER_LAST, ""), (RECORD_START, RECORD_START + HEADER_LAST),
                     TRUST_HEADER],
}


def mutant_campaign(tmp_path, model, edits: list[tuple[str, str]]) -> dict:
    """The campaign (256-byte pages, 3 saves, one tear an operation) linked against tp_store.c
    with `edits` made."""
    source = (REPO_ROOT / "firmware" / "core" / "tp_store.c").read_text()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    mutant = tmp_path / "tp_store_mutant.c"
    mutant.write_text(source)
    exe = tmp_path / "campaign"
    # the mutant's object first: the library's tp_store.o is then never pulled in
    subprocess.run(["gcc", *core_cflags(), "-O1", "-o", str(exe), str(CAMPAIGN), str(mutant),
                    str(core_library(shared=False)), "-lm"], check=True, capture_output=True)
    files = []
    for name, data in (("blob", model.blob), ("inputs", model.inputs.tobytes()),
                       ("labels", bytes(model.labels.tolist()))):
        (tmp_path / name).write_bytes(data)
        files.append(str(tmp_path / name))
    out = subprocess.run([str(exe), "campaign", *files, "256", "4", "11", "3", "2", "1", "1",
                          "0.05", "7"], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


@pytest.mark.parametrize("mutant", MUTANTS)
def test_a_broken_store_loses_records_in_the_campaign(tmp_path, model, mutant):
    r = mutant_campaign(tmp_path, model, MUTANTS[mutant])
    assert r["records_lost"] > 0 and r["torn_records_lost"] > 0


def test_the_records_crc_is_a_second_line_of_defence(tmp_path, model):
    """Record then header: a header only ever names a whole record, so the campaign's cuts and
    tears never need the record's CRC (it guards against what they do not inject: bit rot, a
    region written by other firmware)."""
    r = mutant_campaign(tmp_path, model, [TRUST_HEADER])
    assert r["records_lost"] == 0 and r["torn_records_lost"] == 0


def policy(every: int, min_seconds: int, events: list[str]) -> str:
    out = subprocess.run([str(campaign_program()), "policy", str(every), str(min_seconds),
                          *events], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_save_policy_every_n_steps_at_most_every_m_seconds():
    # every 3 steps, no time limit
    assert policy(3, 0, ["0"] * 9) == "001001001"
    # every 2 steps, at most every 100 s: the first save of a boot waits for no clock; held
    # steps still count, and the save comes with the first step after the limit
    assert policy(2, 100, ["0", "1", "2", "3", "50", "99", "100", "101", "102"]) == "010000010"
    # a save on request restarts both counts
    assert policy(2, 100, ["0", "s10", "20", "111", "112"]) == "0010"
    # 0: only on request
    assert policy(0, 0, ["0"] * 5) == "00000"


def test_measure_sums_the_campaigns_and_states_the_wear(model):
    fig = measure(model.blob, model.inputs, model.labels, saves=2, tears=1)
    assert fig["power_cuts"] == sum(r["power_cuts"] for r in fig["campaigns"].values()) > 0
    assert fig["records_lost"] == fig["torn_records_lost"] == 0
    assert fig["torn_ops"] == fig["power_cuts"]
    assert fig["erases_per_save"] == {"nrf52840": 1.0, "esp32": 1.0}
    life = fig["lifetime"]["nrf52840"]
    # 1,248 B + 20 B of header in one 4 KB page; the Nano's 48 pages of 10,000 erases
    assert life["region_pages"] == 48
    assert life["erases_per_save"] == 1 and life["saves"] == 480_000
    assert life["days_at_1_min"] == pytest.approx(480_000 / 1440, abs=0.1)


@pytest.mark.parametrize("minutes,saves", [(0, 6), (120, 1)])
def test_the_learn_app_saves_at_most_every_m_minutes(learn_blob, learn_frames, tmp_path, minutes,
                                                     saves):
    """The host board's learn app (a microsecond clock), saving every labelled step: with no
    limit each of the 6 labelled frames saves; at most every 120 minutes only the first does
    (a boot's first save waits for no clock), then the end of the frames saves once more."""
    frames = read_frames(learn_frames / "frames", camera_mode("96-gray"))
    labels = read_label_script(learn_frames / "labels.csv", frames.names, CLASSES)[:8]
    short = type(frames)(frames.mode, frames.raw[:8], frames.names[:8])
    assert sum(y != NO_LABEL for y in labels) == 6
    write_camera(tmp_path, short, labels, wait_host=False)
    cfg = LearnConfig(lr=0.01, save_every=1, save_minutes=minutes)
    assert f"#define TP_LEARN_SAVE_MINUTES {minutes}u" in cfg.header()
    exe = learn_firmware("host", learn_blob.blob, cfg, short)
    out = subprocess.run([str(exe)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    saved = [int(line.split()[-1]) for line in out.splitlines() if line.startswith("saved at")]
    assert saved == [1, 2, 3, 4, 5, 6][:saves]
    assert "learn done frames 8 labelled 6" in out


@pytest.mark.slow  # the whole library compiled for the host board
@pytest.mark.parametrize("minutes,restored", [(0, 6), (120, 2)])
def test_the_device_loop_autosaves_at_most_every_m_minutes(model, tmp_path, minutes, restored):
    """The device loop built as the Arduino envs build it, autosaving every 2 steps: killed
    after 7 steps, the restarted board restores step 6 with no time limit, step 2 (a boot's
    first autosave) with at most one save every 120 minutes."""
    exe = build_host_board(tmp_path, model.blob, ["-DTP_DEVICE_SAVE_EVERY=2",
                                                  f"-DTP_DEVICE_SAVE_MINUTES={minutes}u"])
    with start_host_board(exe, tmp_path) as run, Link(PipeTransport(run.proc, "host")) as link:
        dev = Device(link)
        dev.hello(30)
        dev.set_hparams(LR, SEED)
        for i in range(7):
            dev.train(model.inputs[i % 8], int(model.labels[i % 8]))
        run.proc.kill()
    with start_host_board(exe, tmp_path) as run, Link(PipeTransport(run.proc, "host")) as link:
        dev = Device(link)
        dev.hello(30)
        assert dev.pull_params() == model.reference(restored).params_bytes()
