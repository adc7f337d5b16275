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

GO_SRC  := go.mod go.sum $(shell find capi host plugins internal -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.map' 2>/dev/null)
C_TESTS := $(patsubst examples/c/%.c,$(BUILD)/%,$(wildcard examples/c/test_*.c))

.PHONY: all demo lib test test-go test-c test-header test-symbols test-fault test-threads-race clean

all: demo

lib: $(LIB)

$(LIB): $(GO_SRC) include/quant.h
	@mkdir -p $(BUILD)
	$(GO) build -buildmode=c-shared -ldflags "-extldflags -Wl,--version-script=$(LDMAP)" -o $@ ./capi

demo: $(BUILD)/demo
	$(BUILD)/demo

$(BUILD)/demo: examples/c/demo.c examples/c/demo_data.h $(LIB)
	$(CC) $(CFLAGS_ALL) $< $(LDLIB) -o $@

$(BUILD)/test_%: examples/c/test_%.c examples/c/check.h examples/c/demo_data.h $(LIB)
	$(CC) $(CFLAGS_ALL) $< $(LDLIB) -lpthread -o $@

test: test-go test-c

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

$(BUILD)/fault/fault_test: examples/c/fault_test.c examples/c/check.h $(BUILD)/fault/libquant.so
	$(CC) $(CFLAGS_ALL) $< -L$(BUILD)/fault -lquant -Wl,-rpath,'$$ORIGIN' -lm -o $@

test-fault: $(BUILD)/fault/fault_test
	$(BUILD)/fault/fault_test

# The header compiles alone as C99 and as C++, and together with the header cgo
# generates from the exports, so the two sets of prototypes cannot drift.
test-header: $(LIB)
	$(CC) -std=c99 $(CWARN) -Iinclude -fsyntax-only -x c examples/c/header_only.c
	$(CXX) -std=c++11 $(CWARN) -Iinclude -fsyntax-only -x c++ examples/c/header_only.c
	$(CC) -std=c99 $(CWARN) -Iinclude -fsyntax-only examples/c/header_dlpack_first.c
	$(CC) -std=c11 $(CWARN) -Wno-unused-parameter -Iinclude -Icapi -I$(BUILD) -fsyntax-only examples/c/header_drift.c

# Only quant_* symbols (and the version node) are exported.
test-symbols: $(LIB)
	examples/c/check_symbols.sh $(LIB)

test-c: test-header test-symbols test-fault test-threads-race $(C_TESTS) $(BUILD)/demo
	@set -e; for t in $(C_TESTS); do echo "== $$t"; $$t; done
	$(BUILD)/demo > /dev/null

clean:
	rm -rf $(BUILD)
