"""The soak (tinyprop.faults.soak) in short: the demo's blob on qemu-m4 for a few steps, saved
every 4, the board restarted at step 10 (two steps past its last save, which it trains again),
its params equal to the host C core's uninterrupted run at every save, after the restart and at
the end. The long run (10,000 steps planned) is soak.run()'s default; its figures are
soak_last.json (docs/fuzzing.md)."""

from __future__ import annotations

import pytest
from tinyprop.errors import TinypropError
from tinyprop.faults import soak

pytestmark = pytest.mark.slow  # the demo's blob on qemu-m4


@pytest.fixture(scope="module")
def demo_model():
    return soak.demo_model()


def test_restart_between_saves_resumes_bit_exact(demo_model, tmp_path):
    lines: list[str] = []
    got = soak.run(steps=12, save_every=4, reset_every=10, model=demo_model, workdir=tmp_path,
                   say=lines.append)
    assert got["soak_divergences"] == 0, lines
    assert (got["soak_steps"], got["resets"], got["saves"]) == (12, 1, 3)
    assert got["steps_replayed"] == 2  # steps 8 and 9: trained, lost with the board, trained again
    assert got["checks"] == 4  # three saves and the restart
    # the store the board restored from is the one it saved to
    assert (tmp_path / "tinyprop.store").is_file()
    assert len(set(got["stack_high_water"])) == 1 and len(set(got["arena_high_water"])) == 1
    assert 0 < got["stack_high_water"][0] < 64 << 10 and got["arena_high_water"][0] > 0


def test_a_step_count_of_zero_is_refused_by_name():
    with pytest.raises(TinypropError, match="steps, save_every and reset_every must be positive"):
        soak.run(steps=0, model=(None, None, None))


def test_last_figures_are_a_clean_run():
    got = soak.last_figures()
    steps, save_every, reset_every = got["soak_steps"], got["save_every"], got["reset_every"]
    assert got["soak_divergences"] == 0 and steps > 2 * reset_every  # restarted twice or more
    assert got["saves"] == steps // save_every and got["resets"] == (steps - 1) // reset_every
    assert len(got["stack_high_water"]) == got["saves"]
    assert len(set(got["stack_high_water"])) == 1 and len(set(got["arena_high_water"])) == 1
