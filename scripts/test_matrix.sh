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
# Environment:
#   MATRIX_DIR   work directory (default: ${TMPDIR:-/tmp}/ms_bn_grad_matrix)
#   PYTHON       interpreter for the venvs (default: python3.11, else python3)
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
# with 2 workers, the venv's own msrun) and convert_batchnorm.
FAST_TESTS=(tests/ut/test_op_values.py tests/ut/test_nn_parity.py tests/ut/test_dynamic_shape.py
            tests/ut/test_kernel_direct.py tests/ut/test_errors.py tests/ut/test_build.py
            tests/ut/test_ms_compat.py tests/ut/test_sync_batchnorm.py tests/ut/test_sync_kernels.py
            tests/ut/test_nn_convert.py tests/st/syncbn/test_syncbn_msrun.py)

DIR=${MATRIX_DIR:-${TMPDIR:-/tmp}/ms_bn_grad_matrix}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
mkdir -p "$DIR"
RESULTS="$DIR/results.md"
{
  echo "| MindSpore | install | tests | demo | total s |"
  echo "|---|---|---|---|---:|"
} > "$RESULTS"

OLD_PATH=$PATH
secs() { echo $(( $(date +%s) - $1 )); }

overall=0
for v in $VERSIONS; do
  venv="$DIR/venv-$v"
  log="$DIR/$v"
  rm -rf "$venv" "$DIR/cache-$v"
  t0=$(date +%s)
  echo "== MindSpore $v: installing into $venv" >&2
  install="fail" tests="not run" demo="not run"
  t=$(date +%s)
  # shellcheck disable=SC2086
  if "$PY" -m venv "$venv" > "$log.install.log" 2>&1 \
     && "$venv/bin/python" -m pip install ${PIP_ARGS:-} "mindspore==$v" "numpy<2" -e "$ROOT[test,demo]" \
        >> "$log.install.log" 2>&1; then
    install="ok ($(secs "$t") s)"
    export MS_BN_GRAD_CACHE_DIR="$DIR/cache-$v"
    export PATH="$venv/bin:$OLD_PATH"   # msrun of this release
    echo "== MindSpore $v: tests" >&2
    t=$(date +%s)
    "$venv/bin/python" -m pytest -p no:cacheprovider -q "${FAST_TESTS[@]}" > "$log.tests.log" 2>&1
    rc=$?
    summary=$(grep -E "^=*.* (passed|failed|error)" "$log.tests.log" | tail -n 1 | sed 's/^=* *//; s/ *=*$//; s/ in [0-9.]*s.*//')
    if [ "$rc" -eq 0 ]; then tests="pass: ${summary:-?} ($(secs "$t") s)"; else tests="FAIL: ${summary:-rc $rc} ($(secs "$t") s)"; fi
    echo "== MindSpore $v: demo" >&2
    t=$(date +%s)
    if "$venv/bin/python" -m mindspore_bn_grad demo > "$log.demo.log" 2>&1; then
      demo="pass ($(secs "$t") s)"
    else
      demo="FAIL ($(secs "$t") s)"
    fi
    unset MS_BN_GRAD_CACHE_DIR
    export PATH="$OLD_PATH"
  fi
  case "$install $tests $demo" in *fail*|*FAIL*) overall=1 ;; esac
  echo "| $v | $install | $tests | $demo | $(secs "$t0") |" | tee -a "$RESULTS" >&2
  if [ "${KEEP_VENVS:-0}" != 1 ]; then rm -rf "$venv" "$DIR/cache-$v"; fi
done

echo
cat "$RESULTS"
echo "(logs: $DIR/<version>.{install,tests,demo}.log)"
exit $overall
