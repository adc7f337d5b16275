"""Training throughput of a transformer MLP block with libquant.torch, next to
BF16 torch.nn.Linear and torchao's float8 training, eager and compiled.

    python3 bench/torch_train.py                       # the GPU run: hidden 4096, FFN 16384, 8192 tokens
    python3 bench/torch_train.py --device cpu --hidden 256 --ffn 1024 --tokens 512 --steps 3   # a CPU smoke run

One step = forward + backward + AdamW over Linear(hidden, ffn) -> GELU ->
Linear(ffn, hidden) on BF16 activations and parameters. Prints one Markdown row
per (recipe, mode): steps/s, torch's peak memory (torch.cuda.max_memory_allocated)
and the library's (the high-water mark of the device's default CUDA memory pool,
from which the CUDA plugin's stream-ordered allocations come: the cached
quantized weights, the quantized activations forward keeps for backward,
scratch; torch's caching allocator does not use that pool); "-" on the CPU. A
configuration that fails (the library, torchao or torch.compile raising) prints
its error in the row instead of numbers, and the run goes on; rows past
--budget seconds say so instead of running.
"""

from __future__ import annotations

import argparse
import ctypes
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


class DefaultPool:
    """The high-water mark of the current device's default CUDA memory pool
    (cudaMemPoolAttrUsedMemHigh), through the CUDA runtime torch loaded; None
    where there is none to ask."""

    USED_MEM_HIGH = 8  # cudaMemPoolAttrUsedMemHigh

    def __init__(self) -> None:
        self.rt: Any = None
        self.pool = ctypes.c_void_p()
        try:
            with open("/proc/self/maps") as f:
                path = next((ln.split()[-1] for ln in f if "libcudart.so" in ln), None)
            if path is not None:
                rt = ctypes.CDLL(path)
                if rt.cudaDeviceGetDefaultMemPool(ctypes.byref(self.pool), torch.cuda.current_device()) == 0:
                    self.rt = rt
        except (OSError, StopIteration):
            self.rt = None

    def reset(self) -> None:
        if self.rt is not None:
            zero = ctypes.c_uint64(0)
            self.rt.cudaMemPoolSetAttribute(self.pool, self.USED_MEM_HIGH, ctypes.byref(zero))

    def peak_gib(self) -> str:
        v = ctypes.c_uint64(0)
        if self.rt is None or self.rt.cudaMemPoolGetAttribute(self.pool, self.USED_MEM_HIGH, ctypes.byref(v)) != 0:
            return "-"
        return "%.2f" % (v.value / 2**30)


REFUSED: dict[str, str] = {}  # config -> the eager run's refusal (compiling it again would only wait for it)
START = time.perf_counter()
POOL: DefaultPool | None = None


def run(name: str, mode: str, make: Callable[[], tuple[torch.nn.Module, Any]], args: argparse.Namespace) -> str:
    global POOL
    dev = args.device
    if name in REFUSED:
        row = "| %s | %s | - | - | - | failed (eager run): %s |" % (name, mode, REFUSED[name])
        print(row, flush=True)
        return row
    if time.perf_counter() - START > args.budget:
        row = "| %s | %s | - | - | - | not run: past the --budget of %d s |" % (name, mode, args.budget)
        print(row, flush=True)
        return row
    if dev.startswith("cuda") and POOL is None:
        POOL = DefaultPool()
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

        t_first = time.perf_counter()
        for _ in range(args.warmup):
            step()
        sync(dev)
        t_warm = time.perf_counter() - t_first
        if dev.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            assert POOL is not None
            POOL.reset()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        sync(dev)
        dt = time.perf_counter() - t0
        mem = "%.2f" % (torch.cuda.max_memory_allocated() / 2**30) if dev.startswith("cuda") else "-"
        lib = POOL.peak_gib() if POOL is not None and recipe is not None else "-"
        row = "| %s | %s | %.2f | %s | %s | warm-up %.1f s |" % (name, mode, args.steps / dt, mem, lib, t_warm)
        del model, opt, x
    except Exception as e:  # every failure is a row: the library's, torchao's or torch.compile's
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        REFUSED[name] = ("%s: %s" % (type(e).__name__, msg))[:200].replace("|", "/")
        row = "| %s | %s | - | - | - | failed: %s |" % (name, mode, REFUSED[name])
        if mode == "compiled":
            REFUSED.pop(name)  # the eager row stands; a compile failure stops only this row
    finally:
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
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
    p.add_argument("--budget", type=int, default=10**6, help="seconds; rows that would start later are not run")
    args = p.parse_args()
    dev = args.device
    name = torch.cuda.get_device_name() if dev.startswith("cuda") else "cpu"
    print("# torch_train: %s, torch %s, libquant %s, hidden %d, FFN %d, %d tokens, BF16, %d steps" % (
        name, torch.__version__, lq.version(), args.hidden, args.ffn, args.tokens, args.steps))
    print("| config | mode | steps/s | torch peak GiB | libquant peak GiB | note |\n| --- | --- | --- | --- | --- | --- |")
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
