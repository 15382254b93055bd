"""vww-mini from its public originals, end to end against a real HTTP server on 127.0.0.1 that
serves ../shared's copies of the COCO originals under COCO's paths (tests/asset_server.py): the
shipped list, the checked download, an interrupted transfer resumed, a corrupt file refused and
fetched again, the one-line errors (no network, HTTP, hash, full disk), and the built photos
byte for byte equal to vww-mini."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from asset_server import VWW_MINI, AssetServer, coco_routes
from tinyprop.cli import main
from tinyprop.data import assets, download, vww_mini
from tinyprop.paths import CACHE_ENV

# A few photos for the mechanism: both classes, both splits, the two grayscale originals, and
# originals with a JPEG comment (kept in the built file)
SUBSET_NAMES = [
    "coco_train2017_000000000009.jpg", "coco_train2017_000000000072.jpg",
    "coco_train2017_000000000086.jpg", "coco_val2017_000000000139.jpg",
    "coco_val2017_000000005001.jpg", "coco_train2017_000000000036.jpg",
]


def subset() -> list[vww_mini.Photo]:
    by_name = {p.filename: p for p in vww_mini.photos()}
    return [by_name[n] for n in SUBSET_NAMES]


@pytest.fixture
def coco(monkeypatch, tmp_path):
    """The server, with the cache in tmp_path/cache, $TINYPROP_ASSETS unset, short retries."""
    monkeypatch.delenv(assets.ASSETS_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(download, "RETRY_DELAYS", (0.01,) * 4)
    with AssetServer(coco_routes()) as server:
        monkeypatch.setenv(vww_mini.COCO_URL_ENV, server.url)
        yield server


def assert_built_like_shared(folder: Path, photos: list[vww_mini.Photo]) -> None:
    for p in photos:
        assert (folder / p.label / p.filename).read_bytes() == \
            (VWW_MINI / p.label / p.filename).read_bytes(), p.filename
    built = sorted(q.name for c in ("person", "non_person") for q in (folder / c).iterdir())
    assert built == sorted(p.filename for p in photos)
    holdout = (folder / "holdout.txt").read_text().split()
    assert holdout == [p.filename for p in photos if p.split == "holdout"]


def one_line_error(capsys, argv: list[str]) -> str:
    """The error of `tinyprop ARGV`: exit status 2 and one line (after any progress bars)."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"tinyprop {argv[0]}: error: "), err
    assert not any("Traceback" in line or "error" in line for line in err[:-1]), err
    return err[-1]


def test_shipped_list_is_vww_mini():
    """Every row agrees with the shared copy: labels, holdout, the originals' sizes and hashes,
    and the hash of each 96x96 file."""
    photos = vww_mini.photos()
    with open(VWW_MINI / "labels.csv", newline="") as f:
        labels = {r["filename"]: r for r in csv.DictReader(f)}
    with open(VWW_MINI / "originals.csv", newline="") as f:
        originals = {r["filename"]: r for r in csv.DictReader(f)}
    holdout = set((VWW_MINI / "holdout.txt").read_text().split())
    assert len(photos) == len(labels) == 397
    assert sum(p.split == "holdout" for p in photos) == len(holdout) == 121
    for p in photos:
        row, original = labels[p.filename], originals[p.filename]
        assert (p.label, p.split) == (row["label"], row["split"])
        assert p.split == ("holdout" if p.filename in holdout else "train")
        assert (p.coco_split, str(p.coco_id), str(p.bytes), p.sha256) == (
            original["coco_split"], original["coco_id"], original["bytes"], original["sha256"])
        assert original["coco_url"] == f"{vww_mini.COCO_BASE_URL}/{p.coco_path}"
        built = (VWW_MINI / p.label / p.filename).read_bytes()
        assert hashlib.sha256(built).hexdigest() == p.built_sha256


def test_downloads_checks_and_builds_the_photos_byte_for_byte(coco, tmp_path):
    photos = subset()
    folder = vww_mini.ensure(photos)
    assert folder == tmp_path / "cache" / "datasets" / "vww-mini"
    assert_built_like_shared(folder, photos)
    assert sorted(p for p, _ in coco.requests) == sorted(p.coco_path for p in photos)
    for p in photos:  # the originals stay in the cache, checked
        original = tmp_path / "cache" / "coco" / p.coco_path
        assert hashlib.sha256(original.read_bytes()).hexdigest() == p.sha256
    assert not list((tmp_path / "cache").rglob("*.part"))
    assert vww_mini.ensure(photos) == folder  # built: no request
    assert len(coco.requests) == len(photos)


def test_an_interrupted_transfer_resumes_where_it_stopped(coco):
    photo = subset()[0]
    coco.faults[photo.coco_path] = ["cut"]
    folder = vww_mini.ensure([photo])
    half = photo.bytes // 2
    assert coco.requested(photo.coco_path) == [None, f"bytes={half}-"]
    assert_built_like_shared(folder, [photo])


def test_an_interrupted_run_resumes_in_the_next(coco, monkeypatch, tmp_path):
    photo = subset()[1]
    coco.faults[photo.coco_path] = ["cut"]
    monkeypatch.setattr(download, "RETRY_DELAYS", ())  # one attempt: the run fails
    with pytest.raises(download.DownloadError, match=f"connection closed after {photo.bytes // 2:,}"
                       f" of {photo.bytes:,} bytes, 1 attempts.*resumes"):
        vww_mini.ensure([photo])
    part = download.part_path(tmp_path / "cache" / "coco" / photo.coco_path)
    assert part.stat().st_size == photo.bytes // 2
    assert not (tmp_path / "cache" / "datasets" / "vww-mini").exists()
    folder = vww_mini.ensure([photo])  # the next run asks for the rest only
    assert coco.requested(photo.coco_path) == [None, f"bytes={photo.bytes // 2}-"]
    assert_built_like_shared(folder, [photo])


def test_a_corrupt_transfer_is_refused_and_fetched_again(coco):
    photo = subset()[2]
    coco.faults[photo.coco_path] = ["corrupt"]
    folder = vww_mini.ensure([photo])
    assert coco.requested(photo.coco_path) == [None, None]
    assert_built_like_shared(folder, [photo])


def test_a_corrupt_file_in_the_cache_is_fetched_again(coco, tmp_path):
    photos = subset()[:3]
    folder = vww_mini.ensure(photos)
    original = tmp_path / "cache" / "coco" / photos[0].coco_path
    original.write_bytes(b"\0" * photos[0].bytes)
    (folder / vww_mini.STAMP).unlink()  # as if the build had not finished
    vww_mini.ensure(photos)
    assert [p for p, _ in coco.requests].count(photos[0].coco_path) == 2
    assert len(coco.requests) == len(photos) + 1
    assert_built_like_shared(folder, photos)


def test_a_file_that_stays_wrong_is_one_line_and_leaves_nothing(coco, capsys, tmp_path,
                                                                monkeypatch, vww_model_path):
    photo = subset()[3]
    coco.routes["vww_96_int8.tflite"] = vww_model_path
    monkeypatch.setenv(assets.MODEL_URL_ENV, coco.url)
    coco.faults[photo.coco_path] = ["corrupt", "corrupt"]
    monkeypatch.setattr(vww_mini, "photos", lambda: [photo])
    err = one_line_error(capsys, ["fetch"])
    assert f"{coco.url}/{photo.coco_path}: sha256 " in err and "does not match" in err
    assert "TINYPROP_ASSETS" in err
    cached = tmp_path / "cache" / "coco" / photo.coco_path
    assert not cached.exists() and not download.part_path(cached).exists()


def test_a_build_with_other_bytes_is_kept_with_a_note(coco, capsys):
    """Another Pillow or libjpeg may encode other bytes: the set is used, and the user told."""
    photos = subset()[:2]
    other = [photos[0], dataclasses.replace(photos[1], built_sha256="0" * 64)]
    folder = vww_mini.ensure(other)
    assert_built_like_shared(folder, photos)
    assert f"note: 1 of 2 photos built here differ from vww-mini's bytes (first: " \
        f"{photos[1].filename}; Pillow " in capsys.readouterr().err
    vww_mini.ensure(other)  # built: no new note
    assert "note" not in capsys.readouterr().err


def test_transient_server_errors_are_retried(coco):
    photo = subset()[4]
    coco.faults[photo.coco_path] = ["503", "503", "cut"]
    vww_mini.ensure([photo])
    assert len(coco.requested(photo.coco_path)) == 4


def test_a_missing_file_is_one_line_and_not_retried(coco):
    photo = subset()[5]
    del coco.routes[photo.coco_path]
    with pytest.raises(download.DownloadError,
                       match=f"{photo.coco_path}: HTTP 404 Not Found; the file is not there"):
        vww_mini.ensure([photo])
    assert len(coco.requested(photo.coco_path)) == 1


def test_no_network_is_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv(assets.ASSETS_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    # .invalid never resolves (RFC 2606): what a machine without a network sees for COCO
    monkeypatch.setenv(vww_mini.COCO_URL_ENV, "http://images.tinyprop.invalid")
    monkeypatch.setenv(assets.MODEL_URL_ENV, "http://models.tinyprop.invalid")
    err = one_line_error(capsys, ["fetch"])
    assert "no network: cannot reach models.tinyprop.invalid" in err
    assert "set TINYPROP_ASSETS (or pass --model / --data) to a local copy" in err
    with pytest.raises(download.DownloadError, match="no network: cannot reach images.tinyprop"):
        vww_mini.ensure(subset())


def test_a_full_disk_is_one_line(coco, monkeypatch, tmp_path):
    photos = subset()
    # checked before downloading: the space still needed, and where
    monkeypatch.setattr(download.shutil, "disk_usage", lambda path: SimpleNamespace(free=1000))
    need = sum(p.bytes for p in photos) / 1e6
    with pytest.raises(download.DownloadError, match=rf"disk full: {tmp_path}/cache/coco needs "
                       rf"{need:.1f} MB more; free space there, or set TINYPROP_CACHE"):
        vww_mini.ensure(photos)
    assert coco.requests == []


def test_a_disk_that_fills_up_while_writing_is_one_line(coco, tmp_path):
    photo = subset()[0]
    dest = tmp_path / "cache" / "coco" / photo.coco_path
    dest.parent.mkdir(parents=True)
    download.part_path(dest).symlink_to("/dev/full")  # every write: ENOSPC
    with pytest.raises(download.DownloadError,
                       match=rf"disk full: {dest.parent} needs 0\.\d MB more; free space there, "
                       "or set TINYPROP_CACHE"):
        vww_mini.ensure([photo])


def test_local_assets_and_flags_need_no_network(coco, capsys, monkeypatch, vww_model_path):
    monkeypatch.setenv(assets.ASSETS_ENV, str(VWW_MINI.parents[1]))
    assert main(["fetch"]) == 0
    out = capsys.readouterr().out
    assert str(vww_model_path) in out and f"{VWW_MINI} (397 photos: 276 train, 121 holdout)" in out
    monkeypatch.delenv(assets.ASSETS_ENV)
    assert assets.resolve_dataset(VWW_MINI) == VWW_MINI
    assert coco.requests == []


@pytest.mark.slow
def test_all_397_photos_rebuild_byte_for_byte(coco, tmp_path):
    photos = vww_mini.photos()
    folder = assets.resolve_dataset()  # $TINYPROP_ASSETS unset: the download
    assert folder == tmp_path / "cache" / "datasets" / "vww-mini"
    assert_built_like_shared(folder, photos)
    assert len(coco.requests) == 397
    assert (folder / "holdout.txt").read_bytes() == (VWW_MINI / "holdout.txt").read_bytes()
