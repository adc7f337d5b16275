"""Train a small MLP with libquant.torch: MXFP8 forward, NVFP4 backward (a hybrid
CustomRecipe), the output layer kept in high precision; next to the same model
in FP32. Runs on the CPU in a few seconds:

    PYTHONPATH=python python3 examples/python/train_hybrid.py
"""

from __future__ import annotations

import torch

import libquant as lq
import libquant.torch as lqt


def qfactory(role: lqt.Role) -> object:
    if role.name == "4":  # the output layer (convert names layers by path) stays in high precision
        return lqt.IdentityQuantizer()
    if role.tensor_type == "grad_output":  # gradients in NVFP4 both ways
        return lq.Quantizer("nvfp4")
    # inputs and weights: MXFP8 for the forward GEMM (rowwise), NVFP4 for backward's (columnwise)
    return lqt.HybridQuantizer(rowwise=lq.Quantizer("mxfp8"), columnwise=lq.Quantizer("nvfp4"))


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 128),
                               torch.nn.GELU(), torch.nn.Linear(128, 64))


def train(m: torch.nn.Module, recipe: lqt.Recipe | None, steps: int = 50) -> float:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(128, 64, generator=g)
    t = torch.tanh(x @ torch.randn(64, 64, generator=g) / 64**0.5)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-3)
    loss = torch.zeros(())
    for _ in range(steps):
        opt.zero_grad()
        with lqt.autocast(enabled=recipe is not None, recipe=recipe):
            loss = torch.nn.functional.mse_loss(m(x), t)
        loss.backward()
        opt.step()
    return float(loss.detach())


def main() -> None:
    fp32 = train(model(), None)
    hybrid = lqt.convert(model())  # every nn.Linear becomes a libquant.torch.Linear, same weights
    q = train(hybrid, lqt.CustomRecipe(qfactory, name="mxfp8_fwd_nvfp4_bwd"))
    w = hybrid[2].quantization_layer().weight_info()
    print("weight of layer 2: rowwise %s, columnwise %s" % (w.rowwise_format, w.columnwise_format))
    print("final loss: fp32 %.4f   mxfp8 fwd / nvfp4 bwd %.4f   (ratio %.2f)" % (fp32, q, q / fp32))
    assert q <= 2 * fp32, "the hybrid run should stay within 2x the FP32 loss"


if __name__ == "__main__":
    main()
