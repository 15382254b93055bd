"""The arena planner: golden cases and a property test that live buffers never overlap."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tinyprop.planner import Buffer, check_plan, plan_memory


def test_tflm_greedy_golden_case():
    # TFLite Micro's greedy_memory_planner_test "TestGreedyBasics": two buffers of 10 and 20
    # bytes live at disjoint times share offset 0
    bufs = [Buffer("a", 10, 0, 1), Buffer("b", 20, 2, 3)]
    offsets, total = plan_memory(bufs)
    assert offsets == [0, 0] and total == 24  # 8-byte alignment of 20


def test_overlapping_lifetimes_stack():
    bufs = [Buffer("a", 100, 0, 2), Buffer("b", 50, 1, 3), Buffer("c", 30, 3, 4)]
    offsets, total = plan_memory(bufs)
    check_plan(bufs, offsets, total)
    # a and b overlap in time: 104 + 56; c can reuse a's bytes after step 2
    assert total == 104 + 56


def test_pinned_buffer_stays_put():
    bufs = [Buffer("in", 64, 0, 1, pinned=0), Buffer("x", 256, 1, 2), Buffer("y", 16, 2, 3)]
    offsets, total = plan_memory(bufs)
    assert offsets[0] == 0
    check_plan(bufs, offsets, total)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4000), st.integers(0, 30), st.integers(0, 10)),
                min_size=1, max_size=40))
def test_random_lifetimes_never_overlap(spec):
    bufs = [Buffer(f"b{i}", size, first, first + span) for i, (size, first, span) in
            enumerate(spec)]
    offsets, total = plan_memory(bufs)
    check_plan(bufs, offsets, total)
    peak_live = max(sum(b.size for b in bufs if b.first <= t <= b.last) for t in range(41))
    assert total >= peak_live
