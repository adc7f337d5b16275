# A Python model of transpose_bytes_kernel (cuda/common.cuh), index for index: every output byte
# written with its value, every global word access aligned and inside the buffers, over shapes up to
# 520 x 200 and the 16 alignments of the two base pointers. It models the edge tiles' checked path;
# on an interior tile the kernel takes an unchecked path with the same indices, which is the same
# only if every check passes there: the model asserts that it does (every load a whole word inside
# the buffer, mask 15, no word 32, all 64 columns). python3 bench/models/transpose_bytes_model.py
import random, sys
kTM, kTK, kTH = 128, 64, 3
kTS = kTM + kTH; kTW = kTK // 4 + 1
def tb_row(s): return s * kTW + (s >> 2)
kTWords = kTS * kTW + kTS // 4 + 1

def run(m, k, so, do):
    sb = 4096 + so; db = 1 << 40 | do
    se = sb + m * k
    src = [random.randrange(256) for _ in range(m * k)]
    dst = {}
    def ld32(p):
        assert p % 4 == 0 and p >= sb and p + 4 <= se, ("word load out", p)
        return sum(src[p + b - sb] << (8 * b) for b in range(4))
    def ld8(p):
        assert sb <= p < se; return src[p - sb]
    tiles_m = (m + kTM - 1) // kTM; tiles = tiles_m * ((k + kTK - 1) // kTK)
    for bid in range(tiles):
        m0 = (bid % tiles_m) * kTM; k0 = (bid // tiles_m) * kTK
        rows = min(kTM, m - m0); cols = min(kTK, k - k0)
        s_lo = 0 if m0 > 0 else kTH; s_hi = kTH + rows
        interior = m0 > 0 and m0 + kTM < m and k0 + kTK <= k
        if interior: assert s_lo == 0 and s_hi == kTS and cols == kTK
        words = [None] * kTWords
        for i in range(kTS * kTW):
            s, w = divmod(i, kTW)
            if s_lo <= s < s_hi:
                p = ((sb + (m0 - kTH + s) * k + k0) & ~3) + 4 * w
                if p >= sb and p + 4 <= se: v = ld32(p)
                else:
                    assert not interior, ("interior tile loads bytes", m0, k0, s, w)
                    v = 0
                    for b in range(4):
                        if sb <= p + b < se: v |= ld8(p + b) << (8 * b)
                words[tb_row(s) + w] = v
        def smb(a):
            wv = words[a // 4]
            return None if wv is None else (wv >> (8 * (a % 4))) & 255
        for t in range(256):
            w, l = divmod(t, 32)
            runa = db + (k0 + w) * m + m0
            e = runa & 3
            base = [0]*4; xbase=[0]*4; mask = 0; xmask = 0
            for b in range(4):
                r = 4 * l - e + b; xr = kTM - e + b
                assert 0 <= r + kTH <= kTS - 1
                base[b] = 4 * tb_row(r + kTH) + ((sb + (m0 + r) * k + k0) & 3)
                if (m0 > 0 or r >= 0) and r < rows: mask |= 1 << b
                if xr < rows: xmask |= 1 << b
                xbase[b] = 4 * tb_row(xr + kTH) + ((sb + (m0 + xr) * k + k0) & 3) if xr < rows else 0
            if l != 0 or m0 + kTM < m: xmask = 0
            if interior: assert mask == 15 and xmask == 0, ("interior tile checks", m0, k0, l)
            out = runa - e + 4 * l
            step = 8 * m
            for i in range(kTK // 8):
                c = w + 8 * i
                if c >= cols: break
                xs = [smb(base[b] + c) for b in range(4)]
                for b in range(4):
                    if mask >> b & 1:
                        a = out + i * step + b
                        assert xs[b] is not None, ("unloaded smem byte", m0, k0, l, b)
                        assert db <= a < db + m * k, ("store out", a - db)
                        if mask == 15: assert (out + i*step) % 4 == 0
                        dst.setdefault(a - db, set()).add(xs[b])
                for b in range(4):
                    if xmask >> b & 1:
                        a = out + i * step + 128 + b
                        xv = smb(xbase[b] + c)
                        assert xv is not None and db <= a < db + m * k
                        dst.setdefault(a - db, set()).add(xv)
    for kk in range(k):
        for mm in range(m):
            got = dst.get(kk * m + mm)
            assert got == {src[mm * k + kk]}, ("wrong", m, k, so, do, mm, kk, got, src[mm*k+kk])
    assert len(dst) == m * k

random.seed(1)
shapes = [(1,1),(1,5),(3,2),(4,4),(5,64),(127,63),(128,64),(129,65),(130,70),(255,129),(256,128),(257,67),(383,191),(384,64),(385,200),(131,3),(2,300)]
for _ in range(25): shapes.append((random.randrange(1, 520), random.randrange(1, 200)))
n = 0
for m, k in shapes:
    for so in range(4):
        for do in range(4):
            run(m, k, so, do); n += 1
print("ok", n, "cases")
