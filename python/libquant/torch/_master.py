"""FP32 master weights for modules that hold their weights only quantized
(``quantized_model_init`` / ``quantized_weight=True``): TransformerEngine's
quantized parameters with an optimizer's master weights.

    with lqt.quantized_model_init(recipe=lqt.Float8CurrentScaling()):
        model = Net()
    master = lqt.MasterWeights(model)
    opt = torch.optim.AdamW(master.parameters(), lr=1e-3)
    master.attach(opt)          # opt.step() now also refreshes the quantized weights
    ...
    loss.backward(); opt.step(); opt.zero_grad()

Before each step the weight gradient (which autograd leaves on the module's
placeholder parameter) moves to the FP32 master weight; after it, each master
weight is quantized into the module's quantized weight in place
(quant_quantize_into over the same torch-owned buffers, every direction
refreshed: persistent usages never shrink, spec §10).
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

from .. import InvalidArgumentError


class MasterWeights:
    """The FP32 master copies of a model's quantized weights, and the hooks that
    keep the quantized weights equal to the quantization of the masters."""

    def __init__(self, model: torch.nn.Module) -> None:
        from ._modules import _QuantizedModule

        # (module, gemm, placeholder parameter, master parameter)
        self._pairs: list[tuple[Any, int, torch.nn.Parameter, torch.nn.Parameter]] = []
        #: the masters' keys in state_dict: the weights' qualified names in the model
        self._keys: list[str] = []
        placeholders: set[int] = set()
        for fqn, m in model.named_modules():
            if isinstance(m, _QuantizedModule) and m.quantized_weight:
                for g, name in enumerate(m._lq_weight_names()):
                    self._keys.append(fqn + "." + name if fqn else name)
                    ph = getattr(m, name)
                    # the master starts from the quantized weight's values (what the
                    # module computes with), as TransformerEngine's optimizers do
                    # without preserve_high_precision_init_val
                    master = torch.nn.Parameter(m.dequantized_weight(g).to(ph.device),
                                                requires_grad=ph.requires_grad)
                    self._pairs.append((m, g, ph, master))
                    placeholders.add(id(ph))
        if not self._pairs:
            raise InvalidArgumentError("model: has no module holding quantized weights (build them inside "
                                       "quantized_model_init or with quantized_weight=True)")
        self._others = [p for p in model.parameters() if id(p) not in placeholders]

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        """What the optimizer steps: the FP32 master weights, then the model's other
        parameters (biases, unquantized modules) as they are."""
        for _, _, _, master in self._pairs:
            yield master
        yield from self._others

    def masters(self) -> list[tuple[Any, int, torch.nn.Parameter]]:
        """(module, gemm, FP32 master weight) for every quantized weight."""
        return [(m, g, master) for m, g, _, master in self._pairs]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The FP32 master weights by the weights' qualified names (views, as
        torch.nn.Module.state_dict gives): save them with the model's and the
        optimizer's state dicts to resume training exactly."""
        return {k: master.detach() for k, (_, _, _, master) in zip(self._keys, self._pairs)}

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Copies saved master weights into these, in place (an optimizer made over
        parameters() keeps working). Every key must be there, with its shape."""
        want = set(self._keys)
        missing, unexpected = sorted(want - set(state_dict)), sorted(set(state_dict) - want)
        if missing or unexpected:
            raise InvalidArgumentError("state_dict: missing master weights %s, unexpected %s" % (missing, unexpected))
        for k, (_, _, _, master) in zip(self._keys, self._pairs):
            v = state_dict[k]
            if tuple(v.shape) != tuple(master.shape):
                raise InvalidArgumentError("state_dict[%r]: shape %s, want %s" % (k, tuple(v.shape),
                                                                                 tuple(master.shape)))
            with torch.no_grad():
                master.copy_(v)

    def move_grads(self) -> None:
        """Moves each placeholder's gradient (the weight gradient) onto its master
        weight, in FP32, and clears the placeholder's (so the next backward starts
        from zero, as zero_grad would)."""
        for _, _, ph, master in self._pairs:
            if ph.grad is not None:
                master.grad = ph.grad.to(torch.float32)
                ph.grad = None

    def write_back(self) -> None:
        """Quantizes every master weight into its module's quantized weight, in place."""
        with torch.no_grad():
            for m, g, _, master in self._pairs:
                m.write_weight(g, master)

    def attach(self, optimizer: torch.optim.Optimizer) -> "MasterWeights":
        """Hooks optimizer.step(): move_grads before, write_back after."""
        optimizer.register_step_pre_hook(lambda opt, args, kwargs: self.move_grads())
        optimizer.register_step_post_hook(lambda opt, args, kwargs: self.write_back())
        return self

    def quantized_bytes(self) -> int:
        """Bytes of the quantized weights' buffers (data, scales, amaxes; every direction)."""
        total = 0
        for m, g, _, _ in self._pairs:
            for _, _, buf in m.quantized_weights()[g].buffers():
                t = buf.torch()
                total += t.numel() * t.element_size()
        return total

    def num_weights(self) -> int:
        """Elements of the quantized weights."""
        return sum(int(master.numel()) for _, _, _, master in self._pairs)
