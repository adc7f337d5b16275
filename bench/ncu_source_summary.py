#!/usr/bin/env python3
"""Summary of an Nsight Compute source-page CSV (bench/ncu_source.sh):

  python3 bench/ncu_source_summary.py ncu_src_1.csv --elements 67108864 [--lines 1234:1300]

Prints the kernel's warp instructions (per 32 input elements with --elements),
executions and stall samples by opcode, and the instructions grouped by how
often each ran: a count shared by hundreds of lines is one pass of a loop body
(per warp and sub-tile, say) or a prologue (once per warp), which tells what
the loop body and the once-per-CTA work cost. --lines prints a range of rows
(0-based, as the groups number them) with their counts.

--sass FILE --function NAME attributes the rows to CUDA source lines: FILE is
`nvdisasm -g -c` of the cubin the plugin was linked from (objects built with
-lineinfo; `cuobjdump -xelf all cuda/mx.o` extracts it), NAME a substring of
the kernel's mangled name that picks its .text section. The SASS there is the
profiled kernel's in the same order (checked opcode by opcode), so each row
gets its file:line and the lines are ranked by the warp instructions they
executed. The stall samples are also split by reason (long scoreboard,
barrier, ...) for the whole kernel.
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


def source_lines(path, function):
    """(file:line, instruction text) of each instruction of the kernel whose
    .text section name contains function, in `nvdisasm -g -c` output."""
    out, cur, inside = [], "?", False
    for line in open(path):
        if ".section" in line:
            if inside:
                break
            inside = ".text." in line and function in line
            continue
        if not inside:
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', line)
        if m:
            cur = f"{m[1].split('/')[-1]}:{m[2]}"
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m:
            out.append((cur, m[1].strip()))
    return out


def stall_reasons(path):
    rows = list(csv.reader(open(path, newline="")))
    hdr = rows[1]
    cols = [i for i, h in enumerate(hdr) if h.startswith("stall_") and "Not Issued" not in h]
    tot = collections.Counter()
    for r in rows[2:]:
        for i in cols:
            tot[hdr[i][6:]] += int(r[i] or 0)
    return tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--elements", type=int, default=0, help="input elements, for instructions per 32 elements")
    ap.add_argument("--lines", default="", help="print rows A:B")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sass", default="", help="nvdisasm -g -c output of the kernel's cubin: rank source lines")
    ap.add_argument("--function", default="", help="with --sass: a substring of the kernel's mangled name")
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
    reasons = stall_reasons(a.csv)
    n_st = sum(reasons.values()) or 1
    print("stall samples by reason: " + ", ".join(f"{k} {100 * v / n_st:.1f} %" for k, v in reasons.most_common(8)))
    if a.sass:
        src = source_lines(a.sass, a.function)
        if len(src) != len(rows):
            raise SystemExit(f"--sass: {len(src)} instructions in the section, {len(rows)} rows in the CSV: another build or function")
        bad = sum(1 for (_, t), (text, _, _, op) in zip(src, rows) if op.split(".")[0] not in t)
        if bad:
            raise SystemExit(f"--sass: {bad} opcodes differ from the CSV's: another build")
        by = collections.defaultdict(lambda: [0, 0, 0])
        for (ln, _), (_, n, st, _) in zip(src, rows):
            b = by[ln]
            b[0], b[1], b[2] = b[0] + n, b[1] + 1, b[2] + st
        print("by source line: warp instructions" + (" per 32 elements" if per else "") + ", share, SASS instructions, stall samples")
        for ln, (n, k, st) in sorted(by.items(), key=lambda x: -x[1][0])[: a.top]:
            print(f"  {ln:28s} {n / per if per else n:10.2f} {100 * n / total:5.1f} % {k:6d} {st:8d}")
    if a.lines:
        lo, hi = (int(x) for x in a.lines.split(":"))
        for i in range(lo, min(hi, len(rows))):
            t, n, s, _ = rows[i]
            if n:
                print(f"  {i:6d} {n:10d} {s:6d}  {t[:90]}")


if __name__ == "__main__":
    main()
