"""The library's linear ops as torch custom operators (torch.library.custom_op):
``libquant::linear_fwd`` / ``linear_bwd`` and ``libquant::grouped_linear_fwd`` /
``grouped_linear_bwd``, each with a fake implementation (shapes only) and the
forward ones with registered autograd, so that torch.compile(fullgraph=True)
traces a model of these modules without a graph break.

Every output and gradient is allocated by torch (torch.empty on the input's
device) and handed to the library to fill. The library keeps, per layer, its
quantizers and the quantized weight (a quant_linear); what a forward keeps for
backward is a library context (quant_linear_ctx), which travels from the forward
operator to the backward one as a CPU int64 tensor holding a key into _CTXS.
The context is freed by backward, or when that tensor is freed (a forward whose
backward never runs, an activation checkpoint that drops it).

The operators take the module and the recipe as integer ids (_state.MODULES,
_state.RECIPES) and find the module's library layer for that recipe (a Slot)
themselves, so the traced Python code stays free of ctypes calls.

The modules call linear() / grouped_linear(). Traced (torch.compile, export,
any torch function or dispatch mode, tensor subclasses) they go through the
operators; in plain eager mode they call the operators' own functions under a
torch.autograd.Function (or directly when no gradient is wanted): the same code
and bits, without torch.library's Python layers, which cost more host time per
training step than libquant's C calls (bench/RESULTS.md, "libquant.torch's
eager path").
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any, Optional, Sequence

import torch

from .. import LibquantError
from .. import Linear as _LQLinear
from .._torch import torch_allocator_if_capturing
from . import _state

# ---------------------------------------------------------------------------
# Slots: a module's library layer under one recipe
# ---------------------------------------------------------------------------


def _in_backward() -> bool:
    """True while autograd runs a backward pass: a forward now is a recomputation
    (torch.utils.checkpoint), which must quantize exactly as the original did."""
    return bool(torch._C._current_graph_task_id() != -1)


def _distributed(group: Any) -> bool:
    """Whether group names processes to reduce amaxes across."""
    if group is None:
        return False
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized())


def _allreduce_max(values: list[float], group: Any) -> list[float]:
    import torch.distributed as dist

    if not values or not _distributed(group):
        return values
    t = torch.tensor(values, dtype=torch.float32)
    if dist.get_backend(group) == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return [float(v) for v in t.cpu().tolist()]


class Slot:
    """A module's library layer (libquant.Linear) under one recipe, and the
    bookkeeping around it: which weight versions it quantized, whether a
    delayed-scaling forward update is due, the amax-reduction group."""

    def __init__(self, module: Any, recipe: Any, num_gemms: int) -> None:
        self.recipe = recipe
        self.name = str(module.lq_name)
        self.layer = _LQLinear(recipe.build(), name=self.name, num_gemms=num_gemms)
        self.n = max(num_gemms, 1)
        self.versions: list[tuple[int, int] | None] = [None] * self.n
        # any delayed-scaling state (the count does not depend on a forward having run)
        self.delayed: bool | None = len(self.layer.scaling_amaxes("forward")) > 0
        self.pending_forward = False
        self.group: Any = None
        # current scaling: the amax-reduction group of the last (non-recomputed)
        # forward, used by its recomputation and by its backward
        self.amax_group: Any = None
        self._quantizers: dict[tuple[str, int], Any] = {}
        self.lock = threading.Lock()

    def amax_group_for(self, recompute: bool) -> Any:
        """The group whose ranks MAX-reduce this forward's current-scaling amaxes
        (the innermost autocast's amax_reduction_group), or None."""
        if not recompute:
            frame = _state.current()
            self.amax_group = frame.group if frame is not None else None
        return self.amax_group

    def reduced_amaxes(self, role: str, parts: Sequence[torch.Tensor], group: Any) -> Optional[torch.Tensor]:
        """Per GEMM, the amaxes (FP32 [rowwise, columnwise]) role's quantizer would
        compute for parts[g], MAX-reduced across group: [n, 2], or None without a
        group or with delayed scaling (whose amaxes are reduced at the scale update
        instead). Every rank quantizes with the same scale then (spec §2.3)."""
        if group is None or self.delayed:
            return None
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return None
        rows = []
        for g, x in enumerate(parts):
            q = self._quantizers.get((role, g))
            if q is None:
                q = self._quantizers[(role, g)] = self.layer.quantizer(role, g)
            rows.append(q.compute_amax(x))
        t = torch.stack(rows).float()
        nccl = dist.get_backend(group) == "nccl"
        r = t.cuda() if nccl else t
        dist.all_reduce(r, op=dist.ReduceOp.MAX, group=group)
        return r.cpu() if nccl else r

    def before_forward(self, weights: Sequence[torch.Tensor], recompute: bool) -> None:
        if not recompute:
            frame = _state.current()
            if frame is not None and frame.group is not None:
                self.group = frame.group
            if self.pending_forward:
                # TransformerEngine updates the forward scales once a step's forward
                # pass is done; doing it before the next forward uses the same scales
                # and leaves a recomputation in backward the scales it ran with.
                self.update("forward")
                self.pending_forward = False
        # An in-place update (optimizer step, load_state_dict) bumps the weight's
        # version counter: the layer must re-quantize it. The library notices a
        # new address, dtype or shape itself.
        for g, w in enumerate(weights):
            v = (int(w._version), int(w.data_ptr()))
            if self.versions[g] is not None and self.versions[g] != v:
                self.layer.weight_updated(g)
            self.versions[g] = v

    def after_forward(self, recompute: bool) -> None:
        if self.delayed is None:
            self.delayed = len(self.layer.scaling_amaxes("forward")) > 0
        if self.delayed and not recompute:
            self.pending_forward = True

    def update(self, pass_: str) -> None:
        """The delayed-scaling update of a pass. Without a process group the
        library updates from the staged amaxes where the state lives (on the GPU:
        a kernel on the stream, no host synchronisation, so that a CUDA graph can
        capture it); with one, the staged amaxes come to the host to be
        MAX-reduced first (quant_linear_scaling_amaxes waits for the stream)."""
        if not self.delayed:
            return
        if not _distributed(self.group):
            self.layer.update_scaling(pass_, None)
            return
        am = self.layer.scaling_amaxes(pass_)
        if am:
            self.layer.update_scaling(pass_, _allreduce_max(am, self.group))

    def weight_updated(self) -> None:
        self.layer.weight_updated(-1)
        self.versions = [None] * self.n


def slot(mid: int, rid: int, num_gemms: int, override: int = 0) -> Slot:
    m = _state.MODULES.get(mid)
    if m is None:
        raise LibquantError("libquant.torch: module %d is gone" % mid)
    s: Slot | None = m._lq_slots.get(rid)
    if s is None:
        s = Slot(m, _state.RECIPES[rid], num_gemms)
        m._lq_slots[rid] = s
        m._lq_slot_created(s)
    m._lq_last = s
    m._lq_last_override = override
    return s


def _quantized_weights(mid: int) -> Optional[list[Any]]:
    """The QTensors of a module that holds its weights only quantized, else None."""
    m = _state.MODULES.get(mid)
    qws = getattr(m, "_lq_qweights", None) if m is not None else None
    return [qt for _, qt in qws] if qws is not None else None


def _row_groups(x: torch.Tensor, m_splits: Sequence[int]) -> list[torch.Tensor]:
    """x's 2-D view split into the groups of rows of a grouped layer."""
    return list(torch.split(x.reshape(-1, x.shape[-1]), [int(m) for m in m_splits]))


# ---------------------------------------------------------------------------
# Contexts
# ---------------------------------------------------------------------------

_CTXS: dict[int, Any] = {}
_ctx_ids = itertools.count(1)


def _drop_ctx(cid: int) -> None:
    c = _CTXS.pop(cid, None)
    if c is not None:
        c.close()


def _ctx_tensor(ctx: Any) -> torch.Tensor:
    if ctx is None:
        return torch.zeros(1, dtype=torch.int64)
    cid = next(_ctx_ids)
    _CTXS[cid] = ctx
    t = torch.full((1,), cid, dtype=torch.int64)
    weakref.finalize(t, _drop_ctx, cid)
    return t


def _take_ctx(h: torch.Tensor) -> Any:
    cid = int(h.item())
    c = _CTXS.pop(cid, None)
    if c is None:
        raise LibquantError("libquant.torch: the forward context of this backward is gone (backward ran "
                            "twice, or the forward ran without gradients)")
    return c


def live_contexts() -> int:
    """How many forward contexts wait for their backward (for tests)."""
    return len(_CTXS)


def _empty(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def _none() -> torch.Tensor:
    return torch.empty(0)


# ---------------------------------------------------------------------------
# Plain linear
# ---------------------------------------------------------------------------


def _linear_fwd(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], mid: int, rid: int, override: int,
               save_original_input: bool, input_requires_grad: bool,
               weight_requires_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Y = X W^T + b through quant_linear_forward; returns (Y, context key)."""
    s = slot(mid, rid, 0, override)
    recompute = _in_backward()
    qws = _quantized_weights(mid)
    with s.lock, torch_allocator_if_capturing(x):
        s.before_forward([w], recompute)
        group = s.amax_group_for(recompute)
        xa = s.reduced_amaxes("input", [x], group)
        wa = s.reduced_amaxes("weight", [w], group) if qws is None else None
        y = torch.empty(tuple(x.shape[:-1]) + (w.shape[0],), dtype=x.dtype, device=x.device)
        _, ctx = s.layer.forward(x, w if qws is None else None, b, out=y, backward_override=override,
                                 save_original_input=save_original_input,
                                 input_requires_grad=input_requires_grad, weight_requires_grad=weight_requires_grad,
                                 weight_qtensor=qws[0] if qws is not None else None,
                                 input_amax=xa[0] if xa is not None else None,
                                 weight_amax=wa[0] if wa is not None else None)
        s.after_forward(recompute)
    return y, _ctx_tensor(ctx)


linear_fwd = torch.library.custom_op("libquant::linear_fwd", mutates_args=())(_linear_fwd)


@linear_fwd.register_fake
def _linear_fwd_fake(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], mid: int, rid: int,
                     override: int, save_original_input: bool, input_requires_grad: bool,
                     weight_requires_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(tuple(x.shape[:-1]) + (w.shape[0],)), torch.empty(1, dtype=torch.int64)


def _linear_bwd(dy: torch.Tensor, h: torch.Tensor, mid: int, rid: int, x_shape: list[int], x_dtype: torch.dtype,
               w_shape: list[int], w_dtype: torch.dtype, b_dtype: torch.dtype, need_dx: bool, need_dw: bool,
               need_db: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dX, dW, db through quant_linear_backward (empty tensors for those not needed)."""
    ctx = _take_ctx(h)
    m = _state.MODULES.get(mid)
    s = m._lq_slots.get(rid) if m is not None else None
    try:
        dx = _empty(x_shape, x_dtype, dy.device) if need_dx else _none()
        dw = _empty(w_shape, w_dtype, dy.device) if need_dw else _none()
        db = _empty(w_shape[:1], b_dtype, dy.device) if need_db else _none()
        if need_dx or need_dw or need_db:
            ga = s.reduced_amaxes("grad_output", [dy], s.amax_group) if s is not None else None
            with torch_allocator_if_capturing(dy):
                ctx.backward(dy, grad_input=dx if need_dx else None, grad_weight=dw if need_dw else None,
                             grad_bias=db if need_db else None, grad_output_amax=ga[0] if ga is not None else None)
    finally:
        with torch_allocator_if_capturing(dy):
            ctx.close()
    if s is not None:
        s.update("backward")  # the grad_output scales, once this layer's backward is done
    return dx, dw, db


linear_bwd = torch.library.custom_op("libquant::linear_bwd", mutates_args=())(_linear_bwd)


@linear_bwd.register_fake
def _linear_bwd_fake(dy: torch.Tensor, h: torch.Tensor, mid: int, rid: int, x_shape: list[int],
                     x_dtype: torch.dtype, w_shape: list[int], w_dtype: torch.dtype, b_dtype: torch.dtype,
                     need_dx: bool, need_dw: bool, need_db: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx = dy.new_empty(x_shape, dtype=x_dtype) if need_dx else dy.new_empty(0, dtype=torch.float32)
    dw = dy.new_empty(w_shape, dtype=w_dtype) if need_dw else dy.new_empty(0, dtype=torch.float32)
    db = dy.new_empty(w_shape[:1], dtype=b_dtype) if need_db else dy.new_empty(0, dtype=torch.float32)
    return dx, dw, db


def _linear_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, w, b, mid, rid = inputs[:5]
    ctx.save_for_backward(output[1])
    ctx.meta = (mid, rid, list(x.shape), x.dtype, list(w.shape), w.dtype, b.dtype if b is not None else w.dtype)


def _linear_grads(ctx: Any, dy: torch.Tensor, bwd: Any) -> tuple[Any, ...]:
    (h,) = ctx.saved_tensors
    mid, rid, xs, xd, ws, wd, bd = ctx.meta
    nx, nw, nb = ctx.needs_input_grad[:3]
    dx, dw, db = bwd(dy.contiguous(), h, mid, rid, xs, xd, ws, wd, bd, nx, nw, nb)
    return (dx if nx else None, dw if nw else None, db if nb else None) + (None,) * 6


def _linear_backward(ctx: Any, dy: torch.Tensor, _dh: Any) -> tuple[Any, ...]:
    return _linear_grads(ctx, dy, linear_bwd)


linear_fwd.register_autograd(_linear_backward, setup_context=_linear_setup)


class _LinearFunction(torch.autograd.Function):
    """The eager path of linear(): the custom operators' functions under a plain
    autograd.Function (see _eager)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], mid: int, rid: int,
                override: int, save_original_input: bool, x_rg: bool, w_rg: bool) -> torch.Tensor:
        y, h = _linear_fwd(x, w, b, mid, rid, override, save_original_input, x_rg, w_rg)
        _linear_setup(ctx, (x, w, b, mid, rid), (y, h))
        return y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return _linear_grads(ctx, dy, _linear_bwd)


def _plain(t: Optional[torch.Tensor]) -> bool:
    return t is None or type(t) is torch.Tensor or type(t) is torch.nn.Parameter


def _eager(tensors: Sequence[Optional[torch.Tensor]]) -> bool:
    """Whether a call can skip the custom operators' dispatch (torch.library's
    Python layers cost a step more host time than libquant's C calls): plain
    tensors, outside torch.compile / export tracing and any torch function or
    dispatch mode (fake tensors, FX tracing), which see the operators."""
    return (not torch.compiler.is_compiling() and torch._C._len_torch_dispatch_stack() == 0
            and not torch._C._is_torch_function_mode_enabled() and all(_plain(t) for t in tensors))


def linear(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], mid: int, rid: int, override: int,
           save_original_input: bool, x_rg: bool, w_rg: bool) -> torch.Tensor:
    """Y = X W^T + b: libquant::linear_fwd with its autograd; in eager mode the
    same functions through _LinearFunction, or with no gradient wanted directly."""
    if not _eager((x, w, b)):
        y: torch.Tensor = linear_fwd(x, w, b, mid, rid, override, save_original_input, x_rg, w_rg)[0]
        return y
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or (b is not None and b.requires_grad)):
        out: torch.Tensor = _LinearFunction.apply(  # type: ignore[no-untyped-call]
            x, w, b, mid, rid, override, save_original_input, x_rg, w_rg)
        return out
    return _linear_fwd(x, w, b, mid, rid, override, save_original_input, x_rg, w_rg)[0]

# ---------------------------------------------------------------------------
# Grouped linear
# ---------------------------------------------------------------------------


def _grouped_linear_fwd(x: torch.Tensor, ws: list[torch.Tensor], bs: list[torch.Tensor], m_splits: list[int],
                       mid: int, rid: int, override: int, save_original_input: bool, input_requires_grad: bool,
                       weight_requires_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The grouped forward (quant_grouped_linear_forward); bs empty for no biases."""
    s = slot(mid, rid, len(ws), override)
    recompute = _in_backward()
    qws = _quantized_weights(mid)
    with s.lock, torch_allocator_if_capturing(x):
        s.before_forward(ws, recompute)
        group = s.amax_group_for(recompute)
        xa = s.reduced_amaxes("input", _row_groups(x, m_splits), group)
        wa = s.reduced_amaxes("weight", ws, group) if qws is None else None
        y = torch.empty(tuple(x.shape[:-1]) + (ws[0].shape[0],), dtype=x.dtype, device=x.device)
        _, ctx = s.layer.grouped_forward(x, m_splits, ws if qws is None else None, bs if bs else None, out=y,
                                         backward_override=override, save_original_input=save_original_input,
                                         input_requires_grad=input_requires_grad,
                                         weight_requires_grad=weight_requires_grad, weight_qtensors=qws,
                                         input_amaxes=xa, weight_amaxes=wa)
        if ctx is not None:
            ctx._meta["m_splits"] = list(m_splits)  # the grad_output amaxes are per group too
        s.after_forward(recompute)
    return y, _ctx_tensor(ctx)


grouped_linear_fwd = torch.library.custom_op("libquant::grouped_linear_fwd", mutates_args=())(_grouped_linear_fwd)


@grouped_linear_fwd.register_fake
def _grouped_fwd_fake(x: torch.Tensor, ws: list[torch.Tensor], bs: list[torch.Tensor], m_splits: list[int],
                      mid: int, rid: int, override: int, save_original_input: bool, input_requires_grad: bool,
                      weight_requires_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(tuple(x.shape[:-1]) + (ws[0].shape[0],)), torch.empty(1, dtype=torch.int64)


def _grouped_linear_bwd(dy: torch.Tensor, h: torch.Tensor, mid: int, rid: int, num_gemms: int, x_shape: list[int],
                       x_dtype: torch.dtype, w_shape: list[int], w_dtype: torch.dtype, b_dtype: torch.dtype,
                       need_dx: bool, need_dw: bool,
                       need_db: bool) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """dX, dW_g, db_g through quant_grouped_linear_backward (empty where not needed)."""
    ctx = _take_ctx(h)
    m = _state.MODULES.get(mid)
    s = m._lq_slots.get(rid) if m is not None else None
    try:
        dx = _empty(x_shape, x_dtype, dy.device) if need_dx else _none()
        dws = [_empty(w_shape, w_dtype, dy.device) for _ in range(num_gemms)] if need_dw else []
        dbs = [_empty(w_shape[:1], b_dtype, dy.device) for _ in range(num_gemms)] if need_db else []
        if need_dx or need_dw or need_db:
            splits = ctx._meta.get("m_splits")
            ga = (s.reduced_amaxes("grad_output", _row_groups(dy, splits), s.amax_group)
                  if s is not None and splits is not None else None)
            with torch_allocator_if_capturing(dy):
                ctx.grouped_backward(dy, grad_input=dx if need_dx else None,
                                     grad_weights=dws if need_dw else None, grad_biases=dbs if need_db else None,
                                     grad_output_amaxes=ga)
    finally:
        with torch_allocator_if_capturing(dy):
            ctx.close()
    if s is not None:
        s.update("backward")
    return dx, dws, dbs


grouped_linear_bwd = torch.library.custom_op("libquant::grouped_linear_bwd", mutates_args=())(_grouped_linear_bwd)


@grouped_linear_bwd.register_fake
def _grouped_bwd_fake(dy: torch.Tensor, h: torch.Tensor, mid: int, rid: int, num_gemms: int, x_shape: list[int],
                      x_dtype: torch.dtype, w_shape: list[int], w_dtype: torch.dtype, b_dtype: torch.dtype,
                      need_dx: bool, need_dw: bool,
                      need_db: bool) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    dx = dy.new_empty(x_shape, dtype=x_dtype) if need_dx else dy.new_empty(0, dtype=torch.float32)
    dws = [dy.new_empty(w_shape, dtype=w_dtype) for _ in range(num_gemms)] if need_dw else []
    dbs = [dy.new_empty(w_shape[:1], dtype=b_dtype) for _ in range(num_gemms)] if need_db else []
    return dx, dws, dbs


def _grouped_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    x, ws, bs, _splits, mid, rid = inputs[:6]
    ctx.save_for_backward(output[1])
    ctx.meta = (mid, rid, len(ws), list(x.shape), x.dtype, list(ws[0].shape), ws[0].dtype,
                bs[0].dtype if bs else ws[0].dtype, len(bs))


def _grouped_grads(ctx: Any, dy: torch.Tensor, nx: bool, nws: list[bool], nbs: list[bool],
                   bwd: Any) -> tuple[Any, list[Any] | None, list[Any] | None]:
    (h,) = ctx.saved_tensors
    mid, rid, n, xs, xd, wsh, wd, bd, _ = ctx.meta
    nw, nb = any(nws), any(nbs)
    dx, dws, dbs = bwd(dy.contiguous(), h, mid, rid, n, xs, xd, wsh, wd, bd, bool(nx), nw, nb)
    gw = [d if f else None for d, f in zip(dws, nws)] if nw else None
    gb = [d if f else None for d, f in zip(dbs, nbs)] if nb else None
    return dx if nx else None, gw, gb


def _grouped_backward(ctx: Any, dy: torch.Tensor, _dh: Any) -> tuple[Any, ...]:
    n, nb_count = ctx.meta[2], ctx.meta[8]
    nx, nws, nbs = ctx.needs_input_grad[:3]
    # a Tensor[] input's entry is a list of flags, one per tensor
    nws = list(nws) if isinstance(nws, (list, tuple)) else [bool(nws)] * n
    nbs = list(nbs) if isinstance(nbs, (list, tuple)) else [bool(nbs)] * nb_count
    return _grouped_grads(ctx, dy, nx, nws, nbs, grouped_linear_bwd) + (None,) * 7


grouped_linear_fwd.register_autograd(_grouped_backward, setup_context=_grouped_setup)


class _GroupedFunction(torch.autograd.Function):
    """The eager path of grouped_linear(): the weights and biases travel as
    separate arguments (autograd.Function sees no tensor inside a list)."""

    @staticmethod
    def forward(ctx: Any, args: tuple[Any, ...], x: torch.Tensor, *wb: torch.Tensor) -> torch.Tensor:
        n, splits, mid, rid, override, save_original_input, x_rg, w_rg = args
        ws, bs = list(wb[:n]), list(wb[n:])
        y, h = _grouped_linear_fwd(x, ws, bs, splits, mid, rid, override, save_original_input, x_rg, w_rg)
        _grouped_setup(ctx, (x, ws, bs, splits, mid, rid), (y, h))
        return y

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        n, nb_count = ctx.meta[2], ctx.meta[8]
        flags = ctx.needs_input_grad
        dx, gw, gb = _grouped_grads(ctx, dy, flags[1], list(flags[2:2 + n]), list(flags[2 + n:2 + n + nb_count]),
                                    _grouped_linear_bwd)
        return (None, dx) + tuple(gw if gw is not None else [None] * n) + tuple(gb if gb is not None else [None] * nb_count)


def grouped_linear(x: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor],
                   m_splits: list[int], mid: int, rid: int, override: int, save_original_input: bool, x_rg: bool,
                   w_rg: bool) -> torch.Tensor:
    """The grouped forward: libquant::grouped_linear_fwd with its autograd; in
    eager mode the same functions through _GroupedFunction, or directly."""
    ws, bs = list(weights), list(biases)
    if not _eager([x] + ws + bs):
        y: torch.Tensor = grouped_linear_fwd(x, ws, bs, m_splits, mid, rid, override, save_original_input, x_rg, w_rg)[0]
        return y
    if torch.is_grad_enabled() and (x.requires_grad or any(t.requires_grad for t in ws + bs)):
        args = (len(ws), m_splits, mid, rid, override, save_original_input, x_rg, w_rg)
        out: torch.Tensor = _GroupedFunction.apply(args, x, *ws, *bs)  # type: ignore[no-untyped-call]
        return out
    return _grouped_linear_fwd(x, ws, bs, m_splits, mid, rid, override, save_original_input, x_rg, w_rg)[0]
