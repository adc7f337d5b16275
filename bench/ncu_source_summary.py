#!/usr/bin/env python3
"""Summary of an Nsight Compute source-page CSV (bench/ncu_source.sh):

  python3 bench/ncu_source_summary.py ncu_src_1.csv --elements 67108864 [--lines 1234:1300]

Prints the kernel's warp instructions (per 32 input elements with --elements),
executions and stall samples by opcode, and the instructions grouped by how
often each ran: a count shared by hundreds of lines is one pass of a loop body
(per warp and sub-tile, say) or a prologue (once per warp), which tells what
the loop body and the once-per-CTA work cost. --lines prints a range of rows
(0-based, as the groups number them) with their counts.
"""
import argparse
import collections
import csv
import re


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    # row 0: the kernel's name; row 1: the header
    hdr = rows[1]
    src, ex = hdr.index("Source"), hdr.index("Instructions Executed")
    st = hdr.index("Warp Stall Sampling (All Samples)")
    out = []
    for r in rows[2:]:
        text = r[src].strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0] if text else "?"
        out.append((text, int(r[ex] or 0), int(r[st] or 0), op))
    return rows[0][1] if len(rows[0]) > 1 else rows[0][0], out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--elements", type=int, default=0, help="input elements, for instructions per 32 elements")
    ap.add_argument("--lines", default="", help="print rows A:B")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    name, rows = load(a.csv)
    total = sum(n for _, n, _, _ in rows)
    per = a.elements / 32 if a.elements else 0
    print(f"kernel: {name[:150]}")
    print(f"warp instructions: {total:,}" + (f" ({total / per:.2f} per 32 elements)" if per else ""))
    ops, stalls = collections.Counter(), collections.Counter()
    for _, n, s, op in rows:
        ops[op.split(".")[0]] += n
        stalls[op.split(".")[0]] += s
    print("by opcode: executions" + (" per 32 elements" if per else "") + ", stall samples")
    for op, n in ops.most_common(a.top):
        print(f"  {op:10s} {n / per if per else n:10.2f} {stalls[op]:8d}")
    groups = collections.Counter()
    first = {}
    for i, (_, n, _, _) in enumerate(rows):
        if n:
            groups[n] += 1
            first.setdefault(n, i)
    print("by execution count (lines that ran n times: how many, their share, the first row):")
    for n, k in sorted(groups.items(), key=lambda x: -x[0] * x[1])[: a.top]:
        print(f"  n={n:<10d} lines={k:<5d} {100 * n * k / total:5.1f} %  first row {first[n]}")
    if a.lines:
        lo, hi = (int(x) for x in a.lines.split(":"))
        for i in range(lo, min(hi, len(rows))):
            t, n, s, _ = rows[i]
            if n:
                print(f"  {i:6d} {n:10d} {s:6d}  {t[:90]}")


if __name__ == "__main__":
    main()
