"""Memory safety and thread safety of the Python layer (CPU):

- a view (Buffer, NumPy array, torch tensor, DLPack capsule) of a direction never
  outlives that direction's memory: update_usage and quantize_into refuse to drop
  or re-allocate a direction while views of it are alive;
- quantize(usage=...) is atomic when threads share one quantizer;
- Buffer.__dlpack__ follows the DLPack stream protocol (CPU: only stream=None;
  CUDA: the consumer's stream waits on an event of libquant's last stream).
"""

from __future__ import annotations

import ctypes as C
import gc
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import ml_dtypes
import numpy as np
import pytest

import libquant as lq
from libquant import _dlpack
from libquant import _lib as L
from conftest import CUDA_SKIP

RNG = np.random.default_rng(77)


def randn(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


def churn() -> None:
    """Allocates and frees buffers of several sizes, so that freed memory is reused."""
    for _ in range(10):
        for n in (16, 32, 64):
            lq.Quantizer("fp8").quantize(randn(n, n) * 100)


# ---------------------------------------------------------------------------
# 1. views vs. dropping or re-allocating a direction
# ---------------------------------------------------------------------------


def test_update_usage_refuses_to_drop_a_viewed_direction() -> None:
    qt = lq.Quantizer("fp8").quantize(randn(32, 32))
    col = qt.columnwise.data.numpy()  # type: ignore[union-attr]
    want = col.view(np.uint8).copy()
    with pytest.raises(lq.StateError, match=r"update_usage: .*columnwise.* 1 live view"):
        qt.update_usage("rowwise")
    assert qt.usage == lq.BOTH  # nothing changed
    churn()
    np.testing.assert_array_equal(col.view(np.uint8), want)  # still the tensor's memory
    del col
    gc.collect()
    qt.update_usage("rowwise")  # no view left: the drop goes ahead
    assert qt.usage == lq.ROWWISE


def test_views_of_a_kept_direction_do_not_block() -> None:
    qt = lq.Quantizer("fp8").quantize(randn(32, 32))
    row = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    ptr = row.ctypes.data
    qt.update_usage("rowwise")  # drops columnwise, which nobody views
    qt.update_usage("both")  # derives columnwise again: rowwise stays where it was
    assert qt.rowwise.data.ptr == ptr  # type: ignore[union-attr]
    np.testing.assert_array_equal(row.view(np.uint8), qt.rowwise.data.numpy().view(np.uint8))  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", ["buffer", "direction_view", "scale_numpy", "capsule", "bytes_capsule", "torch"])
def test_every_kind_of_view_blocks_the_drop(kind: str) -> None:
    qt = lq.Quantizer("fp8").quantize(randn(16, 16))
    view: Any
    if kind == "buffer":
        view = qt.columnwise.data  # type: ignore[union-attr]
    elif kind == "direction_view":
        view = qt.columnwise
    elif kind == "scale_numpy":
        view = qt.columnwise.scale_inv.numpy()  # type: ignore[union-attr]
    elif kind == "capsule":
        view = qt.columnwise.amax.__dlpack__()  # type: ignore[union-attr]
    elif kind == "bytes_capsule":
        view = qt.columnwise.data.bytes_view().__dlpack__(max_version=(1, 0))  # type: ignore[union-attr]
    else:
        torch = pytest.importorskip("torch")
        view = qt.columnwise.data.torch()  # type: ignore[union-attr]
        assert isinstance(view, torch.Tensor)
    with pytest.raises(lq.StateError, match="live view"):
        qt.update_usage("rowwise")
    del view
    gc.collect()
    qt.update_usage("rowwise")


def test_quantize_into_refuses_to_drop_a_viewed_direction() -> None:
    # A temporary tensor ends with exactly the quantizer's usage (quant.h): a
    # rowwise quantizer drops the columnwise direction.
    x = randn(32, 48)
    qt = lq.Quantizer("fp8").quantize(x)
    col = qt.columnwise.data.numpy()  # type: ignore[union-attr]
    row_only = lq.Quantizer("fp8", usage="rowwise")
    with pytest.raises(lq.StateError, match=r"quantize_into: .*columnwise"):
        row_only.quantize_into(x * 2, qt)
    assert qt.usage == lq.BOTH
    del col
    gc.collect()
    row_only.quantize_into(x * 2, qt)
    assert qt.usage == lq.ROWWISE


def test_quantize_into_refuses_to_reallocate_a_viewed_direction() -> None:
    # fp8 -> mxfp8 changes the layout: libquant replaces the buffers.
    x = randn(64, 64)
    qt = lq.Quantizer("fp8").quantize(x)
    data = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    want = data.view(np.uint8).copy()
    mx = lq.Quantizer("mxfp8")
    with pytest.raises(lq.StateError, match=r"quantize_into: .*rowwise.*re-allocate"):
        mx.quantize_into(x, qt)
    assert qt.formats == ("fp8", "fp8")
    churn()
    np.testing.assert_array_equal(data.view(np.uint8), want)
    del data
    gc.collect()
    mx.quantize_into(x, qt)
    assert qt.formats == ("mxfp8", "mxfp8")


def test_quantize_into_in_place_keeps_views_valid() -> None:
    # Same layout: the buffers are re-used in place and a view sees the new codes.
    q = lq.Quantizer("fp8")
    x = randn(32, 32)
    qt = q.quantize(x)
    view = qt.rowwise.data.numpy()  # type: ignore[union-attr]
    q.quantize_into(-x, qt)
    np.testing.assert_array_equal(view.view(np.uint8), q.quantize(-x).rowwise.data.numpy().view(np.uint8))  # type: ignore[union-attr]


def test_quantize_into_persistent_keeps_viewed_directions_in_place() -> None:
    # A persistent weight keeps (and refreshes) every direction whatever the
    # quantizer's usage: a view of its columnwise codes stays valid and sees the
    # new ones, and the quantizer's usage is what it was.
    x = randn(32, 32)
    p = lq.Quantizer("fp8").quantize(x, persistent=True)
    col = p.columnwise.data.numpy()  # type: ignore[union-attr]
    q = lq.Quantizer("fp8", usage="rowwise")
    q.quantize_into(-x, p)
    assert p.usage == lq.BOTH and q.usage == lq.ROWWISE
    ref = lq.Quantizer("fp8").quantize(-x)
    np.testing.assert_array_equal(col.view(np.uint8), ref.columnwise.data.numpy().view(np.uint8))  # type: ignore[union-attr]


def test_identity_views_follow_the_shared_storage() -> None:
    # identity keeps one storage for both directions: dropping one frees nothing,
    # re-quantizing the same dtype reuses it, another dtype re-allocates it.
    x = randn(4, 8)
    q = lq.Quantizer("identity")
    qt = q.quantize(x)
    col = qt.columnwise.data.numpy()  # type: ignore[union-attr]
    qt.update_usage("rowwise")
    q.quantize_into(x * 2, qt)
    np.testing.assert_array_equal(col, x * 2)
    with pytest.raises(lq.StateError, match="re-allocated"):
        q.quantize_into(x.astype(np.float16), qt)
    np.testing.assert_array_equal(col, x * 2)


def test_refusal_is_never_a_read_of_freed_memory_under_threads() -> None:
    """One thread makes views while another drops and re-derives the direction:
    every view either blocks the drop or is made after it, and every view read
    equals the codes of the tensor (fp8's derived columnwise is the transpose)."""
    x = randn(64, 64)
    qt = lq.Quantizer("fp8").quantize(x)
    want = qt.columnwise.data.numpy().view(np.uint8).copy()  # type: ignore[union-attr]
    stop = threading.Event()
    bad: list[str] = []

    def viewer() -> None:
        while not stop.is_set():
            try:
                v = qt.columnwise
            except lq.LibquantError:
                continue
            if v is None:
                continue
            got = v.data.numpy().view(np.uint8).copy()
            churn_small = lq.Quantizer("fp8").quantize(randn(64, 64) * 100)
            del churn_small
            if not np.array_equal(v.data.numpy().view(np.uint8), got) or not np.array_equal(got, want):
                bad.append("a view changed under its reader")
            del v

    t = threading.Thread(target=viewer)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        t.start()
        refused = done = 0
        for _ in range(300):
            try:
                qt.update_usage("rowwise")
                qt.update_usage("both")
                done += 1
            except lq.StateError:
                refused += 1
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert not bad, bad[:3]
    assert done + refused == 300


# ---------------------------------------------------------------------------
# 2. quantize(usage=...) is atomic
# ---------------------------------------------------------------------------


def test_quantize_usage_override_is_atomic_across_threads() -> None:
    """Threads share one quantizer (usage both): half quantize with a per-call
    usage, half without. Each call must get exactly the usage it asked for, and
    the quantizer's own usage must be 'both' at the end."""
    q = lq.Quantizer("fp8")
    x = randn(64, 64)
    want = {None: ("fp8", "fp8"), "rowwise": ("fp8", ""), "columnwise": ("", "fp8")}
    wrong: list[tuple[Any, tuple[str, str]]] = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)

    def work(i: int) -> None:
        usage = [None, "rowwise", "columnwise"][i % 3]
        for _ in range(150):
            got = q.quantize(x, usage=usage).formats if usage else q.quantize(x).formats
            if got != want[usage]:
                wrong.append((usage, got))

    try:
        with ThreadPoolExecutor(9) as ex:
            list(ex.map(work, range(9)))
    finally:
        sys.setswitchinterval(old)
    assert not wrong, "%d calls got another thread's usage, e.g. %s" % (len(wrong), wrong[:3])
    assert q.usage == lq.BOTH


def test_usage_override_is_the_calls_not_the_quantizers() -> None:
    # quantize(usage=...) travels in quant_quantize_options.usage: the C
    # quantizer's usage is never changed, so a second Python object over the same
    # handle (Linear.quantizer, Recipe.quantizer) and C code see it unchanged.
    q = lq.Quantizer("fp8", usage="columnwise")
    twin = lq.Quantizer._adopt(q.handle, "fp8")
    try:
        assert q.quantize(randn(8, 8), usage="rowwise").formats == ("fp8", "")
        assert twin.usage == lq.COLUMNWISE
        assert [(d.direction, d.kind) for d in q.layout((8, 16), usage="rowwise")] == \
            [(d.direction, d.kind) for d in lq.Quantizer("fp8", usage="rowwise").layout((8, 16))]
        assert q.layout((8, 16)) == q.layout((8, 16), usage="columnwise")
        assert q.usage == lq.COLUMNWISE
    finally:
        twin._h = None  # the twin does not own the handle


def test_usage_option_bits_are_checked_by_the_library() -> None:
    q = lq.Quantizer("fp8")
    t = _dlpack.as_dltensor(randn(4, 8))
    o = L.quant_quantize_options()
    o.struct_size = C.sizeof(o)
    o.usage = 4
    out = C.c_void_p()
    st = L.lib().quant_quantize(q.handle, t.dl, C.byref(o), C.byref(out))
    with pytest.raises(lq.InvalidArgumentError, match="options.usage: 0x4 has bits other than"):
        raise L.lib().error(st)
    assert out.value is None
    with pytest.raises(lq.InvalidArgumentError):
        q.layout((4, 8), usage=8)


def test_quantize_usage_override_validates_and_restores() -> None:
    q = lq.Quantizer("fp8", usage="columnwise")
    with pytest.raises(lq.InvalidArgumentError):
        q.quantize(randn(8, 8), usage="sideways")
    assert q.quantize(randn(8, 8), usage="both").formats == ("fp8", "fp8")
    assert q.usage == lq.COLUMNWISE


# ---------------------------------------------------------------------------
# 3. DLPack streams
# ---------------------------------------------------------------------------


def test_cpu_dlpack_accepts_only_stream_none_and_stays_zero_copy() -> None:
    qt = lq.Quantizer("fp8").quantize(randn(8, 8))
    b = qt.rowwise.data  # type: ignore[union-attr]
    for bad in (1, 2, 0, 12345):
        with pytest.raises(BufferError, match="stream"):
            b.__dlpack__(stream=bad)
    with pytest.raises(TypeError, match="stream"):
        b.__dlpack__(stream="1")
    # -1 ("no synchronisation") is harmless on the CPU
    for ok in (None, -1):
        cap = b.bytes_view().__dlpack__(stream=ok)
        del cap
    raw = np.from_dlpack(b.bytes_view())
    assert raw.ctypes.data == b.ptr  # zero-copy


class FakeCUDA:
    """A Buffer whose memory claims to be on CUDA device 3, owned by a real
    QTensor (so the producer stream is the one libquant recorded)."""

    def __init__(self, qt: lq.QTensor) -> None:
        self.buf = qt.rowwise.data  # type: ignore[union-attr]
        self.buf._device_type = L.kDLCUDA
        self.buf._device_id = 3


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int, int]]]:
    calls: list[tuple[int, int, int]] = []
    monkeypatch.setattr(_dlpack, "_cuda_stream_wait", lambda dev, producer, consumer: calls.append(
        (dev, producer, consumer)))
    yield calls


def test_cuda_dlpack_waits_when_streams_differ(waits: list[tuple[int, int, int]]) -> None:
    q = lq.Quantizer("fp8")
    qt = q.quantize(randn(8, 8), stream=0x5000)  # CPU ignores the stream; libquant records it
    assert qt.last_stream == 0x5000
    f = FakeCUDA(qt)
    f.buf.__dlpack__(stream=0x5000)  # the same stream: no wait
    assert waits == []
    f.buf.__dlpack__(stream=0x7000)
    assert waits == [(3, 0x5000, 0x7000)]
    f.buf.__dlpack__(stream=None)  # None: the legacy default stream (DLPack: 1)
    assert waits[-1] == (3, 0x5000, 1)
    f.buf.bytes_view().__dlpack__(stream=2)  # per-thread default stream
    assert waits[-1] == (3, 0x5000, 2)
    n = len(waits)
    f.buf.__dlpack__(stream=-1)  # the consumer asks for no synchronisation
    assert len(waits) == n
    with pytest.raises(BufferError, match="0 is ambiguous"):
        f.buf.__dlpack__(stream=0)
    # later work on another stream moves the producer stream
    q.quantize_into(randn(8, 8), qt, stream=0x7000)
    assert qt.last_stream == 0x7000
    f.buf.__dlpack__(stream=0x7000)
    assert len(waits) == n


def test_cuda_dlpack_default_producer_stream(waits: list[tuple[int, int, int]]) -> None:
    # Work enqueued with no stream ran on the legacy default stream (NULL).
    qt = lq.Quantizer("fp8").quantize(randn(8, 8))
    assert qt.last_stream is None
    f = FakeCUDA(qt)
    f.buf.__dlpack__(stream=None)
    f.buf.__dlpack__(stream=1)
    assert waits == []
    f.buf.__dlpack__(stream=0x9000)
    assert waits == [(3, 1, 0x9000)]


def test_cuda_dlpack_without_torch_raises_when_a_wait_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch fails
    qt = lq.Quantizer("fp8").quantize(randn(8, 8), stream=0x5000)
    f = FakeCUDA(qt)
    f.buf.__dlpack__(stream=0x5000)  # no wait needed: fine without torch
    with pytest.raises(BufferError, match="needs torch"):
        f.buf.__dlpack__(stream=0x7000)


@pytest.mark.skipif(CUDA_SKIP is not None, reason=str(CUDA_SKIP))
@pytest.mark.parametrize("consumer_kind", ["side", "default"])
def test_cuda_consumer_stream_waits_for_libquant_stream(consumer_kind: str) -> None:
    """On a GPU: libquant quantizes on a side stream that then stays busy (a
    ~0.5 s spin after the quantize); a torch consumer on another stream (a second
    side stream, or the default one: DLPack stream 1) must not run ahead of it."""
    import torch

    x = torch.randn(256, 256, device="cuda")
    producer = torch.cuda.Stream()
    producer.wait_stream(torch.cuda.current_stream())
    q = lq.Quantizer("fp8")
    with torch.cuda.stream(producer):
        qt = q.quantize(x)
        torch.cuda._sleep(int(1e9))  # producer busy after libquant's work
    assert qt.last_stream == producer.cuda_stream
    buf = qt.rowwise.data  # type: ignore[union-attr]
    consumer = torch.cuda.Stream() if consumer_kind == "side" else torch.cuda.default_stream()
    with torch.cuda.stream(consumer):
        t = torch.from_dlpack(buf)  # torch passes its current stream (1 for the default one)
        done = torch.cuda.Event()
        done.record(consumer)
    assert not done.query(), "the consumer's stream did not wait for libquant's stream"
    torch.cuda.synchronize()
    assert done.query()
    assert t.data_ptr() == buf.ptr  # zero-copy


@pytest.mark.parametrize("make", [
    lambda b: b, lambda b: b[1:], lambda b: b[:, 2:], lambda b: b[..., ::2], lambda b: b.T, lambda b: b[::2],
    lambda b: np.zeros((0, 3), np.float32), lambda b: np.array(3.0, np.float32), lambda b: np.ones((5,), np.float16),
    lambda b: np.ones((3, 4), ml_dtypes.bfloat16)[:, 1:], lambda b: b[:, :, 1],
    lambda b: np.ones((7, 1), np.float32)[::2],
])
def test_numpy_import_matches_array_interface(make: Any) -> None:
    """as_dltensor reads a NumPy array's pointer and flags from the array object
    itself (or, where the import-time check of that layout failed, from
    __array_struct__): the pointer must be __array_interface__'s, and the
    strides those the interface gives (None when C-contiguous), for offset
    views, strided slices, transposes, 0-d and empty. Both readers are
    checked, the in-place one where this build's layout passed the check."""
    a = make(np.arange(4 * 6 * 8, dtype=np.float32).reshape(4, 6, 8))
    ai = a.__array_interface__
    readers = [_dlpack._pointer_and_flags_capsule]
    if _dlpack._struct_layout_ok():
        readers.append(_dlpack._pointer_and_flags_struct)
    for read in readers:
        data, flags = read(a)
        assert data == ai["data"][0], read.__name__
        assert bool(flags & _dlpack._C_CONTIGUOUS) == a.flags.c_contiguous, read.__name__
    t = _dlpack.as_dltensor(a)
    assert (t.dl.data or 0) == ai["data"][0]
    assert t.dl.ndim == a.ndim
    assert tuple(t.dl.shape[i] for i in range(a.ndim)) == a.shape
    if ai["strides"] is None:
        assert not t.dl.strides
    else:
        assert tuple(t.dl.strides[i] * a.itemsize for i in range(a.ndim)) == ai["strides"]


def test_importer_cache_by_exact_type() -> None:
    """as_dltensor remembers the importer of each exact NumPy or torch class it
    has seen: a subclass (np.recarray, torch.nn.Parameter) must take the same
    importer as its base class on the first call and on the cached ones, and
    objects of other classes must not be cached as either."""
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    rec = base.view(np.recarray)
    for _ in range(2):
        t = _dlpack.as_dltensor(rec)
        assert t.framework == "numpy" and (t.dl.data or 0) == base.__array_interface__["data"][0]
    assert _dlpack._importers[np.recarray] is _dlpack._from_numpy
    buf = lq.Quantizer("fp8").quantize(base).rowwise.data  # type: ignore[union-attr]
    assert _dlpack.as_dltensor(buf).framework != "numpy"
    assert type(buf) not in _dlpack._importers
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.ones(3, 4))
    for _ in range(2):
        t = _dlpack.as_dltensor(p)
        assert t.framework == "torch" and t.dl.data == p.data_ptr()
    assert type(p) in _dlpack._importers
