"""Print the GEMM capability table (which format pairs multiply natively,
emulated, or not at all) for the CPU and CUDA, and the plugin list.

    python3 examples/python/capabilities.py
"""

import libquant as lq

print("libquant", lq.version(), "from", lq.library_path())
for device in ("cpu", "cuda:0"):
    rows = lq.gemm_support_table(device)
    print("\n%s: %d format pairs" % (device, len(rows)))
    print("%-10s %-10s %-12s %s" % ("A", "B", "level", "reason"))
    for r in rows:
        print("%-10s %-10s %-12s %s" % (r.format_a, r.format_b, r.level, r.reason))
print("\nplugins:")
for p in lq.plugins():
    print(" ", p.name or "(failed)", p.path, "loaded" if p.loaded else "not loaded: " + p.message,
          [(k.format, k.device, k.op_names) for k in p.kernels])
if not lq.plugins():
    print("  none (build/libquant_cuda.so next to libquant.so adds CUDA)")
