"""The parameter store under power cuts (firmware/core/tp_store.c, docs/store.md): the campaign
of tests/c/store_campaign.c on a simulated NOR flash, and the wear a save policy costs.

    measure(blob, inputs, labels)   # {"power_cuts": ..., "records_lost": 0, ...}

The campaign trains the blob's session on the samples, saves its params record again and
again, cuts the power at every erase and program operation of each save (clean, then torn: a
word half programmed, a page half erased), reboots and loads; `records_lost` counts the loads
that gave neither the record saved before nor the new one (its goal is 0), and the resume
check restores what loaded and takes a training step that must equal the unbroken run's.
"""

from __future__ import annotations

import functools
import json
import math
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..device.profiles import blob_needs
from ..errors import TinypropError
from ..paths import REPO_ROOT

CAMPAIGN = REPO_ROOT / "tests" / "c" / "store_campaign.c"
ENDURANCE = 10_000  # erase cycles a page of the nRF52840's flash is specified for
MINUTES_A_YEAR = 365.25 * 24 * 60


@dataclass(frozen=True)
class Geometry:
    """A store region's flash: pages of page_bytes, programmed in words of word_bytes."""

    name: str
    page_bytes: int
    word_bytes: int
    pages: int

    def header_bytes(self) -> int:
        """tp_store_header_bytes: the commit unit, then four u32 fields in whole words."""
        return self.word_bytes + math.ceil(16 / self.word_bytes) * self.word_bytes

    def pages_per_save(self, record_bytes: int) -> int:
        """tp_store_pages_per_save: the pages one save erases."""
        return math.ceil((self.header_bytes() + record_bytes) / self.page_bytes)

    def max_record(self) -> int:
        """tp_store_max_record: two records side by side in the ring."""
        return self.pages // 2 * self.page_bytes - self.header_bytes()


# The boards' store regions: the Nano 33 BLE's last 192 KB of flash (nRF52840: 4 KB pages,
# 4-byte words); the ESP32's `tinyprop` partition of boards/esp32/partitions.csv (960 KB of 4 KB
# sectors, written in the 16 bytes flash encryption needs).
NANO33BLE = Geometry("nrf52840", 4096, 4, 48)
ESP32 = Geometry("esp32", 4096, 16, 240)


def saves_in_a_lifetime(geometry: Geometry, record_bytes: int,
                        endurance: int = ENDURANCE) -> int:
    """Saves before the most-erased page reaches `endurance`: the ring erases every page in
    turn, pages_per_save pages a save."""
    return endurance * geometry.pages // geometry.pages_per_save(record_bytes)


def lifetime_years(geometry: Geometry, record_bytes: int, minutes_per_save: float,
                   endurance: int = ENDURANCE) -> float:
    """Years of saving every `minutes_per_save` minutes before the flash wears out."""
    return saves_in_a_lifetime(geometry, record_bytes, endurance) * minutes_per_save \
        / MINUTES_A_YEAR


@functools.cache
def campaign_program() -> Path:
    """tests/c/store_campaign.c built against the C core (rebuilt when either changed; checked
    once a process)."""
    from ..device.firmware import build_program

    if not CAMPAIGN.is_file():
        raise TinypropError(f"{CAMPAIGN}: the store's fault campaign is in the source "
                            "checkout's tests/c; run it from a checkout")
    return build_program(CAMPAIGN)


def run_campaign(blob: bytes, inputs: np.ndarray, labels: Sequence[int], geometry: Geometry,
                 saves: int = 4, steps: int = 2, stride: int = 1, tears: int = 2,
                 lr: float = 0.05, seed: int = 7) -> dict:
    """One campaign (store_campaign.c's `campaign`): its counts as a dict."""
    exe = campaign_program()
    with tempfile.TemporaryDirectory() as tmp:
        files = [Path(tmp) / name for name in ("blob.tpb", "inputs.bin", "labels.bin")]
        files[0].write_bytes(blob)
        files[1].write_bytes(np.ascontiguousarray(inputs, dtype=np.int8).tobytes())
        files[2].write_bytes(bytes(int(y) for y in labels))
        args = [geometry.page_bytes, geometry.word_bytes, geometry.pages, saves, steps, stride,
                tears, repr(float(lr)), seed]
        proc = subprocess.run([str(exe), "campaign", *map(str, files), *map(str, args)],
                              capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        raise TinypropError(f"the store campaign on {geometry.name} failed: "
                            f"{proc.stderr.strip()}")
    return json.loads(proc.stdout)


def measure(blob: bytes, inputs: np.ndarray, labels: Sequence[int],
            geometries: Sequence[Geometry] = (NANO33BLE, ESP32), saves: int = 4,
            stride: int = 1, tears: int = 2, save_minutes: float = 120.0) -> dict:
    """The store's figures: the campaign on each geometry's flash, in the smallest ring that
    holds two records and wraps (so that `saves` saves fill it and go round), summed; the
    erases a save costs and the lifetime of the boards' real regions with this blob's record at
    one save every `save_minutes` (the default policy's limit) and at one a minute. Every
    operation is cut with stride 1; a training step follows every cut, so a large model wants
    a stride (a VWW step takes about 0.2 s here: the demo's record, 15,400 word programs a
    save, wants stride 1024 or so; every erase and the header's operations are cut still)."""
    record = blob_needs(blob).record  # the params record tp_device and tp_learn save
    runs = {}
    for g in geometries:
        ring = Geometry(g.name, g.page_bytes, g.word_bytes, 2 * g.pages_per_save(record) + 1)
        runs[g.name] = run_campaign(blob, inputs, labels, ring, saves=saves, stride=stride,
                                    tears=tears)
    total = {key: sum(r[key] for r in runs.values())
             for key in ("power_cuts", "records_lost", "torn_ops", "torn_records_lost",
                         "resume_mismatches", "recovery_failures", "flash_violations")}
    lifetime = {g.name: {"region_pages": g.pages, "erases_per_save": g.pages_per_save(record),
                         "saves": saves_in_a_lifetime(g, record),
                         f"years_at_{save_minutes:g}_min": round(
                             lifetime_years(g, record, save_minutes), 2),
                         "days_at_1_min": round(lifetime_years(g, record, 1.0) * 365.25, 1)}
                for g in geometries}
    return {**total, "erases_per_save": {name: r["erases"] / r["saves"]
                                         for name, r in runs.items()},
            "record_bytes": record, "lifetime": lifetime, "campaigns": runs}
