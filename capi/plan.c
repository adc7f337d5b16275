// The C side of quantize plans (quant.h, quant_quantize_plan_*): a table of
// plan slots that quant_quantize_plan_run reads without entering Go, so that
// a run of a prepared native kernel call costs the plugin's call and little
// else (issue #15: host time per call). capi/plan.go creates, fills and frees
// the slots; a run without a prepared call goes to Go (capi_plan_run_go).
//
// A handle is a slot's index | generation << 32, as Go's handles are
// (capi/handles.go): slots are never freed, only retired and reused with a
// new generation, so a freed or foreign handle finds no live slot of its
// generation instead of freed memory. Each slot's mutex serializes its runs
// with its retirement.
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "quant_plugin.h"
#include "capi.h"
#include "_cgo_export.h"

struct capi_plan {
  pthread_mutex_t mu;
  uint64_t handle;  // the live handle, 0 while retired; under mu
  uint32_t gen;     // the slot's last generation; under plans_mu
  uint32_t index;
  // The prepared kernel call, or fn NULL (runs go to Go).
  int32_t (*fn)(void *, quant_plugin_error *);
  quant_plugin_quantize_args *args;
  quant_plugin_error *err;
  char *what;  // "plugin NAME: quantize of FORMAT on DEVICE" (malloc'd)
  uint64_t offset;  // the input's byte_offset
  uint32_t elem;    // bytes per input element
  int32_t nonempty;
};

#define CAPI_PLAN_CHUNK 256
#define CAPI_PLAN_CHUNKS 4096  // at most 1M plans alive at once

static struct capi_plan *_Atomic chunks[CAPI_PLAN_CHUNKS];
static pthread_mutex_t plans_mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t nslots;                       // under plans_mu
static uint32_t *free_slots, nfree, cap_free;  // retired slots, under plans_mu
static atomic_int poisoned;

void capi_poison(void) { atomic_store(&poisoned, 1); }

struct capi_plan *capi_plan_new(uint64_t *handle) {
  struct capi_plan *p = NULL;
  uint32_t idx;
  pthread_mutex_lock(&plans_mu);
  if (nfree > 0) {
    idx = free_slots[--nfree];
  } else {
    if (nslots >= (uint32_t)CAPI_PLAN_CHUNK * CAPI_PLAN_CHUNKS) goto out;
    idx = nslots;
    if (idx % CAPI_PLAN_CHUNK == 0) {
      struct capi_plan *c = calloc(CAPI_PLAN_CHUNK, sizeof *c);
      if (c == NULL) goto out;
      for (int i = 0; i < CAPI_PLAN_CHUNK; i++) {
        pthread_mutex_init(&c[i].mu, NULL);
        c[i].index = idx + (uint32_t)i;
      }
      atomic_store(&chunks[idx / CAPI_PLAN_CHUNK], c);
    }
    nslots++;
  }
  p = &atomic_load(&chunks[idx / CAPI_PLAN_CHUNK])[idx % CAPI_PLAN_CHUNK];
  if (++p->gen == 0) p->gen = 1;
  pthread_mutex_lock(&p->mu);
  p->handle = (uint64_t)idx | (uint64_t)p->gen << 32;
  *handle = p->handle;
  pthread_mutex_unlock(&p->mu);
out:
  pthread_mutex_unlock(&plans_mu);
  return p;
}

void capi_plan_set(struct capi_plan *p, void *fn, void *args, void *err, char *what, uint64_t offset, uint32_t elem,
                   int32_t nonempty) {
  pthread_mutex_lock(&p->mu);
  p->fn = (int32_t (*)(void *, quant_plugin_error *))fn;
  p->args = args;
  p->err = err;
  p->what = what;
  p->offset = offset;
  p->elem = elem > 0 ? elem : 1;
  p->nonempty = nonempty;
  pthread_mutex_unlock(&p->mu);
}

quant_quantize_plan *capi_plan_handle(uint64_t h) { return (quant_quantize_plan *)(uintptr_t)h; }

uint64_t capi_plan_offset(struct capi_plan *p) { return p->offset; }

// The live slot of handle h, locked; NULL if h names none.
static struct capi_plan *plan_lock(uint64_t h) {
  const uint64_t idx = h & 0xFFFFFFFFu;
  if (h == 0 || idx >= (uint64_t)CAPI_PLAN_CHUNK * CAPI_PLAN_CHUNKS) return NULL;
  struct capi_plan *c = atomic_load(&chunks[idx / CAPI_PLAN_CHUNK]);
  if (c == NULL) return NULL;
  struct capi_plan *p = &c[idx % CAPI_PLAN_CHUNK];
  pthread_mutex_lock(&p->mu);
  if (p->handle != h) {
    pthread_mutex_unlock(&p->mu);
    return NULL;
  }
  return p;
}

// Retires p: once its mutex is released no run is in flight or can start, so
// the caller may free what the prepared call points at.
void capi_plan_retire(struct capi_plan *p) {
  pthread_mutex_lock(&p->mu);
  p->handle = 0;
  free(p->what);
  p->what = NULL;
  p->fn = NULL;
  p->args = NULL;
  p->err = NULL;
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_lock(&plans_mu);
  if (nfree == cap_free) {
    uint32_t n = cap_free ? 2 * cap_free : 64;
    uint32_t *f = realloc(free_slots, n * sizeof *f);
    if (f == NULL) {  // the slot stays retired for good
      pthread_mutex_unlock(&plans_mu);
      return;
    }
    free_slots = f;
    cap_free = n;
  }
  free_slots[nfree++] = p->index;
  pthread_mutex_unlock(&plans_mu);
}

// A plugin's status as the host maps it (native/abi.go statusError).
static quant_status plugin_status(int32_t s) {
  switch (s) {
    case QUANT_ERROR_INVALID_ARGUMENT:
    case QUANT_ERROR_UNSUPPORTED:
    case QUANT_ERROR_DEVICE_UNAVAILABLE:
    case QUANT_ERROR_OUT_OF_MEMORY:
    case QUANT_ERROR_BUFFER_TOO_SMALL:
    case QUANT_ERROR_STATE:
      return (quant_status)s;
  }
  return QUANT_ERROR_PLUGIN;
}

quant_status quant_quantize_plan_run(quant_quantize_plan *plan, const void *data, void *stream) {
  char msg[QUANT_PLUGIN_ERROR_LEN + 256];
  const uint64_t h = (uint64_t)(uintptr_t)plan;
  if (plan == NULL) {
    capi_set_error("quant_quantize_plan_run: plan: is NULL");
    return QUANT_ERROR_INVALID_ARGUMENT;
  }
  struct capi_plan *p = plan_lock(h);
  if (p == NULL) {
    snprintf(msg, sizeof msg, "quant_quantize_plan_run: plan: %#llx is not a live plan (freed, or not from libquant)",
             (unsigned long long)h);
    capi_set_error(msg);
    return QUANT_ERROR_INVALID_HANDLE;
  }
  if (data == NULL && p->nonempty) {
    pthread_mutex_unlock(&p->mu);
    capi_set_error("quant_quantize_plan_run: data: is NULL for an input with elements");
    return QUANT_ERROR_INVALID_ARGUMENT;
  }
  if (data != NULL && ((uintptr_t)data + p->offset) % p->elem != 0) {
    snprintf(msg, sizeof msg, "quant_quantize_plan_run: data: %p + byte_offset %llu is not aligned to the input's %u-byte elements",
             data, (unsigned long long)p->offset, p->elem);
    pthread_mutex_unlock(&p->mu);
    capi_set_error(msg);
    return QUANT_ERROR_INVALID_ARGUMENT;
  }
  if (p->fn == NULL || atomic_load(&poisoned)) {
    pthread_mutex_unlock(&p->mu);
    return capi_plan_run_go(h, (void *)data, stream);
  }
  p->args->input.data = data == NULL ? NULL : (void *)((const char *)data + p->offset);
  p->args->stream = stream;
  p->err->message[0] = '\0';
  int32_t s = p->fn(p->args, p->err);
  if (s != 0) {
    p->err->message[QUANT_PLUGIN_ERROR_LEN - 1] = '\0';
    snprintf(msg, sizeof msg, "quant_quantize_plan_run: %s: %s", p->what, p->err->message);
  }
  pthread_mutex_unlock(&p->mu);
  if (s == 0) return QUANT_OK;
  capi_set_error(msg);
  return plugin_status(s);
}
