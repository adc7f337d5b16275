// FP8 block scaling ("fp8_block", DeepSeek style; spec §6): E4M3 with an FP32
// scale per 1×128 block (block_dims 1) or 128×128 tile (block_dims 2); rowwise
// data [M, K], columnwise data transposed [K, M]. Equal byte for byte to
// plugins/fp8's block kernels:
//
//	amax      = max |x| over the block (NaN ignored; ragged edge blocks are shorter)
//	scale     = ScaleFromAmax(amax, 448, pow2 = !fp32_scales, amax_epsilon, max of the input dtype)
//	scale_inv = fl32(1/scale);  q = RNE_sat_e4m3(fl32(x · scale))
//
// One pass: each CTA reads a 128×128 tile once into registers and writes both
// directions; the columnwise amaxes and the transposed codes go through shared
// memory.
#include <float.h>

#include "common.cuh"

namespace lq {
namespace {

constexpr int kThreads = 256, kTile = 128, kQStride = kTile + 4;

struct BlockScales {
  float *buf = nullptr;
  int64_t stride = 0;  // buffer row length (a multiple of 4)
  int two_d = 0;
  // 1D: (i = data row, j = block) at j*stride + i; 2D: (i, j) tile at i*stride + j.
  __device__ __forceinline__ int64_t index(int64_t i, int64_t j) const { return two_d ? i * stride + j : j * stride + i; }
};

struct BlockParams {
  const void *in;
  int64_t m, k;
  uint8_t *row, *col;
  BlockScales row_s, col_s;
  float eps, vfi;
  int pow2, vec;
};

__device__ __forceinline__ void block_scale(const BlockParams &p, uint32_t amax_bits, float *scale, float *scale_inv) {
  *scale = scale_from_amax(__uint_as_float(amax_bits), 448.0f, p.pow2 != 0, p.eps, p.vfi);
  *scale_inv = __frcp_rn(*scale);
}

// Thread t holds rows 8·(t/16) .. +7 and columns 8·(t%16) .. +7 of the tile.
template <typename T, bool ROW, bool COL, bool TWO_D>
__global__ void __launch_bounds__(kThreads) fp8_block_kernel(BlockParams p) {
  __shared__ uint32_t part[kThreads / 16][kTile];
  __shared__ float colscale[kTile];
  __shared__ uint8_t qt[COL ? kTile : 1][kQStride];
  __shared__ uint32_t red[kThreads / 32];
  const T *x = (const T *)p.in;
  int64_t tiles_c = (p.k + kTile - 1) / kTile;
  int64_t tr = blockIdx.x / tiles_c, tc = blockIdx.x % tiles_c;
  int64_t r0 = tr * kTile, c0 = tc * kTile;
  bool full = p.vec && r0 + kTile <= p.m && c0 + kTile <= p.k;
  int g = threadIdx.x / 16, ch = threadIdx.x % 16;
  int64_t gc = c0 + 8 * ch;
  float v[8][8];
#pragma unroll
  for (int i = 0; i < 8; i++) {
    int64_t r = r0 + 8 * g + i;
    if (full) {
      load8<T, true>(x + r * p.k + gc, v[i]);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) v[i][e] = (r < p.m && gc + e < p.k) ? to_f32(x[r * p.k + gc + e]) : 0.0f;
    }
  }
  float rs[8], rsi[8];  // per-row (1D) or tile (2D) scale
  if (TWO_D) {
    float mf = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
      for (int e = 0; e < 8; e++) mf = amax_f(mf, v[i][e]);
    uint32_t m = warp_max(__float_as_uint(mf));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
#pragma unroll
    for (int w = 1; w < kThreads / 32; w++) m = max(m, red[w]);
    float s, si;
    block_scale(p, m, &s, &si);
#pragma unroll
    for (int i = 0; i < 8; i++) {
      rs[i] = s;
      rsi[i] = si;
    }
    if (threadIdx.x == 0) {
      if (ROW) p.row_s.buf[p.row_s.index(tr, tc)] = si;
      if (COL) p.col_s.buf[p.col_s.index(tc, tr)] = si;
    }
  } else if (ROW) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
      float mf = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; e++) mf = amax_f(mf, v[i][e]);
      uint32_t m = __float_as_uint(mf);
#pragma unroll
      for (int o = 1; o < 16; o <<= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
      block_scale(p, m, &rs[i], &rsi[i]);
      int64_t r = r0 + 8 * g + i;
      if (ch == 0 && r < p.m) p.row_s.buf[p.row_s.index(r, tc)] = rsi[i];
    }
  }
  if (ROW) {
#pragma unroll
    for (int i = 0; i < 8; i++) {
      int64_t r = r0 + 8 * g + i;
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; j++) w[j] = fp8x2<Fp8::E4M3>(__fmul_rn(v[i][2 * j], rs[i]), __fmul_rn(v[i][2 * j + 1], rs[i]));
      uint32_t lo = w[0] | (w[1] << 16), hi = w[2] | (w[3] << 16);
      if (full) {
        *reinterpret_cast<uint2 *>(p.row + r * p.k + gc) = make_uint2(lo, hi);
      } else if (r < p.m) {
#pragma unroll
        for (int e = 0; e < 8; e++)
          if (gc + e < p.k) p.row[r * p.k + gc + e] = (uint8_t)((e < 4 ? lo : hi) >> (8 * (e & 3)));
      }
    }
  }
  if (COL) {
    float cs[8];
    if (TWO_D) {
#pragma unroll
      for (int e = 0; e < 8; e++) cs[e] = rs[0];
    } else {
      uint32_t pm[8];
#pragma unroll
      for (int e = 0; e < 8; e++) {
        float mf = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) mf = amax_f(mf, v[i][e]);
        pm[e] = __float_as_uint(mf);
        part[g][8 * ch + e] = pm[e];
      }
      __syncthreads();
      if (threadIdx.x < kTile) {
        int c = threadIdx.x;
        uint32_t m = part[0][c];
#pragma unroll
        for (int j = 1; j < kThreads / 16; j++) m = max(m, part[j][c]);
        float s, si;
        block_scale(p, m, &s, &si);
        colscale[c] = s;
        if (c0 + c < p.k) p.col_s.buf[p.col_s.index(c0 + c, tr)] = si;
      }
      __syncthreads();
#pragma unroll
      for (int e = 0; e < 8; e++) cs[e] = colscale[8 * ch + e];
    }
    // Codes of column 8ch+e, rows 8g..8g+7, into qt[column][row].
#pragma unroll
    for (int e = 0; e < 8; e++) {
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; j++) w[j] = fp8x2<Fp8::E4M3>(__fmul_rn(v[2 * j][e], cs[e]), __fmul_rn(v[2 * j + 1][e], cs[e]));
      uint32_t *d = reinterpret_cast<uint32_t *>(&qt[8 * ch + e][8 * g]);
      d[0] = w[0] | (w[1] << 16);
      d[1] = w[2] | (w[3] << 16);
    }
    __syncthreads();
    // Transposed rows: column c0+c gets 128 bytes; thread t writes half of
    // one, as the 16-byte pieces 2j+h, so that lanes 2i and 2i+1 write one
    // 32-byte sector per store instruction (with pieces 4h+j they wrote half
    // sectors).
    int c = threadIdx.x / 2, h = threadIdx.x % 2;
    int64_t oc = c0 + c, orow = r0 + 64 * h;
    if (oc < p.k) {
      if (full && p.m % 16 == 0) {
#pragma unroll
        for (int j = 0; j < 4; j++) {
          int piece = 2 * j + h;
          const uint32_t *s = reinterpret_cast<const uint32_t *>(&qt[c][16 * piece]);
          *reinterpret_cast<uint4 *>(p.col + oc * p.m + r0 + 16 * piece) = make_uint4(s[0], s[1], s[2], s[3]);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 64; j++)
          if (orow + j < p.m) p.col[oc * p.m + orow + j] = qt[c][64 * h + j];
      }
    }
  }
}

template <typename T, bool ROW, bool COL>
void launch_b2(const BlockParams &p, bool two_d, unsigned grid, cudaStream_t s) {
  if (two_d) fp8_block_kernel<T, ROW, COL, true><<<grid, kThreads, 0, s>>>(p);
  else fp8_block_kernel<T, ROW, COL, false><<<grid, kThreads, 0, s>>>(p);
}

template <typename T>
void launch_b(const BlockParams &p, bool two_d, unsigned grid, cudaStream_t s) {
  if (p.row && p.col) launch_b2<T, true, true>(p, two_d, grid, s);
  else if (p.row) launch_b2<T, true, false>(p, two_d, grid, s);
  else launch_b2<T, false, true>(p, two_d, grid, s);
}

// The scale layout of a direction (blockScaleLayoutOf): rows, stride, valid
// entries per row.
void block_geom(bool two_d, bool colwise, int64_t m, int64_t k, int64_t *rows, int64_t *stride, int64_t *valid) {
  int64_t r = colwise ? k : m, c = colwise ? m : k;
  if (two_d) {
    *rows = ceil_div(r, kTile);
    *valid = ceil_div(c, kTile);
  } else {
    *rows = ceil_div(c, kTile);
    *valid = r;
  }
  *stride = pad_to(*valid, 4);
}

struct BlockDir {
  uint8_t *data = nullptr;
  BlockScales s;
  int64_t rows = 0, valid = 0;
};

int32_t block_dir(const quant_plugin_storage &st, bool two_d, bool colwise, int64_t m, int64_t k, BlockDir *d, quant_plugin_error *err) {
  block_geom(two_d, colwise, m, k, &d->rows, &d->s.stride, &d->valid);
  d->s.two_d = two_d;
  const char *dir = colwise ? "columnwise" : "rowwise";
  char what[64];
  snprintf(what, sizeof what, "%s data", dir);
  LQ_TRY(get_buffer(st, QUANT_BUFFER_DATA, what, m * k, (void **)&d->data, err));
  snprintf(what, sizeof what, "%s scale_inv", dir);
  LQ_TRY(get_buffer(st, QUANT_BUFFER_SCALE_INV, what, d->rows * d->s.stride, (void **)&d->s.buf, err));
  return QUANT_OK;
}

int32_t block_params(const quant_plugin_params *p, bool *two_d, quant_plugin_error *err) {
  if (p->element != QUANT_ELEMENT_DEFAULT && p->element != QUANT_ELEMENT_E4M3)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.element: fp8_block is e4m3 only");
  if (p->block_dims != 0 && p->block_dims != 1 && p->block_dims != 2)
    return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "params.block_dims: %d is not 1 or 2", p->block_dims);
  *two_d = p->block_dims == 2;
  return QUANT_OK;
}

// Zeroes the padded columns of every scale row (zeroPadding).
int32_t zero_scale_padding(const BlockDir &d, cudaStream_t s, quant_plugin_error *err) {
  if (d.valid == d.s.stride) return QUANT_OK;
  LQ_CUDA(cudaMemset2DAsync(d.s.buf + d.valid, d.s.stride * 4, 0, (d.s.stride - d.valid) * 4, d.rows, s), "zeroing scale padding");
  return QUANT_OK;
}

template <typename O>
__global__ void block_dequantize_kernel(const uint8_t *__restrict__ q, BlockScales sc, O *out, int64_t m, int64_t k, int colwise) {
  int64_t n = m * k, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t r = idx / k, c = idx % k;
    int64_t dr = colwise ? c : r, dc = colwise ? r : c;  // position in the direction's data
    uint8_t code = colwise ? q[c * m + r] : q[idx];
    float si = sc.buf[sc.index(sc.two_d ? dr / kTile : dr, dc / kTile)];
    store_out(out + idx, __fmul_rn(fp8_decode<Fp8::E4M3>(code), si));
  }
}

__global__ void transpose_scales(const float *__restrict__ src, int64_t src_stride, float *dst, int64_t dst_stride, int64_t mb, int64_t kb) {
  int64_t n = mb * kb, stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    int64_t i = idx / kb, j = idx % kb;
    dst[j * dst_stride + i] = src[i * src_stride + j];
  }
}

}  // namespace
}  // namespace lq

using namespace lq;

extern "C" int32_t lq_block_quantize(const quant_plugin_quantize_args *a, quant_plugin_error *err) {
  InType t;
  LQ_TRY(input_type(a->input, "input", &t, err));
  LQ_TRY(check_device(a->input, "input", err));
  bool two_d;
  LQ_TRY(block_params(a->params, &two_d, err));
  int64_t m = a->input.shape[0], k = a->input.shape[1];
  bool has_row = a->out[0].num_buffers > 0, has_col = a->out[1].num_buffers > 0;
  if (!has_row && !has_col) return fail(err, QUANT_ERROR_INVALID_ARGUMENT, "out: no direction asked");
  BlockDir row, col;
  if (has_row) LQ_TRY(block_dir(a->out[0], two_d, false, m, k, &row, err));
  if (has_col) LQ_TRY(block_dir(a->out[1], two_d, true, m, k, &col, err));
  cudaStream_t s = stream_of(a->stream);
  if (has_row) LQ_TRY(zero_scale_padding(row, s, err));
  if (has_col) LQ_TRY(zero_scale_padding(col, s, err));
  int64_t tiles = ceil_div(m, kTile) * ceil_div(k, kTile);
  if (tiles == 0) return QUANT_OK;
  if (tiles > 0x7FFFFFFF) return fail(err, QUANT_ERROR_UNSUPPORTED, "input: too many tiles");
  BlockParams p{};
  p.in = a->input.data;
  p.m = m;
  p.k = k;
  p.row = row.data;
  p.col = col.data;
  p.row_s = row.s;
  p.col_s = col.s;
  p.eps = a->params->amax_epsilon;
  p.pow2 = !a->params->fp32_scales;
  uint32_t bf16_max = 0x7F7F0000u;  // 0x1.FEp127, the largest BF16
  float bf16_maxf;
  memcpy(&bf16_maxf, &bf16_max, sizeof bf16_maxf);
  p.vfi = t == InType::BF16 ? bf16_maxf : t == InType::F16 ? 65504.0f : FLT_MAX;
  p.vec = aligned16(a->input.data) && k % 8 == 0 && (row.data == nullptr || (reinterpret_cast<uintptr_t>(row.data) & 7) == 0) &&
          (col.data == nullptr || aligned16(col.data));
  unsigned grid = (unsigned)tiles;
  switch (t) {
    case InType::F32: launch_b<float>(p, two_d, grid, s); break;
    case InType::BF16: launch_b<__nv_bfloat16>(p, two_d, grid, s); break;
    case InType::F16: launch_b<__half>(p, two_d, grid, s); break;
  }
  LQ_LAUNCHED("fp8_block quantize kernel launch");
  return QUANT_OK;
}

extern "C" int32_t lq_block_dequantize(const quant_plugin_dequantize_args *a, quant_plugin_error *err) {
  LQ_TRY(check_device(a->out, "out", err));
  InType ot;
  LQ_TRY(input_type(a->out, "out", &ot, err));
  bool two_d;
  LQ_TRY(block_params(a->params, &two_d, err));
  bool colwise = a->direction == QUANT_DIRECTION_COLUMNWISE;
  BlockDir d;
  LQ_TRY(block_dir(a->storage, two_d, colwise, a->m, a->k, &d, err));
  cudaStream_t s = stream_of(a->stream);
  int64_t blocks = ceil_div(a->m * a->k > 0 ? a->m * a->k : 1, 256);
  if (blocks > grid_cap()) blocks = grid_cap();
  unsigned g = (unsigned)blocks;
  switch (ot) {
    case InType::F32: block_dequantize_kernel<float><<<g, 256, 0, s>>>(d.data, d.s, (float *)a->out.data, a->m, a->k, colwise); break;
    case InType::BF16:
      block_dequantize_kernel<__nv_bfloat16><<<g, 256, 0, s>>>(d.data, d.s, (__nv_bfloat16 *)a->out.data, a->m, a->k, colwise);
      break;
    case InType::F16: block_dequantize_kernel<__half><<<g, 256, 0, s>>>(d.data, d.s, (__half *)a->out.data, a->m, a->k, colwise); break;
  }
  LQ_LAUNCHED("fp8_block dequantize kernel launch");
  return QUANT_OK;
}

extern "C" int32_t lq_block_derive(const quant_plugin_derive_args *a, quant_plugin_error *err) {
  bool two_d;
  LQ_TRY(block_params(a->params, &two_d, err));
  if (!two_d || a->from_direction != QUANT_DIRECTION_ROWWISE || a->to_direction != QUANT_DIRECTION_COLUMNWISE)
    return fail(err, QUANT_ERROR_STATE, "fp8_block: only 2-D columnwise data can be derived, from rowwise data");
  BlockDir from, to;
  LQ_TRY(block_dir(a->from, true, false, a->m, a->k, &from, err));
  LQ_TRY(block_dir(a->to, true, true, a->m, a->k, &to, err));
  cudaStream_t s = stream_of(a->stream);
  LQ_TRY(zero_scale_padding(to, s, err));
  LQ_TRY(transpose_bytes(from.data, to.data, a->m, a->k, s, err));
  int64_t mb = ceil_div(a->m, kTile), kb = ceil_div(a->k, kTile);
  if (mb * kb > 0) {
    int64_t blocks = ceil_div(mb * kb, 256);
    if (blocks > grid_cap()) blocks = grid_cap();
    transpose_scales<<<(unsigned)blocks, 256, 0, s>>>(from.s.buf, from.s.stride, to.s.buf, to.s.stride, mb, kb);
    LQ_LAUNCHED("fp8_block scale transpose kernel launch");
  }
  return QUANT_OK;
}
