"""Training throughput of a transformer MLP block with libquant.torch, next to
BF16 torch.nn.Linear and torchao's float8 training, eager and compiled.

    python3 bench/torch_train.py                       # the GPU run: hidden 4096, FFN 16384, 8192 tokens
    python3 bench/torch_train.py --device cpu --hidden 256 --ffn 1024 --tokens 512 --steps 3   # a CPU smoke run

One step = forward + backward + AdamW over Linear(hidden, ffn) -> GELU ->
Linear(ffn, hidden) on BF16 activations and parameters. Prints one Markdown row
per (recipe, mode): steps/s and peak memory (torch.cuda.max_memory_allocated;
"-" on the CPU; it counts torch's allocations, not the library's own buffers: the
quantized weights and the forward contexts). A configuration the library or torchao refuses prints its
message in the row instead of numbers (the library's linear ops refuse CUDA
tensors until its GPU GEMM lands).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import libquant as lq  # noqa: E402
import libquant.torch as lqt  # noqa: E402

RECIPES: dict[str, Callable[[], lqt.Recipe]] = {
    "fp8_delayed": lqt.DelayedScaling,
    "fp8_current": lqt.Float8CurrentScaling,
    "fp8_block": lqt.Float8BlockScaling,
    "mxfp8": lqt.MXFP8BlockScaling,
    "nvfp4": lqt.NVFP4BlockScaling,
}


def block(hidden: int, ffn: int, device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(hidden, ffn, device=device, dtype=torch.bfloat16), torch.nn.GELU(),
                               torch.nn.Linear(ffn, hidden, device=device, dtype=torch.bfloat16))


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


REFUSED: dict[str, str] = {}  # config -> the eager run's refusal (compiling it again would only wait for it)


def run(name: str, mode: str, make: Callable[[], tuple[torch.nn.Module, Any]], args: argparse.Namespace) -> str:
    dev = args.device
    if name in REFUSED:
        row = "| %s | %s | - | - | refused (eager run): %s |" % (name, mode, REFUSED[name])
        print(row, flush=True)
        return row
    try:
        model, recipe = make()
        if mode == "compiled":
            torch._dynamo.reset()
            model = torch.compile(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(args.tokens, args.hidden, device=dev, dtype=torch.bfloat16)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            with lqt.autocast(enabled=recipe is not None, recipe=recipe):
                y = model(x)
            y.float().square().mean().backward()
            opt.step()

        for _ in range(args.warmup):
            step()
        sync(dev)
        if dev.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync(dev)
        dt = time.perf_counter() - t0
        mem = "%.2f" % (torch.cuda.max_memory_allocated() / 2**30) if dev.startswith("cuda") else "-"
        row = "| %s | %s | %.2f | %s | |" % (name, mode, args.steps / dt, mem)
    except (lq.LibquantError, RuntimeError, ImportError, AssertionError, NotImplementedError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        REFUSED[name] = msg[:160].replace("|", "/")
        row = "| %s | %s | - | - | refused: %s |" % (name, mode, REFUSED[name])
    print(row, flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=16384)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--recipes", default=",".join(RECIPES), help="comma-separated: %s" % ",".join(RECIPES))
    p.add_argument("--modes", default="eager,compiled")
    args = p.parse_args()
    dev = args.device
    name = torch.cuda.get_device_name() if dev.startswith("cuda") else "cpu"
    print("# torch_train: %s, torch %s, libquant %s, hidden %d, FFN %d, %d tokens, BF16, %d steps" % (
        name, torch.__version__, lq.version(), args.hidden, args.ffn, args.tokens, args.steps))
    print("| config | mode | steps/s | peak GiB | note |\n| --- | --- | --- | --- | --- |")
    modes = args.modes.split(",")
    for mode in modes:
        run("bf16 nn.Linear", mode, lambda: (block(args.hidden, args.ffn, dev), None), args)

        def torchao() -> tuple[torch.nn.Module, Any]:
            from torchao.float8 import convert_to_float8_training

            return convert_to_float8_training(block(args.hidden, args.ffn, dev)), None

        run("torchao float8 (tensorwise)", mode, torchao, args)
        for r in args.recipes.split(","):
            run("libquant %s" % r, mode,
                lambda r=r: (lqt.convert(block(args.hidden, args.ffn, dev)), RECIPES[r]()), args)


if __name__ == "__main__":
    main()
