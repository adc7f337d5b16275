"""bench/gemm_graph.py's rule for how many distinct weights a graph cycles through.

The decode tables are only honest if no call reads a weight the previous call
left in L2, so the rule is pinned here (no GPU needed: the helpers are plain
arithmetic, and the script imports torch only inside main()).
"""
import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "gemm_graph.py")
_spec = importlib.util.spec_from_file_location("gemm_graph", _PATH)
gemm_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gemm_graph)

L2 = 60 << 20  # an H200's L2 as torch reports it


@pytest.mark.parametrize("n,k,want", [
    (8192, 8192, 4),    # 32 MiB of FP4 each: 3.75 of them fill twice the L2
    (28672, 8192, 2),   # one is 112 MiB, under 120: a second is needed
    (4096, 8192, 8),    # 16 MiB each
    (256, 8192, gemm_graph.R),  # 1 MiB each: capped at the calls a graph holds
])
def test_auto_rule_fills_twice_the_l2(n, k, want):
    fp4 = n * k // 2
    got = gemm_graph.weight_copies(0, fp4, L2)
    assert got == want
    assert got == gemm_graph.R or got * fp4 >= 2 * L2
    assert got == 1 or (got - 1) * fp4 < 2 * L2  # the fewest that do


def test_asked_count_is_kept_and_short_auto_rows_say_so():
    assert gemm_graph.weight_copies(1, 8192 * 8192 // 2, L2) == 1
    assert gemm_graph.weights_note(1, 1, 8192 * 8192 // 2, L2) == ""
    assert gemm_graph.weights_note(0, 4, 8192 * 8192 // 2, L2) == ""
    note = gemm_graph.weights_note(0, gemm_graph.R, 256 * 8192 // 2, L2)
    assert "weights: 20, 20 MB of FP4 (L2 60 MB)" in note
