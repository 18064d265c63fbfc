#!/usr/bin/env bash
# Runs the unit tests against AddressSanitizer + UndefinedBehaviorSanitizer
# builds of both native libraries:
#   - the CPU kernel (mindspore_bn_grad/csrc), through MS_BN_GRAD_CXXFLAGS
#     (part of the build's cache key) into its own cache directory;
#   - the CPU build of the Ascend C kernel (tests/ut/ascend_sim/simlib.py),
#     through MS_BN_GRAD_SIM_CXXFLAGS.
# Exits non-zero when a build fails, a test fails, or any sanitizer report is
# written (reports go to log files, so a report from a subprocess or one that
# a test swallowed still counts).
#
#   scripts/run_sanitizers.sh                 # default test selection (below)
#   scripts/run_sanitizers.sh tests/ut -x     # any pytest arguments instead
#   SAN_SCOPE=all scripts/run_sanitizers.sh   # the whole ut suite, MindSpore included
#
# Default selection (SAN_SCOPE=kernel): every test that drives the native code
# without needing MindSpore's process to be ASan-clean: the direct kernel
# tests, the hypothesis fuzz of the direct path, hostile shapes at the direct
# entry, numerics, thread-safety of the direct entry, the build tests, and
# the ascend_sim tests. MindSpore's own libraries are not built with ASan;
# with detect_leaks=0 they do run under the preloaded runtime, and
# SAN_SCOPE=all runs the MindSpore tests too (slower).
#
# Options and why:
#   LD_PRELOAD=libasan: Python itself is not instrumented, and the ASan runtime
#     must be the first library loaded for a sanitized .so to be dlopen'ed.
#   ASAN_OPTIONS=detect_leaks=0: CPython (and MindSpore) keep allocations
#     alive until exit by design; LeakSanitizer would report those, not our
#     kernel's. Out-of-bounds, use-after-free, double free etc. are all still
#     detected.
#   UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1, and the code is compiled
#     with -fno-sanitize-recover=all, so the first UB report stops the process.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python}"
CXX_BIN="${MS_BN_GRAD_CXX:-${CXX:-g++}}"
OUT="${SAN_OUT:-$ROOT/build/sanitizers}"
LOGS="$OUT/logs"
SAN_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"

rm -rf "$LOGS"
mkdir -p "$LOGS" "$OUT/cache"

LIBASAN="$("$CXX_BIN" -print-file-name=libasan.so)"
if [ ! -e "$LIBASAN" ]; then
  echo "run_sanitizers: libasan not found for $CXX_BIN (Debian/Ubuntu: apt-get install libasan8 / libgcc-12-dev)" >&2
  exit 2
fi
LIBASAN="$(readlink -f "$LIBASAN")"
# libstdc++ preloaded too: python does not link it, and without it ASan's
# __cxa_throw interceptor finds no real function at start-up and aborts
# ("CHECK failed: real___cxa_throw != 0") at the first C++ exception (the
# ascend_sim misuse tests throw on purpose).
LIBSTDCXX="$(readlink -f "$("$CXX_BIN" -print-file-name=libstdc++.so)")"

export MS_BN_GRAD_CXXFLAGS="$SAN_FLAGS"
export MS_BN_GRAD_CACHE_DIR="$OUT/cache"
export MS_BN_GRAD_SIM_CXXFLAGS="$SAN_FLAGS"
export TMPDIR="${TMPDIR:-/tmp}"

echo "== building the sanitized libraries (flags: $SAN_FLAGS)"
# Built before the preload, without loading them (a sanitized .so cannot be
# loaded into a process that did not start with the ASan runtime).
"$PY" - <<'PYEOF' || { echo "run_sanitizers: build failed" >&2; exit 2; }
import os, sys
# the folders of pytest's `pythonpath` (setup.cfg): simlib imports the harness's codec
sys.path[:0] = [os.path.join("tests", "ut", "ascend_sim"), os.path.join("tests", "ut"), "tests"]
from mindspore_bn_grad.cpu_kernel import build as cpu_build
print("cpu kernel :", cpu_build.library_path())
import simlib, ctypes
simlib.ctypes.CDLL = lambda path, *a, **k: path   # build only, do not load
print("ascend_sim :", simlib.build())  # its default cache, keyed by the flags too
PYEOF

if [ "$#" -gt 0 ]; then
  TESTS=("$@")
elif [ "${SAN_SCOPE:-kernel}" = "all" ]; then
  TESTS=(tests/ut)
else
  TESTS=(tests/ut/test_kernel_direct.py tests/ut/test_fuzz.py tests/ut/test_numerics.py
         tests/ut/test_big_tensor.py tests/ut/test_build.py tests/ut/ascend_sim
         "tests/ut/test_errors.py::test_direct_entry_inconsistent_shapes"
         "tests/ut/test_concurrency.py::test_threads_direct")
fi

echo "== running pytest ${TESTS[*]} under ASan+UBSan"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0:detect_odr_violation=0:log_path=$LOGS/asan:print_summary=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$LOGS/ubsan"
export MS_BN_GRAD_SANITIZED=1   # tests may skip what cannot run under ASan (none by default)
LD_PRELOAD="$LIBASAN $LIBSTDCXX" "$PY" -m pytest -q -p no:cacheprovider "${TESTS[@]}"
rc=$?

reports=$(find "$LOGS" -type f -size +0c | sort)
if [ -n "$reports" ]; then
  echo "== sanitizer reports:" >&2
  for f in $reports; do echo "--- $f" >&2; cat "$f" >&2; done
  echo "run_sanitizers: FAILED ($(echo "$reports" | wc -l) report file(s))" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  echo "run_sanitizers: pytest failed (exit $rc), no sanitizer report" >&2
  exit "$rc"
fi
echo "run_sanitizers: OK, tests passed and zero sanitizer reports"
