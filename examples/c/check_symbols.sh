#!/bin/sh
# Fails if libquant.so exports any dynamic symbol other than quant_* (the
# version node LIBQUANT_* is the linker script's own name, not a symbol a caller
# can bind to).
set -eu
lib=${1:-build/libquant.so}
syms=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//')
bad=$(printf '%s\n' "$syms" | grep -v -e '^quant_' -e '^LIBQUANT_' || true)
if [ -n "$bad" ]; then
  echo "check_symbols: $lib exports symbols outside quant_*:" >&2
  printf '%s\n' "$bad" >&2
  exit 1
fi
n=$(printf '%s\n' "$syms" | grep -c '^quant_')
echo "check_symbols: $lib exports $n quant_* symbols and nothing else"
