# libquant: `make` / `make demo` builds build/libquant.so and runs the C demo on
# the CPU; `make test` runs every test this machine can run.
GO      ?= go
CC      ?= gcc
CXX     ?= g++
BUILD   := build
LIB     := $(BUILD)/libquant.so
LDMAP   := $(CURDIR)/capi/libquant.map
CWARN   := -Wall -Wextra -Werror -pedantic
CFLAGS  ?= -O2
CFLAGS_ALL := -std=c99 $(CWARN) $(CFLAGS) -Iinclude -Iexamples/c
LDLIB   := -L$(BUILD) -lquant -Wl,-rpath,'$$ORIGIN' -lm

GO_SRC  := go.mod go.sum include/quant.h include/quant_plugin.h $(shell find capi host linear native rpc pluginsdk plugins internal -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.map' 2>/dev/null)
# Go's build cache hashes a cgo package's own files, not the headers it includes
# from include/: a changed quant.h would leave a stale cached object (an old
# QUANT_VERSION, an old struct layout). The headers' hash in CGO_CFLAGS is part
# of every cgo package's cache key, so any change to them rebuilds those packages.
HEADERS_HASH := $(shell cat include/quant.h include/quant_plugin.h | sha256sum | cut -c1-16)
export CGO_CFLAGS ?= -g -O2 -DLIBQUANT_HEADERS_$(HEADERS_HASH)
C_TESTS := $(patsubst examples/c/%.c,$(BUILD)/%,$(wildcard examples/c/test_*.c))

.PHONY: all demo lib mlp goplugins bench-dispatch test test-gpu venv wheel install test-python bench-cpu test-go test-c test-header test-symbols test-fault test-threads-race clean cuda fused-check decode-shapes e2m1-bf16x2-check plugins test-cuda-host

all: demo

lib: $(LIB)

$(LIB): $(GO_SRC) include/quant.h
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -ldflags "-extldflags -Wl,--version-script=$(LDMAP)" -o $@ ./capi

demo: $(BUILD)/demo
	$(BUILD)/demo

$(BUILD)/demo: examples/c/demo.c examples/c/demo_data.h $(LIB)
	$(CC) $(CFLAGS_ALL) $< $(LDLIB) -o $@

# Trains a two-layer MLP with every recipe and backward mode next to FP32
# (examples/c/mlp_train.c says what it checks); make test runs a quick one.
# make mlp DEVICE=cuda runs the layers on CUDA tensors: it needs a GPU,
# build/libquant_cuda.so (make cuda) and the CUDA runtime, which mlp_train loads
# at run time: where nvcc is, its toolkit's lib64 (CUDA_LIBDIR) goes first on
# LD_LIBRARY_PATH for that.
DEVICE := cpu
CUDART_ENV = $(if $(shell command -v $(NVCC) 2>/dev/null),LD_LIBRARY_PATH=$(CUDA_LIBDIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH})
mlp: $(BUILD)/mlp_train
	$(if $(filter cuda,$(DEVICE)),$(CUDART_ENV)) $(BUILD)/mlp_train device=$(DEVICE)

$(BUILD)/mlp_train: examples/c/mlp_train.c examples/c/demo_data.h $(LIB)
	$(CC) $(CFLAGS_ALL) $< $(LDLIB) -ldl -o $@

$(BUILD)/test_%: examples/c/test_%.c examples/c/check.h examples/c/demo_data.h $(LIB)
	$(CC) $(CFLAGS_ALL) $< $(LDLIB) -lpthread -o $@

test: test-go test-c test-cuda-host test-gpu test-python

# The GPU exactness tests (cuda/gputest) compare GPU bytes with CPU bytes. Where
# there is no build/libquant_cuda.so or no GPU they skip: this says so, and why.
test-gpu: lib
	@mkdir -p $(BUILD)
	@$(GO) test -count=1 -v ./cuda/gputest > $(BUILD)/gputest.log 2>&1; rc=$$?; \
	  echo "== GPU exactness tests (cuda/gputest, log in $(BUILD)/gputest.log):"; \
	  grep -h -o -E '\.go:[0-9]+: SKIP: .*|^--- FAIL.*|^(ok|FAIL)\s.*' $(BUILD)/gputest.log | sed 's/^\.go:[0-9]*: //' | sort | uniq -c; \
	  grep -c -E '^\s*--- PASS' $(BUILD)/gputest.log | sed 's/^/   passed subtests: /'; exit $$rc

# Toy native plugins (examples/c/plugin_toy.c) for the plugin-loading tests:
# a good one and the broken variants a loader must refuse with a clear error.
TOY_PLUGINS := $(BUILD)/libquant_toy.so $(BUILD)/libquant_toy_abi99.so $(BUILD)/libquant_toy_noentry.so $(BUILD)/libquant_toy_fail.so
PLUGIN_CFLAGS := -std=c99 $(CWARN) $(CFLAGS) -Iinclude -fPIC -shared -fvisibility=hidden

plugins: $(TOY_PLUGINS)

$(BUILD)/libquant_toy.so: examples/c/plugin_toy.c include/quant_plugin.h include/quant.h
	@mkdir -p $(BUILD)
	$(CC) $(PLUGIN_CFLAGS) $< -lm -o $@
$(BUILD)/libquant_toy_abi99.so: examples/c/plugin_toy.c include/quant_plugin.h include/quant.h
	@mkdir -p $(BUILD)
	$(CC) $(PLUGIN_CFLAGS) -DTOY_ABI_VERSION=99 $< -lm -o $@
$(BUILD)/libquant_toy_noentry.so: examples/c/plugin_toy.c include/quant_plugin.h include/quant.h
	@mkdir -p $(BUILD)
	$(CC) $(PLUGIN_CFLAGS) -DTOY_NO_ENTRY $< -lm -o $@
$(BUILD)/libquant_toy_fail.so: examples/c/plugin_toy.c include/quant_plugin.h include/quant.h
	@mkdir -p $(BUILD)
	$(CC) $(PLUGIN_CFLAGS) -DTOY_FAIL $< -lm -o $@

$(BUILD)/test_plugin: $(TOY_PLUGINS)
$(BUILD)/test_plan: $(BUILD)/libquant_toy.so
$(BUILD)/test_allocator: $(BUILD)/libquant_fake_cuda.so

# The Go format plugin of examples/goplugin (an executable libquant runs out of
# process) and its sha256sum line, the manifest libquant checks it against.
GOPLUGIN := $(BUILD)/goplugin/mxfp6
GOPLUGIN_MANIFEST := $(BUILD)/goplugin/plugins.sha256

goplugins: $(GOPLUGIN_MANIFEST)

$(GOPLUGIN): go.mod go.sum $(shell find pluginsdk examples/goplugin internal/numeric internal/parallel -name '*.go' 2>/dev/null)
	@mkdir -p $(BUILD)/goplugin
	$(GO) build -o $@ ./examples/goplugin/mxfp6/cmd/mxfp6

$(GOPLUGIN_MANIFEST): $(GOPLUGIN)
	cd $(BUILD)/goplugin && sha256sum mxfp6 > plugins.sha256

$(BUILD)/test_goplugin: $(GOPLUGIN_MANIFEST)

# A LIBQUANT_PLUGIN_PATH folder for test_goplugin: the plugin as
# libquant-plugin-mxfp6, listed in the folder's manifest, and an unlisted copy.
GOPLUGIN_FOLDER := $(BUILD)/goplugin/folder
$(GOPLUGIN_FOLDER)/plugins.sha256: $(GOPLUGIN)
	rm -rf $(GOPLUGIN_FOLDER) && mkdir -p $(GOPLUGIN_FOLDER)
	cp $(GOPLUGIN) $(GOPLUGIN_FOLDER)/libquant-plugin-mxfp6
	cp $(GOPLUGIN) $(GOPLUGIN_FOLDER)/libquant-plugin-unlisted
	cd $(GOPLUGIN_FOLDER) && sha256sum libquant-plugin-mxfp6 > plugins.sha256

# The CUDA plugin (cuda/ -> build/libquant_cuda.so), built where nvcc is: Hopper
# machine code (sm_90a) plus compute_90 PTX so that newer GPUs can run it too.
# libquant.so itself never links CUDA; it loads this file at run time.
NVCC      ?= nvcc
CUDA_ARCH ?= -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90
NVCCFLAGS ?= -O3 -std=c++17 -lineinfo
CUDA_LIB  := $(BUILD)/libquant_cuda.so
CUDA_SRC  := $(wildcard cuda/*.cu)
CUDA_OBJ  := $(patsubst cuda/%.cu,$(BUILD)/cuda/%.o,$(CUDA_SRC))

cuda: $(CUDA_LIB)

# The fused Hopper GEMM's own check (cuda/gputest/fused_check.cu, needs nvcc and
# an sm_90 GPU; elsewhere it says SKIP): the wgmma precision probe, GEMMs against
# the exact product within the derived bound; `build/fused_check bench` times it.
# On the H200 machine the build and the check took 252 s together (2026-12-02,
# bench/RESULTS.md).
fused-check: cuda/gputest/fused_check.cu cuda/gemm_fused.cu cuda/gemm_fused.cuh cuda/launch.cuh
	@mkdir -p $(BUILD)
	$(NVCC) -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -o $(BUILD)/fused_check cuda/gputest/fused_check.cu
	$(BUILD)/fused_check check

# The decode kernel's shape sweep (`build/decode_shapes shapes M N K`: which
# NW/WK/S/KS to dispatch on this GPU), fused_check.cu with its ~200 extra
# decode-kernel instances, which about double the build (on 2 cores here 6 min
# against the check's 3 min 20 s; on the GPU machine over 560 s).
decode-shapes: cuda/gputest/fused_check.cu cuda/gemm_fused.cu cuda/gemm_fused.cuh cuda/launch.cuh
	@mkdir -p $(BUILD)
	$(NVCC) -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -DLQ_DECODE_SHAPES -o $(BUILD)/decode_shapes cuda/gputest/fused_check.cu

# The packed BF16 E2M1 encoding of the MXFP4 fast kernel (cuda/common.cuh
# e2m1_bf16x2_pack8) against lq_e2m1, every BF16 value at every scale it is
# used with (needs nvcc and an sm_90 GPU).
e2m1-bf16x2-check: cuda/gputest/e2m1_bf16x2_check.cu cuda/common.cuh cuda/e2m1.h
	@mkdir -p $(BUILD)
	$(NVCC) -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Icuda -o $(BUILD)/e2m1_bf16x2_check cuda/gputest/e2m1_bf16x2_check.cu
	$(BUILD)/e2m1_bf16x2_check

# Device codecs that compile for the host too, checked exhaustively without a GPU.
test-cuda-host: $(BUILD)/e2m1_exhaustive $(BUILD)/e8m0_exhaustive $(BUILD)/e2m1_sr_check
	$(BUILD)/e2m1_exhaustive
	$(BUILD)/e8m0_exhaustive
	$(BUILD)/e2m1_sr_check

$(BUILD)/e2m1_exhaustive: cuda/hosttest/e2m1_exhaustive.cc cuda/e2m1.h
	@mkdir -p $(BUILD)
	$(CXX) -std=c++11 $(CWARN) -O2 -o $@ $<

$(BUILD)/e8m0_exhaustive: cuda/hosttest/e8m0_exhaustive.cc cuda/e8m0.h cuda/e2m1.h
	@mkdir -p $(BUILD)
	$(CXX) -std=c++11 $(CWARN) -O2 -o $@ $<

$(BUILD)/e2m1_sr_check: cuda/hosttest/e2m1_sr_check.cc cuda/e2m1.h
	@mkdir -p $(BUILD)
	$(CXX) -std=c++11 $(CWARN) -O2 -o $@ $<

# One object per file, so that make -j compiles them in parallel.
$(BUILD)/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh cuda/*.h) include/quant_plugin.h include/quant.h
	@mkdir -p $(BUILD)/cuda
	$(NVCC) $(NVCCFLAGS) $(CUDA_ARCH) -Iinclude -Xcompiler -fPIC,-fvisibility=hidden -c -o $@ $<

# The fused Hopper GEMM runs only on sm_90 (qfused::device_ok), as sm_90a
# machine code (wgmma): its compute_90 PTX would be empty kernels that no GPU
# launches, and took a third of the plugin's longest compile (cicc's second
# pass over gemm_fused.cu; bench/RESULTS.md, 2026-11-30 19:34 section).
$(BUILD)/cuda/gemm_fused.o: CUDA_ARCH := -gencode=arch=compute_90a,code=sm_90a

# cuBLASLt (the GEMM, cuda/gemm.cu) is linked dynamically from the toolkit
# nvcc belongs to, found at run time through the rpath.
CUDA_LIBDIR ?= $(abspath $(dir $(shell command -v $(NVCC) 2>/dev/null))../lib64)
$(CUDA_LIB): $(CUDA_OBJ) cuda/libquant_cuda.map
	$(NVCC) $(CUDA_ARCH) -shared -cudart static -Xlinker --version-script=$(CURDIR)/cuda/libquant_cuda.map -o $@ $(CUDA_OBJ) \
	  -L$(CUDA_LIBDIR) -lcublasLt -Xlinker -rpath,$(CUDA_LIBDIR)

test-go:
	$(GO) vet ./...
	$(GO) vet -tags capitest ./capi
	$(GO) test -race -timeout 20m ./...
	# The portable GEMM path, as a build without assembly runs it.
	$(GO) vet -tags noasm ./internal/gemm
	$(GO) test -tags noasm ./internal/gemm ./host

# examples/c/test_threads.c's 16 pthreads call the ABI inside a Go test binary,
# so the exports' Go side runs under the race detector (capi/threads_capitest.go).
test-threads-race:
	$(GO) test -race -tags capitest -count=1 -run TestCThreads ./capi

# A library built with -tags faultinject panics on request inside an export:
# the panic must come back as a status and poison the library, never crash.
$(BUILD)/fault/libquant.so: $(GO_SRC) include/quant.h
	@mkdir -p $(BUILD)/fault
	$(GO) build -tags faultinject -buildmode=c-shared -ldflags "-extldflags -Wl,--version-script=$(LDMAP)" -o $@ ./capi

$(BUILD)/fault/fault_test: examples/c/fault_test.c examples/c/check.h $(BUILD)/fault/libquant.so $(BUILD)/libquant_toy.so
	$(CC) $(CFLAGS_ALL) $< -L$(BUILD)/fault -lquant -Wl,-rpath,'$$ORIGIN' -lm -o $@

test-fault: $(BUILD)/fault/fault_test
	$(BUILD)/fault/fault_test

# The header compiles alone as C99 and as C++, and together with the header cgo
# generates from the exports, so the two sets of prototypes cannot drift.
test-header: $(LIB)
	$(CC) -std=c99 $(CWARN) -Iinclude -fsyntax-only -x c examples/c/header_only.c
	$(CXX) -std=c++11 $(CWARN) -Iinclude -fsyntax-only -x c++ examples/c/header_only.c
	$(CC) -std=c99 $(CWARN) -Iinclude -fsyntax-only examples/c/header_dlpack_first.c
	$(CC) -std=c99 $(CWARN) -Iinclude -fsyntax-only -x c examples/c/plugin_header_only.c
	$(CXX) -std=c++11 $(CWARN) -Iinclude -fsyntax-only -x c++ examples/c/plugin_header_only.c
	$(CC) -std=c11 $(CWARN) -Wno-unused-parameter -Iinclude -Icapi -I$(BUILD) -fsyntax-only examples/c/header_drift.c

# Only quant_* symbols (and the version node) are exported.
test-symbols: $(LIB)
	examples/c/check_symbols.sh $(LIB)

test-c: test-header test-symbols test-fault test-threads-race $(C_TESTS) $(BUILD)/demo $(BUILD)/mlp_train $(GOPLUGIN_FOLDER)/plugins.sha256
	@set -e; for t in $(C_TESTS); do echo "== $$t"; $$t; done
	@echo "== $(BUILD)/test_plugin with LIBQUANT_PLUGIN_PATH"
	LIBQUANT_PLUGIN_PATH=$(BUILD)/libquant_toy_abi99.so:$(BUILD)/libquant_toy.so $(BUILD)/test_plugin
	@echo "== $(BUILD)/test_goplugin with LIBQUANT_PLUGIN_PATH"
	LIBQUANT_PLUGIN_PATH=$(GOPLUGIN) LIBQUANT_PLUGIN_MANIFEST=$(GOPLUGIN_MANIFEST) $(BUILD)/test_goplugin
	@echo "== $(BUILD)/test_goplugin with a LIBQUANT_PLUGIN_PATH folder"
	LIBQUANT_PLUGIN_PATH=$(GOPLUGIN_FOLDER) LIBQUANT_PLUGIN_MANIFEST=$(GOPLUGIN_FOLDER)/plugins.sha256 $(BUILD)/test_goplugin
	$(BUILD)/demo > /dev/null
	$(BUILD)/mlp_train quick
	$(BUILD)/mlp_train quick batch=45
	@# On CUDA tensors where a GPU, the runtime and build/libquant_cuda.so are; elsewhere
	@# it must exit 2 saying which is missing ("device=cuda unavailable: ..."): a skip.
	@echo "== $(BUILD)/mlp_train quick device=cuda"; \
	  $(CUDART_ENV) $(BUILD)/mlp_train quick device=cuda > $(BUILD)/mlp_cuda.log 2>&1; rc=$$?; \
	  if [ $$rc -eq 2 ] && grep -q '^mlp_train: device=cuda unavailable: ' $(BUILD)/mlp_cuda.log; then \
	    echo "SKIP: $$(grep '^mlp_train: device=cuda unavailable: ' $(BUILD)/mlp_cuda.log)"; \
	  else cat $(BUILD)/mlp_cuda.log; exit $$rc; fi

# CPU benchmarks against NumPy (landscape.md's peers). Installs Debian's NumPy
# and OpenBLAS (the optimized BLAS NumPy's matmul peer should have) if missing,
# then prints each table; see bench/RESULTS.md for recorded runs. Quiet machines
# give stable figures: close other work first.
BENCH_PKGS := python3-numpy libopenblas0-pthread
bench-cpu: lib
	@dpkg -s $(BENCH_PKGS) >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq $(BENCH_PKGS))
	/usr/bin/python3 bench/numpy_fp8.py
	/usr/bin/python3 bench/numpy_mx.py
	/usr/bin/python3 bench/numpy_nvfp4.py
	/usr/bin/python3 bench/numpy_gemm.py

# ---------------------------------------------------------------------------
# Python package (python/) and C packaging.
# One pinned requirements file makes the test venv; it lives outside the clone,
# named by the file's hash, so a second run on the same machine downloads nothing.
PYTHON3   ?= python3
PY_REQ    := python/requirements-test.txt
PY_CACHE  ?= $(HOME)/.cache/libquant
PY_VENV   := $(PY_CACHE)/venv-$(shell sha256sum $(PY_REQ) 2>/dev/null | cut -c1-16)
PY        := $(PY_VENV)/bin/python
PREFIX    ?= /usr/local
VERSION   := $(shell sed -n 's/^\#define QUANT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' include/quant.h | paste -sd.)

venv: $(PY_VENV)/.complete

# Order-only: the venv's path names the file's hash, so a clone with a newer
# timestamp but the same pins reuses it.
$(PY_VENV)/.complete: | $(PY_REQ)
	@mkdir -p $(PY_CACHE)
	rm -rf $(PY_VENV) $(PY_VENV).tmp
	$(PYTHON3) -m venv $(PY_VENV).tmp
	$(PY_VENV).tmp/bin/python -m pip install -q --disable-pip-version-check -r $(PY_REQ)
	mv $(PY_VENV).tmp $(PY_VENV)
	# a venv's scripts name their interpreter by absolute path: re-point them after the move
	sed -i '1s|^#!.*/bin/python[0-9.]*$$|#!$(PY_VENV)/bin/python|' $(PY_VENV)/bin/* 2>/dev/null || true
	sed -i 's|$(PY_VENV).tmp|$(PY_VENV)|g' $(PY_VENV)/bin/activate* $(PY_VENV)/pyvenv.cfg
	touch $@

# A platform wheel carrying build/libquant.so (and build/libquant_cuda.so when built),
# from a staging copy of python/ so that the source tree never holds a stale library.
wheel: $(LIB) venv
	rm -rf $(BUILD)/wheel-src $(BUILD)/dist/libquant-*.whl && mkdir -p $(BUILD)/dist
	cp -r python $(BUILD)/wheel-src
	rm -rf $(BUILD)/wheel-src/build $(BUILD)/wheel-src/*.egg-info $(BUILD)/wheel-src/tests
	mkdir -p $(BUILD)/wheel-src/libquant/_native
	cp $(LIB) $(BUILD)/wheel-src/libquant/_native/
	if [ -f $(CUDA_LIB) ]; then cp $(CUDA_LIB) $(BUILD)/wheel-src/libquant/_native/; fi
	cd $(BUILD)/wheel-src && $(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(CURDIR)/$(BUILD)/dist .
	@ls $(BUILD)/dist/libquant-*.whl

# make install PREFIX=...: the library (and CUDA plugin when built), the headers
# and a pkg-config file.
install: $(LIB)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libquant.so
	if [ -f $(CUDA_LIB) ]; then install -m 755 $(CUDA_LIB) $(DESTDIR)$(PREFIX)/lib/libquant_cuda.so; fi
	install -m 644 include/quant.h include/quant_plugin.h $(DESTDIR)$(PREFIX)/include/
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: libquant\nDescription: low-precision quantization engine (C ABI)\nVersion: %s\nLibs: -L$${libdir} -Wl,-rpath,$${libdir} -lquant\nLibs.private: -lm\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' '$(VERSION)' > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libquant.pc

# pytest over the Python package (CPU; CUDA tests skip without a GPU and say why)
# and mypy --strict on it.
# pytest needs cc and pkg-config (the struct-layout and make-install tests) and the
# toy plugins (plugin loading).
test-python: $(LIB) venv plugins
	@command -v pkg-config >/dev/null || (apt-get update -qq && apt-get install -y -qq pkg-config)
	cd python && $(PY) -m mypy --strict libquant
	env -u LIBQUANT_LIBRARY -u LIBQUANT_PLUGIN_PATH $(PY) -m pytest -q -rs python/tests

clean:
	rm -rf $(BUILD)

# Host time per quantize call from C (issue #15): against the fake CUDA plugin
# here (libquant's own share), against libquant_cuda.so on a GPU machine:
#   build/bench_dispatch build/libquant_cuda.so libcudart.so.13
bench-dispatch: $(BUILD)/bench_dispatch $(BUILD)/libquant_fake_cuda.so
	$(BUILD)/bench_dispatch $(BUILD)/libquant_fake_cuda.so

$(BUILD)/bench_dispatch: examples/c/bench_dispatch.c $(LIB)
	$(CC) $(CFLAGS_ALL) $< $(LDLIB) -ldl -o $@

$(BUILD)/libquant_fake_cuda.so: native/fakecuda/testdata/fake_cuda.c include/quant_plugin.h include/quant.h
	@mkdir -p $(BUILD)
	$(CC) $(PLUGIN_CFLAGS) $< -o $@
