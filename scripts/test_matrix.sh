#!/usr/bin/env bash
# Fresh install + fast test profile + demo on each MindSpore release.
#
#   bash scripts/test_matrix.sh [VERSION ...]     (default: every supported release)
#
# Per version: a new venv (Python 3.11), `pip install mindspore==VERSION "numpy<2" -e ".[test,demo]"`
# (the README's editable install of this checkout), a kernel cache of its own, the fast
# test profile below and `python -m mindspore_bn_grad demo`. The venv is deleted afterwards
# (each is about 2.8 GB) unless KEEP_VENVS=1. Prints a table and writes it to
# $MATRIX_DIR/results.md with the logs beside it.
#
# With PROFILES="native" (or "fast native"), per version also the native route (MindSpore's CPU op
# plugin, docs/native_route.md): whether the wheel has the op plugin mechanism (the interface header
# the kernel library is built against, GetOpPluginHandle, the MS_OP_PLUGIN_PATH string), the
# native-route session (every test marked native_route, with MS_BN_GRAD_OP_PLUGIN=1) and the op
# plugin tests of the default session; its table goes to $MATRIX_DIR/native.md.
#
# Environment:
#   MATRIX_DIR   work directory (default: ${TMPDIR:-/tmp}/ms_bn_grad_matrix)
#   PYTHON       interpreter for the venvs (default: python3.11, else python3)
#   PROFILES     what to run per version: "fast" (default), "native", or "fast native"
#   MATRIX_VENVS a directory of ready venvs named ms-VERSION (MindSpore, numpy<2 and the test
#                extras installed): used as they are, this checkout on PYTHONPATH, never deleted;
#                a version without one is installed as above
#   KEEP_VENVS   1 to keep the venvs
#   PIP_ARGS     extra pip arguments
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)

DEFAULT_VERSIONS="2.7.0 2.7.1 2.7.2 2.8.0 2.9.0 2.10.0"
VERSIONS=${*:-$DEFAULT_VERSIONS}
# The fast profile: values in both modes, the nn cells against MindSpore's own (with AMP),
# dynamic shapes, the kernel called directly, every rejection, the build and the
# attributes reaching the kernel, the version check, SyncBatchNorm (Cell bprop, msrun
# with 2 workers, the venv's own msrun), convert_batchnorm and the PYNATIVE queue waits.
FAST_TESTS=(tests/ut/test_op_values.py tests/ut/test_nn_parity.py tests/ut/test_dynamic_shape.py
            tests/ut/test_kernel_direct.py tests/ut/test_errors.py tests/ut/test_build.py
            tests/ut/test_ms_compat.py tests/ut/test_sync_batchnorm.py tests/ut/test_sync_kernels.py
            tests/ut/test_nn_convert.py tests/ut/test_pynative_waits.py tests/st/syncbn/test_syncbn_msrun.py)

# The native route (PROFILES=native): its session, then the op plugin and kernel factory tests of the default session.
NATIVE_SESSION=(-m native_route -o addopts= -rfEs tests/ut)
PLUGIN_TESTS=(tests/ut/test_op_plugin.py tests/ut/test_factory_route.py tests/ut/test_legacy_kernels.py tests/ut/test_mint_convert.py tests/ut/test_bench_native.py
              tests/ut/test_ms_compat.py)
PROFILES=${PROFILES:-fast}

DIR=${MATRIX_DIR:-${TMPDIR:-/tmp}/ms_bn_grad_matrix}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
mkdir -p "$DIR"
RESULTS="$DIR/results.md"
{
  echo "| MindSpore | install | tests | demo | total s |"
  echo "|---|---|---|---|---:|"
} > "$RESULTS"

NATIVE_RESULTS="$DIR/native.md"
case " $PROFILES " in *" native "*)
  {
    echo "| MindSpore | op plugin interface used | GetOpPluginHandle | native-route session | op plugin tests |"
    echo "|---|---|---|---|---|"
  } > "$NATIVE_RESULTS" ;;
esac

OLD_PATH=$PATH
READY_PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
secs() { echo $(( $(date +%s) - $1 )); }
has_profile() { case " $PROFILES " in *" $1 "*) return 0 ;; esac; return 1; }
# pytest's summary line without the time ("12 passed, 3 skipped"), or "rc N" when there is none.
summary() {
  local s
  s=$(grep -E "^=*.* (passed|failed|error|skipped|deselected)" "$1" | tail -n 1 \
      | sed 's/^=* *//; s/ *=*$//; s/ in [0-9.]*s.*//')
  echo "${s:-rc $2}"
}

# The op plugin mechanism in the wheel of $1 (a python, this checkout importable): the interface
# header the package builds against (cpu_kernel/build.py, MS_PLUGIN_HEADERS; "none" where the
# release has none it uses, with the interface headers the wheel does have), the library that
# exports GetOpPluginHandle, how many libraries read MS_OP_PLUGIN_PATH.
mechanism() {
  local ms hdr others lib libs
  ms=$("$1" -c "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('mindspore').origin))")
  hdr=$("$1" -c "from mindspore_bn_grad.cpu_kernel import build; h = build.plugin_interface_header(); \
print(h.relative_to('$ms/include/mindspore') if h else 'none')" 2>/dev/null)
  if [ "${hdr:-none}" = none ]; then
    others=$(find "$ms/include" -name custom_kernel_input_info.h | sed "s#^$ms/include/mindspore/##" | tr '\n' ' ')
    hdr="none${others:+ (the wheel has ${others% })}"
  fi
  lib=$(find "$ms/lib" -name "*.so*" -type f | while read -r f; do
          nm -D --defined-only "$f" 2>/dev/null | grep -q GetOpPluginHandle && basename "$f"; done | tr '\n' ' ')
  libs=$(grep -l -a -r --include="*.so*" MS_OP_PLUGIN_PATH "$ms/lib" 2>/dev/null | wc -l)
  echo "${hdr}|${lib:-none }(variable read in ${libs} libraries)"
}

# The native route on venv python $1, logs at $2.*: prints the row's last three cells.
native_route() {
  local py=$1 log=$2 mech rc1 rc2
  mech=$(mechanism "$py")
  env -u MS_OP_PLUGIN_PATH MS_BN_GRAD_OP_PLUGIN=1 MS_BN_GRAD_NATIVE_KERNELS=off "$py" -m pytest -p no:cacheprovider -o addopts=-ra -q "${NATIVE_SESSION[@]}" > "$log.native.log" 2>&1
  rc1=$?
  env -u MS_BN_GRAD_OP_PLUGIN -u MS_OP_PLUGIN_PATH "$py" -m pytest -p no:cacheprovider -o addopts=-ra -q -rfEs \
    "${PLUGIN_TESTS[@]}" > "$log.plugin.log" 2>&1
  rc2=$?
  echo "${mech%%|*} | ${mech#*|} | $([ $rc1 -eq 0 ] && echo pass || echo FAIL): $(summary "$log.native.log" $rc1)" \
       "| $([ $rc2 -eq 0 ] && echo pass || echo FAIL): $(summary "$log.plugin.log" $rc2)"
}

overall=0
for v in $VERSIONS; do
  venv="$DIR/venv-$v"
  log="$DIR/$v"
  rm -rf "$venv" "$DIR/cache-$v"
  t0=$(date +%s)
  install="fail" tests="not run" demo="not run" native=""
  t=$(date +%s)
  ready=""
  if [ -n "${MATRIX_VENVS:-}" ] && [ -x "$MATRIX_VENVS/ms-$v/bin/python" ]; then
    ready="$MATRIX_VENVS/ms-$v"; venv=$ready
    export PYTHONPATH=$READY_PYTHONPATH
    echo "== MindSpore $v: the ready venv $venv" >&2
  else
    echo "== MindSpore $v: installing into $venv" >&2
  fi
  # shellcheck disable=SC2086
  if [ -n "$ready" ] \
     || { "$PY" -m venv "$venv" > "$log.install.log" 2>&1 \
          && "$venv/bin/python" -m pip install ${PIP_ARGS:-} "mindspore==$v" "numpy<2" -e "$ROOT[test,demo]" \
             >> "$log.install.log" 2>&1; }; then
    if [ -n "$ready" ]; then install="ready venv"; else install="ok ($(secs "$t") s)"; fi
    export MS_BN_GRAD_CACHE_DIR="$DIR/cache-$v"
    mkdir -p -m 700 "$MS_BN_GRAD_CACHE_DIR"
    export PATH="$venv/bin:$OLD_PATH"   # msrun of this release
    if has_profile fast; then
      echo "== MindSpore $v: tests" >&2
      t=$(date +%s)
      "$venv/bin/python" -m pytest -p no:cacheprovider -o addopts=-ra -q "${FAST_TESTS[@]}" > "$log.tests.log" 2>&1
      rc=$?
      if [ "$rc" -eq 0 ]; then tests="pass: $(summary "$log.tests.log" $rc) ($(secs "$t") s)"
      else tests="FAIL: $(summary "$log.tests.log" $rc) ($(secs "$t") s)"; fi
      echo "== MindSpore $v: demo" >&2
      t=$(date +%s)
      if "$venv/bin/python" -m mindspore_bn_grad demo > "$log.demo.log" 2>&1; then
        demo="pass ($(secs "$t") s)"
      else
        demo="FAIL ($(secs "$t") s)"
      fi
    fi
    if has_profile native; then
      echo "== MindSpore $v: native route" >&2
      native=$(native_route "$venv/bin/python" "$log")
    fi
    unset MS_BN_GRAD_CACHE_DIR
    export PATH="$OLD_PATH"
  fi
  case "$install $tests $demo $native" in *fail*|*FAIL*) overall=1 ;; esac
  if has_profile fast; then
    echo "| $v | $install | $tests | $demo | $(secs "$t0") |" | tee -a "$RESULTS" >&2
  fi
  if has_profile native; then
    echo "| $v | ${native:-not run ($install)} |" | tee -a "$NATIVE_RESULTS" >&2
  fi
  if [ -z "$ready" ] && [ "${KEEP_VENVS:-0}" != 1 ]; then rm -rf "$venv"; fi
  if [ "${KEEP_VENVS:-0}" != 1 ]; then rm -rf "$DIR/cache-$v"; fi
done

echo
has_profile fast && cat "$RESULTS"
has_profile native && cat "$NATIVE_RESULTS"
echo "(logs: $DIR/<version>.{install,tests,demo,native,plugin}.log)"
exit $overall
