"""CPU GEMM on quantized operands vs NumPy's float32 matmul (issue 5).

Runs BenchmarkGemm (host/gemm_bench_test.go: D = A·Bᵀ, M = N = K = n, every
pair of registered formats, dequantized tile by tile into an FP32 blocked
GEMM) and NumPy's float32 `a @ b.T` at the same n, and prints GFLOP/s
(2·n³ per GEMM) and the ratio to the fastest NumPy (landscape.md target:
≥ 0.5×).

NumPy's speed is its BLAS's. Debian's python3-numpy links libblas.so.3, which
is the reference BLAS unless an optimized one (libopenblas0-pthread) is
installed; this script times every BLAS it finds (by putting its directory
first on LD_LIBRARY_PATH) and says which library each run loaded.

The machine may be shared, so the two sides are measured in alternating
rounds and each keeps its best round.

Run: /usr/bin/python3 bench/numpy_gemm.py [--rounds R] [--sizes 1024,2048]
"""
import argparse
import json
import os
import subprocess
import sys

from numpy_common import ROOT, go_bench

BLAS_DIRS = [
    ("OpenBLAS", "/usr/lib/x86_64-linux-gnu/openblas-pthread"),
    ("reference BLAS", "/usr/lib/x86_64-linux-gnu/blas"),
]

# Times a @ b.T in a child process (its BLAS is fixed at load time) and
# reports which BLAS library it loaded.
CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, %(bench)r)
from numpy_common import timeit
out = {}
for n in %(sizes)r:
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    secs = timeit(lambda: a @ b.T, min_time=%(min_time)r)
    out[str(n)] = 2.0 * n ** 3 / secs / 1e9
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.lower() and ".so" in l})
print(json.dumps({"gflops": out, "libs": libs, "threads": __import__("os").cpu_count()}))
"""


def numpy_gflops(sizes, libdir, min_time):
    env = dict(os.environ)
    if libdir:
        env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    code = CHILD % {"bench": os.path.join(ROOT, "bench"), "sizes": sizes, "min_time": min_time}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="1024,2048")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of NumPy timing per size and round")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    blases = [(name, d) for name, d in BLAS_DIRS if os.path.exists(os.path.join(d, "libblas.so.3"))]
    blases.insert(0, ("as installed", None))
    best_np = {}   # (blas label, n) -> GFLOP/s
    libs = {}
    best_go = {}   # case -> GFLOP/s
    for r in range(args.rounds):
        for label, d in blases:
            res = numpy_gflops(sizes, d, args.min_time)
            libs[label] = res["libs"]
            for n, g in res["gflops"].items():
                best_np[(label, int(n))] = max(best_np.get((label, int(n)), 0.0), g)
        for n in sizes:
            for case, g in go_bench("./host", f"^BenchmarkGemm$/.*/{n}$", metric="GFLOP/s").items():
                best_go[case] = max(best_go.get(case, 0.0), g)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"CPU GEMM, D = A·Bᵀ, M = N = K = n, GFLOP/s (2n³/s), best of {args.rounds} alternating rounds")
    for label, _ in blases:
        print(f"  NumPy [{label}] loaded: {', '.join(libs.get(label, [])) or '?'}")
    cols = [label for label, _ in blases]
    head = f"{'case':<30}" + "".join(f" {'NumPy ' + c:>20}" for c in cols) + f" {'Go':>8} {'Go/best NumPy':>14}"
    print(head)
    for n in sizes:
        best = max(best_np[(c, n)] for c in cols)
        print(f"{'numpy float32 matmul/' + str(n):<30}" + "".join(f" {best_np[(c, n)]:>20.1f}" for c in cols))
        for case in sorted(k for k in best_go if k.endswith(f"/{n}")):
            g = best_go[case]
            print(f"{case:<30}" + "".join(f" {'':>20}" for _ in cols) + f" {g:>8.1f} {g / best:>13.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
