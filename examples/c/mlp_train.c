/* mlp_train: trains a two-layer MLP (fc1 -> ReLU -> fc2) on a synthetic
 * regression task with libquant's linear layers, for every recipe and every
 * backward mode, and prints the final loss next to a plain FP32 run (float
 * math in C, no libquant). The MLP around the layers (ReLU, the loss, Adam)
 * is computed here in C; libquant does the two linear layers' forward and
 * backward passes, their quantization, their weight caches and (FP8 delayed)
 * their scaling updates.
 *
 * The task: x ~ N(0, I_64), target y = a fixed random "teacher" MLP
 * 64 -> 16 -> 32 (ReLU) of x plus N(0, 0.2^2) noise (an irreducible loss of
 * 0.04, as real data has). The student is 64 -> HIDDEN -> 32. Each step draws
 * a fresh batch of 64 (every run sees the same stream); Adam's learning rate
 * decays linearly to zero so each run ends near its floor. The loss is the
 * mean squared error on a fixed held-out set of 256 noisy pairs, evaluated
 * through the run's own layers (the quantized forward) for libquant runs.
 *
 * Criterion (checked; exit status 1 if any run fails it), for every run:
 *   final loss <= 2 x FP32 final loss   and   final loss <= initial / 10.
 * The second says the run learned. The first says it tracks FP32, and it is
 * tight enough to catch a layer that does not learn: the same FP32 training
 * with fc1 frozen (only fc2 learns, a random-features model; printed as a
 * reference) ends 5-7x above FP32, so a run whose fc1 gradients are wrong (its
 * wgrad, or fc2's dgrad that feeds it) fails; zeroing the quantized dgrad in
 * the host made every "none" run end at 5.6x. It is loose enough for 4-bit
 * training: NVFP4's quantized forward alone adds about 0.015 to the loss
 * (1.2-1.4x). Finer numeric errors are what the Go tests check against a
 * float64 reference.
 *
 * Usage: mlp_train [quick] [batch=N] [device=cpu|cuda]   (quick: 150 steps,
 * HIDDEN 64, for make test; otherwise 500 steps, HIDDEN 128, for make mlp;
 * batch=N draws N rows a step instead of 64: make test also runs batch=45, a
 * batch no block size divides, which every format takes as it is (spec §14))
 *
 * device=cuda (make mlp DEVICE=cuda) runs the layers on CUDA tensors of device
 * 0, on the default stream, through the CUDA plugin (build/libquant_cuda.so,
 * made by make cuda, which libquant loads from its own folder, or a plugin
 * named in LIBQUANT_PLUGIN_PATH). The C ABI has no memory API, so this program
 * loads the CUDA runtime itself at run time (dlopen of libcudart.so, .so.13 or
 * .so.12 from the loader's path, else /usr/local/cuda/lib64; no CUDA header or
 * library is needed to build it) for cudaMalloc and cudaMemcpy. Everything
 * else stays as on the CPU: the MLP glue (ReLU, loss, Adam) and the FP32
 * reference run on the host, and each step copies what the layers read to the
 * device (inputs, the weights Adam updated, the output gradients) and what they
 * write back to the host, synchronizing around every call. That is slow and fine for a correctness example: it checks that the
 * GPU layers train as the CPU ones do, with the same criterion; it measures
 * nothing. Without the runtime, a GPU or the plugin it says so on stderr
 * ("device=cuda unavailable: ...") and exits 2. */
#define _POSIX_C_SOURCE 200112L /* dlopen */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "demo_data.h"

enum { D_IN = 64, D_TEACHER = 16, D_OUT = 32, MAX_BATCH = 64, EVAL = 256, MAX_HIDDEN = 256 };

#define FACTOR 2.0

static int hidden = 128;
static int batch = MAX_BATCH; /* rows a step; batch=N picks fewer (any N, spec §14) */
static int steps = 500;

static void die(const char *what, quant_status s) {
  fflush(stdout); /* the table so far, before the error */
  fprintf(stderr, "mlp_train: %s failed: %s: %s\n", what, quant_status_string(s), quant_last_error());
  exit(2);
}

#define Q(call)                            \
  do {                                     \
    quant_status s_ = (call);              \
    if (s_ != QUANT_OK) die(#call, s_);    \
  } while (0)

static double normal(void) {
  double u1 = demo_uniform(), u2 = demo_uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill_normal(float *x, int n, double sigma) {
  int i;
  for (i = 0; i < n; i++) x[i] = (float)(normal() * sigma);
}

/* out[m, n] = a[m, k] . b[n, k]^T (+ bias), float math. */
static void matmul_nt(float *out, const float *a, const float *b, const float *bias, int m, int n, int k) {
  int i, j, p;
  for (i = 0; i < m; i++) {
    for (j = 0; j < n; j++) {
      float s = bias ? bias[j] : 0;
      for (p = 0; p < k; p++) s += a[i * k + p] * b[j * k + p];
      out[i * n + j] = s;
    }
  }
}

/* The teacher and the data stream. */
static float teacher1[D_TEACHER * D_IN], teacher2[D_OUT * D_TEACHER];
static float eval_x[EVAL * D_IN], eval_y[EVAL * D_OUT];

static const double noise = 0.2;

static void teacher(const float *x, float *y, int m) {
  static float h[EVAL * D_TEACHER];
  int i;
  matmul_nt(h, x, teacher1, NULL, m, D_TEACHER, D_IN);
  for (i = 0; i < m * D_TEACHER; i++) h[i] = h[i] > 0 ? h[i] : 0;
  matmul_nt(y, h, teacher2, NULL, m, D_OUT, D_TEACHER);
  for (i = 0; i < m * D_OUT; i++) y[i] += (float)(noise * normal());
}

/* A student's parameters, Adam state and gradients. */
typedef struct {
  float w1[MAX_HIDDEN * D_IN], b1[MAX_HIDDEN], w2[D_OUT * MAX_HIDDEN], b2[D_OUT];
  float g_w1[MAX_HIDDEN * D_IN], g_b1[MAX_HIDDEN], g_w2[D_OUT * MAX_HIDDEN], g_b2[D_OUT];
  float m_[2 * (MAX_HIDDEN * D_IN + MAX_HIDDEN + D_OUT * MAX_HIDDEN + D_OUT)];
  float v_[2 * (MAX_HIDDEN * D_IN + MAX_HIDDEN + D_OUT * MAX_HIDDEN + D_OUT)];
  int t;
} params;

static void init_params(params *p) {
  memset(p, 0, sizeof *p);
  demo_rng_state = 0x51ED2701ull;
  fill_normal(p->w1, hidden * D_IN, sqrt(2.0 / D_IN));
  fill_normal(p->w2, D_OUT * hidden, sqrt(1.0 / hidden));
}

static const double lr_peak = 2e-2;

/* Adam with the learning rate decaying linearly to zero over the run, so that
 * the final loss sits near each run's floor instead of on its step noise. */
static void adam_update(float *w, const float *g, float *m, float *v, int n, int t) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  double lr = lr_peak * (1 - (double)(t - 1) / steps);
  double c1 = 1 - pow(b1, t), c2 = 1 - pow(b2, t);
  int i;
  for (i = 0; i < n; i++) {
    m[i] = (float)(b1 * m[i] + (1 - b1) * g[i]);
    v[i] = (float)(b2 * v[i] + (1 - b2) * (double)g[i] * g[i]);
    w[i] -= (float)(lr * (m[i] / c1) / (sqrt(v[i] / c2) + eps));
  }
}

static void adam(params *p, int train_fc1) {
  int n1 = hidden * D_IN, n2 = D_OUT * hidden, off = 0;
  p->t++;
  if (train_fc1) {
    adam_update(p->w1, p->g_w1, p->m_ + off, p->v_ + off, n1, p->t);
    off += n1;
    adam_update(p->b1, p->g_b1, p->m_ + off, p->v_ + off, hidden, p->t);
  }
  off = n1 + hidden;
  adam_update(p->w2, p->g_w2, p->m_ + off, p->v_ + off, n2, p->t);
  off += n2;
  adam_update(p->b2, p->g_b2, p->m_ + off, p->v_ + off, D_OUT, p->t);
}

/* Loss (mean over all outputs) and its gradient. */
static double mse(const float *yhat, const float *y, float *dy, int m) {
  double s = 0;
  int i;
  for (i = 0; i < m * D_OUT; i++) {
    double d = (double)yhat[i] - y[i];
    s += d * d;
    if (dy) dy[i] = (float)(2 * d / (m * D_OUT));
  }
  return s / (m * D_OUT);
}

/* ---- The FP32 reference: plain float math. ---- */

static double fp32_eval(const params *p) {
  static float h[EVAL * MAX_HIDDEN], yhat[EVAL * D_OUT];
  int i;
  matmul_nt(h, eval_x, p->w1, p->b1, EVAL, hidden, D_IN);
  for (i = 0; i < EVAL * hidden; i++) h[i] = h[i] > 0 ? h[i] : 0;
  matmul_nt(yhat, h, p->w2, p->b2, EVAL, D_OUT, hidden);
  return mse(yhat, eval_y, NULL, EVAL);
}

static void fp32_run(int train_fc1, double *initial, double *final) {
  static params p;
  static float x[MAX_BATCH * D_IN], y[MAX_BATCH * D_OUT], h[MAX_BATCH * MAX_HIDDEN], yhat[MAX_BATCH * D_OUT], dy[MAX_BATCH * D_OUT],
      dh[MAX_BATCH * MAX_HIDDEN];
  int step, i, j, k;
  init_params(&p);
  *initial = fp32_eval(&p);
  demo_rng_state = 0xDA7A5EEDull;
  for (step = 0; step < steps; step++) {
    fill_normal(x, batch * D_IN, 1.0);
    teacher(x, y, batch);
    matmul_nt(h, x, p.w1, p.b1, batch, hidden, D_IN);
    for (i = 0; i < batch * hidden; i++) h[i] = h[i] > 0 ? h[i] : 0;
    matmul_nt(yhat, h, p.w2, p.b2, batch, D_OUT, hidden);
    mse(yhat, y, dy, batch);
    /* dW2 = dY^T H, db2 = sum dY, dH = dY W2 masked by ReLU, dW1 = dH^T X. */
    for (j = 0; j < D_OUT; j++) {
      float sb = 0;
      for (i = 0; i < batch; i++) sb += dy[i * D_OUT + j];
      p.g_b2[j] = sb;
      for (k = 0; k < hidden; k++) {
        float s = 0;
        for (i = 0; i < batch; i++) s += dy[i * D_OUT + j] * h[i * hidden + k];
        p.g_w2[j * hidden + k] = s;
      }
    }
    for (i = 0; i < batch; i++) {
      for (k = 0; k < hidden; k++) {
        float s = 0;
        for (j = 0; j < D_OUT; j++) s += dy[i * D_OUT + j] * p.w2[j * hidden + k];
        dh[i * hidden + k] = h[i * hidden + k] > 0 ? s : 0;
      }
    }
    for (k = 0; k < hidden; k++) {
      float sb = 0;
      for (i = 0; i < batch; i++) sb += dh[i * hidden + k];
      p.g_b1[k] = sb;
      for (j = 0; j < D_IN; j++) {
        float s = 0;
        for (i = 0; i < batch; i++) s += dh[i * hidden + k] * x[i * D_IN + j];
        p.g_w1[k * D_IN + j] = s;
      }
    }
    adam(&p, train_fc1);
  }
  *final = fp32_eval(&p);
}

/* ---- Where the layers' tensors live: host memory, or CUDA device 0. ---- */

static int on_cuda; /* device=cuda */

/* The few CUDA runtime functions used, declared here (cudaError_t and
 * cudaMemcpyKind are C enums, passed as int) and found with dlsym. */
typedef int (*cuda_get_device_count_fn)(int *count);
typedef int (*cuda_malloc_fn)(void **ptr, size_t size);
typedef int (*cuda_free_fn)(void *ptr);
typedef int (*cuda_memcpy_fn)(void *dst, const void *src, size_t count, int kind);
typedef int (*cuda_device_synchronize_fn)(void);
typedef const char *(*cuda_get_error_string_fn)(int error);
enum { CUDA_MEMCPY_HOST_TO_DEVICE = 1, CUDA_MEMCPY_DEVICE_TO_HOST = 2 };

static struct {
  cuda_get_device_count_fn get_device_count;
  cuda_malloc_fn malloc_;
  cuda_free_fn free_;
  cuda_memcpy_fn memcpy_;
  cuda_device_synchronize_fn synchronize;
  cuda_get_error_string_fn error_string;
} cuda;

static void unavailable(const char *why, const char *detail) {
  fflush(stdout);
  fprintf(stderr, "mlp_train: device=cuda unavailable: %s%s%s\n", why, detail ? ": " : "", detail ? detail : "");
  exit(2);
}

static void cuda_check(const char *what, int err) {
  if (err != 0) {
    fflush(stdout);
    fprintf(stderr, "mlp_train: %s failed: CUDA error %d: %s\n", what, err, cuda.error_string(err));
    exit(2);
  }
}

/* One device buffer per host buffer the layers read or write, allocated once
 * (the layers' weight caches key on the weight's address), sized for the
 * largest call (the evaluation pass, EVAL rows). */
enum { X16, W1, B1, H, A16, W2, B2, YHAT, DY16, DH, DH16, G_W1, G_B1, G_W2, G_B2, NUM_BUFS };
static const size_t buf_bytes[NUM_BUFS] = {
    [X16] = EVAL * D_IN * 2,          [W1] = MAX_HIDDEN * D_IN * 4,      [B1] = MAX_HIDDEN * 4,
    [H] = EVAL * MAX_HIDDEN * 4,      [A16] = EVAL * MAX_HIDDEN * 2,     [W2] = D_OUT * MAX_HIDDEN * 4,
    [B2] = D_OUT * 4,                 [YHAT] = EVAL * D_OUT * 4,         [DY16] = MAX_BATCH * D_OUT * 2,
    [DH] = MAX_BATCH * MAX_HIDDEN * 4, [DH16] = MAX_BATCH * MAX_HIDDEN * 2, [G_W1] = MAX_HIDDEN * D_IN * 4,
    [G_B1] = MAX_HIDDEN * 4,          [G_W2] = D_OUT * MAX_HIDDEN * 4,   [G_B2] = D_OUT * 4};
static void *dev_buf[NUM_BUFS];

static void *cuda_symbol(void *rt, const char *name) {
  void *f = dlsym(rt, name);
  if (f == NULL) unavailable("the CUDA runtime lacks a function", name);
  return f;
}

/* Loads the CUDA runtime, checks for a GPU and a loaded CUDA plugin, and
 * allocates the device buffers; exits 2 saying what is missing. */
static void cuda_open(void) {
  /* Names the dynamic loader looks up (LD_LIBRARY_PATH, ld.so.cache), then the toolkit's usual place. */
  static const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                                "/usr/local/cuda/lib64/libcudart.so"};
  char err[512] = "";
  void *rt = NULL;
  size_t i, n = 0, k;
  int count = 0, found = 0, e;
  for (i = 0; i < sizeof names / sizeof names[0] && rt == NULL; i++) {
    rt = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (rt == NULL) snprintf(err, sizeof err, "%s", dlerror());
  }
  if (rt == NULL)
    unavailable("cannot load the CUDA runtime (tried libcudart.so, libcudart.so.13, libcudart.so.12 and "
                "/usr/local/cuda/lib64/libcudart.so; put the folder of libcudart.so in LD_LIBRARY_PATH)",
                err);
  /* ISO C has no cast between object and function pointers; POSIX's dlsym
   * relies on this form. */
  *(void **)&cuda.get_device_count = cuda_symbol(rt, "cudaGetDeviceCount");
  *(void **)&cuda.malloc_ = cuda_symbol(rt, "cudaMalloc");
  *(void **)&cuda.free_ = cuda_symbol(rt, "cudaFree");
  *(void **)&cuda.memcpy_ = cuda_symbol(rt, "cudaMemcpy");
  *(void **)&cuda.synchronize = cuda_symbol(rt, "cudaDeviceSynchronize");
  *(void **)&cuda.error_string = cuda_symbol(rt, "cudaGetErrorString");
  e = cuda.get_device_count(&count);
  if (e != 0) unavailable("cudaGetDeviceCount failed", cuda.error_string(e));
  if (count < 1) unavailable("no CUDA device", NULL);
  /* The first libquant call loads the plugins; one must run kernels on kDLCUDA. */
  Q(quant_plugin_count(&n));
  for (i = 0; i < n && !found; i++) {
    quant_plugin_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    Q(quant_plugin_get_info(i, &info));
    if (info.status != QUANT_OK) {
      fprintf(stderr, "mlp_train: plugin %s did not load: %s\n", info.path, info.message);
      continue;
    }
    for (k = 0; k < info.num_kernels && !found; k++) {
      quant_plugin_kernel_info kernel;
      memset(&kernel, 0, sizeof kernel);
      kernel.struct_size = sizeof kernel;
      Q(quant_plugin_get_kernel(i, k, &kernel));
      found = kernel.device_type == kDLCUDA;
    }
  }
  if (!found)
    unavailable("no CUDA plugin is loaded (make cuda builds build/libquant_cuda.so, which libquant loads from the "
                "folder of libquant.so; or name one in LIBQUANT_PLUGIN_PATH)",
                NULL);
  for (i = 0; i < NUM_BUFS; i++) cuda_check("cudaMalloc", cuda.malloc_(&dev_buf[i], buf_bytes[i]));
}

static void cuda_close(void) {
  int i;
  for (i = 0; i < NUM_BUFS; i++) cuda_check("cudaFree", cuda.free_(dev_buf[i]));
}

/* The data pointer of a tensor the layers read: host itself on the CPU, else
 * device buffer b holding a copy of its first bytes. */
static void *put(int b, void *host, size_t bytes) {
  if (!on_cuda) return host;
  cuda_check("cudaDeviceSynchronize", cuda.synchronize()); /* no earlier call still reads the buffer */
  cuda_check("cudaMemcpy to the device", cuda.memcpy_(dev_buf[b], host, bytes, CUDA_MEMCPY_HOST_TO_DEVICE));
  return dev_buf[b];
}

/* The data pointer of a tensor the layers write: host itself, or buffer b. */
static void *out(int b, void *host) { return on_cuda ? dev_buf[b] : host; }

/* Copies what the layers wrote to buffer b back to host (nothing to do on the CPU). */
static void get(void *host, int b, size_t bytes) {
  if (!on_cuda) return;
  cuda_check("cudaDeviceSynchronize", cuda.synchronize());
  cuda_check("cudaMemcpy to the host", cuda.memcpy_(host, dev_buf[b], bytes, CUDA_MEMCPY_DEVICE_TO_HOST));
}

/* ---- libquant runs. ---- */

static DLTensor tensor(void *data, DLDataTypeCode code, int bits, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = on_cuda ? kDLCUDA : kDLCPU; /* device_id 0 */
  t.ndim = 2;
  t.dtype.code = (uint8_t)code;
  t.dtype.bits = (uint8_t)bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static void to_bf16(uint16_t *dst, const float *src, int n) {
  int i;
  for (i = 0; i < n; i++) dst[i] = demo_to_bf16(src[i]);
}

typedef struct {
  quant_linear *fc1, *fc2;
  int mode; /* quant_backward_override */
} mlp;

/* Forward through both layers: x [m, D_IN] -> yhat [m, D_OUT]. Activations
 * travel as BF16 (NVFP4's Hadamard transform needs BF16 input, and it is what
 * TE's layers see); outputs and gradients come back as FP32. With ctx1/ctx2
 * NULL it is an inference pass. */
static void q_forward(mlp *net, params *p, const float *x, int m, float *h, uint16_t *x16, uint16_t *a16, float *yhat,
                      quant_linear_ctx **ctx1, quant_linear_ctx **ctx2, int train_fc1) {
  int64_t xs[2] = {m, D_IN}, w1s[2] = {hidden, D_IN}, b1s[2] = {hidden, 1}, hs[2] = {m, hidden};
  int64_t w2s[2] = {D_OUT, hidden}, b2s[2] = {D_OUT, 1}, ys[2] = {m, D_OUT};
  DLTensor tx, tw1, tb1, th, ta, tw2, tb2, ty;
  quant_linear_forward_args a;
  int i;
  to_bf16(x16, x, m * D_IN);
  tx = tensor(put(X16, x16, (size_t)m * D_IN * 2), kDLBfloat, 16, xs);
  tw1 = tensor(put(W1, p->w1, (size_t)hidden * D_IN * 4), kDLFloat, 32, w1s);
  tb1 = tensor(put(B1, p->b1, (size_t)hidden * 4), kDLFloat, 32, b1s);
  tb1.ndim = 1;
  th = tensor(out(H, h), kDLFloat, 32, hs);
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.input = &tx;
  a.weight = &tw1;
  a.bias = &tb1;
  a.output = &th;
  a.backward_override = net->mode;
  a.input_requires_grad = 0; /* x is data */
  a.weight_requires_grad = ctx1 != NULL && train_fc1;
  Q(quant_linear_forward(net->fc1, &a, ctx1));
  get(h, H, (size_t)m * hidden * 4);
  for (i = 0; i < m * hidden; i++) a16[i] = demo_to_bf16(h[i] > 0 ? h[i] : 0);
  ta = tensor(put(A16, a16, (size_t)m * hidden * 2), kDLBfloat, 16, hs);
  tw2 = tensor(put(W2, p->w2, (size_t)D_OUT * hidden * 4), kDLFloat, 32, w2s);
  tb2 = tensor(put(B2, p->b2, D_OUT * 4), kDLFloat, 32, b2s);
  tb2.ndim = 1;
  ty = tensor(out(YHAT, yhat), kDLFloat, 32, ys);
  a.input = &ta;
  a.weight = &tw2;
  a.bias = &tb2;
  a.output = &ty;
  a.input_requires_grad = ctx2 != NULL && train_fc1;
  a.weight_requires_grad = ctx2 != NULL;
  Q(quant_linear_forward(net->fc2, &a, ctx2));
  get(yhat, YHAT, (size_t)m * D_OUT * 4);
}

static double q_eval(mlp *net, params *p) {
  static float h[EVAL * MAX_HIDDEN], yhat[EVAL * D_OUT];
  static uint16_t x16[EVAL * D_IN], a16[EVAL * MAX_HIDDEN];
  q_forward(net, p, eval_x, EVAL, h, x16, a16, yhat, NULL, NULL, 0);
  return mse(yhat, eval_y, NULL, EVAL);
}

static void update_scaling(mlp *net, int pass) {
  Q(quant_linear_update_scaling(net->fc1, pass, NULL, 0));
  Q(quant_linear_update_scaling(net->fc2, pass, NULL, 0));
}

static void q_run(quant_recipe *recipe, int mode, int train_fc1, double *initial, double *final) {
  static params p;
  static float x[MAX_BATCH * D_IN], y[MAX_BATCH * D_OUT], h[MAX_BATCH * MAX_HIDDEN], yhat[MAX_BATCH * D_OUT], dy[MAX_BATCH * D_OUT],
      dh[MAX_BATCH * MAX_HIDDEN];
  static uint16_t x16[MAX_BATCH * D_IN], a16[MAX_BATCH * MAX_HIDDEN], dy16[MAX_BATCH * D_OUT], dh16[MAX_BATCH * MAX_HIDDEN];
  int64_t ys[2] = {batch, D_OUT}, hs[2] = {batch, hidden}, w1s[2] = {hidden, D_IN}, w2s[2] = {D_OUT, hidden};
  int64_t b1s[1], b2s[1] = {D_OUT};
  quant_linear_config cfg;
  mlp net;
  int step, i;
  b1s[0] = hidden;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.recipe = recipe;
  cfg.name = "fc1";
  Q(quant_linear_create(&cfg, &net.fc1));
  cfg.name = "fc2";
  Q(quant_linear_create(&cfg, &net.fc2));
  net.mode = mode;
  init_params(&p);
  *initial = q_eval(&net, &p);
  demo_rng_state = 0xDA7A5EEDull;
  for (step = 0; step < steps; step++) {
    quant_linear_ctx *c1 = NULL, *c2 = NULL;
    quant_linear_backward_args b;
    DLTensor tdy, tdh, tdh32, tdw1, tdb1, tdw2, tdb2;
    fill_normal(x, batch * D_IN, 1.0);
    teacher(x, y, batch);
    q_forward(&net, &p, x, batch, h, x16, a16, yhat, &c1, &c2, train_fc1);
    update_scaling(&net, QUANT_LINEAR_PASS_FORWARD); /* delayed scaling: after the forward pass */
    mse(yhat, y, dy, batch);
    to_bf16(dy16, dy, batch * D_OUT);
    tdy = tensor(put(DY16, dy16, (size_t)batch * D_OUT * 2), kDLBfloat, 16, ys);
    tdh32 = tensor(out(DH, dh), kDLFloat, 32, hs);
    tdw2 = tensor(out(G_W2, p.g_w2), kDLFloat, 32, w2s);
    tdb2 = tensor(out(G_B2, p.g_b2), kDLFloat, 32, b2s);
    tdb2.ndim = 1;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.grad_output = &tdy;
    b.grad_input = train_fc1 ? &tdh32 : NULL;
    b.grad_weight = &tdw2;
    b.grad_bias = &tdb2;
    Q(quant_linear_backward(c2, &b));
    get(p.g_w2, G_W2, (size_t)D_OUT * hidden * 4);
    get(p.g_b2, G_B2, D_OUT * 4);
    if (train_fc1) {
      get(dh, DH, (size_t)batch * hidden * 4);
      for (i = 0; i < batch * hidden; i++) dh16[i] = demo_to_bf16(h[i] > 0 ? dh[i] : 0);
      tdh = tensor(put(DH16, dh16, (size_t)batch * hidden * 2), kDLBfloat, 16, hs);
      tdw1 = tensor(out(G_W1, p.g_w1), kDLFloat, 32, w1s);
      tdb1 = tensor(out(G_B1, p.g_b1), kDLFloat, 32, b1s);
      tdb1.ndim = 1;
      b.grad_output = &tdh;
      b.grad_input = NULL;
      b.grad_weight = &tdw1;
      b.grad_bias = &tdb1;
      Q(quant_linear_backward(c1, &b));
      get(p.g_w1, G_W1, (size_t)hidden * D_IN * 4);
      get(p.g_b1, G_B1, (size_t)hidden * 4);
    }
    Q(quant_linear_ctx_free(c1));
    Q(quant_linear_ctx_free(c2));
    update_scaling(&net, QUANT_LINEAR_PASS_BACKWARD); /* delayed scaling: after the backward pass */
    adam(&p, train_fc1);
    Q(quant_linear_weight_updated(net.fc1, -1)); /* the optimizer changed the weights in place */
    Q(quant_linear_weight_updated(net.fc2, -1));
  }
  *final = q_eval(&net, &p);
  Q(quant_linear_free(net.fc1));
  Q(quant_linear_free(net.fc2));
}

static quant_recipe *preset(int kind) {
  quant_recipe_config cfg;
  quant_recipe *r;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.kind = kind;
  cfg.seed = 1234; /* NVFP4 stochastic rounding */
  Q(quant_recipe_create(&cfg, &r));
  return r;
}

static quant_quantizer *quantizer(const char *format, int rht, int sr) {
  quant_quantizer_config c;
  quant_quantizer *q;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.format = format;
  c.rht = rht;
  c.stochastic_rounding = sr;
  if (sr) c.seed = 1234;
  Q(quant_quantizer_create(&c, &q));
  return q;
}

/* A rule table mapping each linear tensor type to a quantizer (the table keeps
 * its own references). */
static quant_recipe *rules(quant_quantizer *input, quant_quantizer *weight, quant_quantizer *grad) {
  quant_recipe_rule r[3];
  quant_recipe *out;
  memset(r, 0, sizeof r);
  r[0].pattern.tensor_type = "input";
  r[0].quantizer = input;
  r[1].pattern.tensor_type = "weight";
  r[1].quantizer = weight;
  r[2].pattern.tensor_type = "grad_output";
  r[2].quantizer = grad;
  Q(quant_recipe_create_rules(r, 3, &out));
  if (input != weight) quant_quantizer_free(weight);
  if (input != grad) quant_quantizer_free(grad);
  quant_quantizer_free(input);
  return out;
}

static quant_quantizer *hybrid(quant_quantizer *row, quant_quantizer *col, int source) {
  quant_quantizer *h;
  Q(quant_quantizer_create_hybrid(row, col, source, &h));
  quant_quantizer_free(row);
  quant_quantizer_free(col);
  return h;
}

int main(int argc, char **argv) {
  static const char *mode_names[3] = {"none", "high_precision", "dequantized"};
  struct {
    const char *name;
    quant_recipe *r;
    int delayed;
  } recipes[7];
  int n = 0, i, mode, failures = 0;
  double fp32_initial, fp32_final, frozen_initial, frozen_final;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "quick") == 0) {
      steps = 150;
      hidden = 64;
    } else if (strncmp(argv[i], "batch=", 6) == 0 && atoi(argv[i] + 6) >= 1 && atoi(argv[i] + 6) <= MAX_BATCH) {
      batch = atoi(argv[i] + 6);
    } else if (strcmp(argv[i], "device=cpu") == 0 || strcmp(argv[i], "device=cuda") == 0) {
      on_cuda = strcmp(argv[i], "device=cuda") == 0;
    } else {
      fprintf(stderr, "usage: mlp_train [quick] [batch=N] [device=cpu|cuda]  (N in 1..%d, default %d)\n", MAX_BATCH,
              MAX_BATCH);
      return 2;
    }
  }
  if (on_cuda) cuda_open();
  demo_rng_state = 0x7EAC4E5ull;
  fill_normal(teacher1, D_TEACHER * D_IN, sqrt(2.0 / D_IN));
  fill_normal(teacher2, D_OUT * D_TEACHER, sqrt(1.0 / D_TEACHER));
  fill_normal(eval_x, EVAL * D_IN, 1.0);
  teacher(eval_x, eval_y, EVAL);

  recipes[n].name = "identity (rules)", recipes[n].delayed = 0;
  recipes[n++].r = rules(quantizer("identity", 0, 0), quantizer("identity", 0, 0), quantizer("identity", 0, 0));
  recipes[n].name = "fp8_delayed", recipes[n].delayed = 1, recipes[n++].r = preset(QUANT_RECIPE_FP8_DELAYED);
  recipes[n].name = "fp8_current", recipes[n].delayed = 0, recipes[n++].r = preset(QUANT_RECIPE_FP8_CURRENT);
  recipes[n].name = "fp8_block", recipes[n].delayed = 0, recipes[n++].r = preset(QUANT_RECIPE_FP8_BLOCK);
  recipes[n].name = "mxfp8", recipes[n].delayed = 0, recipes[n++].r = preset(QUANT_RECIPE_MXFP8);
  recipes[n].name = "nvfp4", recipes[n].delayed = 0, recipes[n++].r = preset(QUANT_RECIPE_NVFP4);
  /* TE's mxfp8_fwd_nvfp4_bwd_factory: MXFP8 forward, NVFP4 backward. */
  recipes[n].name = "mxfp8 fwd / nvfp4 bwd", recipes[n].delayed = 0;
  recipes[n++].r = rules(hybrid(quantizer("mxfp8", 0, 0), quantizer("nvfp4", QUANT_RHT_DEFAULT, 0), QUANT_COLUMNWISE_SOURCE_ORIGINAL),
                         hybrid(quantizer("mxfp8", 0, 0), quantizer("nvfp4", 0, 0), QUANT_COLUMNWISE_SOURCE_ROWWISE_DEQUANTIZED),
                         quantizer("nvfp4", QUANT_RHT_DEFAULT, 1));

  fp32_run(1, &fp32_initial, &fp32_final);
  fp32_run(0, &frozen_initial, &frozen_final);
  printf("mlp_train: 64 -> %d -> 32 MLP, batch %d, %d Adam steps; eval MSE on %d held-out inputs\n", hidden, batch,
         steps, EVAL);
  printf("device: libquant's layers on %s; FP32 reference, ReLU, loss and Adam on the host\n",
         on_cuda ? "cuda:0 (CUDA tensors, default stream)" : "cpu");
  printf("criterion: final <= %.2f x FP32 final and final <= initial / 10\n\n", FACTOR);
  printf("%-24s %-15s %10s %10s %8s  %s\n", "recipe", "backward", "initial", "final", "/FP32", "");
  printf("%-24s %-15s %10.5f %10.5f %8.3f\n", "fp32 (plain C)", "-", fp32_initial, fp32_final, 1.0);
  printf("%-24s %-15s %10.5f %10.5f %8.3f  (reference: fc1 frozen, only fc2 learns)\n", "fp32, fc1 frozen", "-",
         frozen_initial, frozen_final, frozen_final / fp32_final);
  if (!(frozen_final > FACTOR * fp32_final)) {
    printf("the fc1-frozen run is within the factor: the criterion would not catch a broken fc1\n");
    failures++;
  }
  for (i = 0; i < n; i++) {
    for (mode = 0; mode < 3; mode++) {
      double initial, final;
      int ok;
      if (recipes[i].delayed && mode != QUANT_BACKWARD_OVERRIDE_NONE) continue; /* rejected (spec §9.2) */
      q_run(recipes[i].r, mode, 1, &initial, &final);
      ok = final <= FACTOR * fp32_final && final <= initial / 10;
      failures += !ok;
      printf("%-24s %-15s %10.5f %10.5f %8.3f  %s\n", recipes[i].name, mode_names[mode], initial, final,
             final / fp32_final, ok ? "ok" : "FAIL");
      fflush(stdout);
    }
  }
  for (i = 0; i < n; i++) quant_recipe_free(recipes[i].r);
  if (on_cuda) cuda_close();
  printf("\nmlp_train: %d run(s) failed the criterion\n", failures);
  return failures != 0;
}
