#!/usr/bin/env bash
# Runs the board system tests (tests/st); they skip with a reason where no
# Ascend device exists. Extra arguments go to pytest.
#
#   scripts/run_st.sh --perf [--json FILE]   instead: time our kernel against
#       aclnnBatchNormBackward on the ResNet-50 BatchNorm shapes
#       (bench/ascend_board.py), under msprof when msprof is on PATH (profile
#       in ${MSPROF_OUT:-/tmp/bnb_msprof}); says so and exits 0 without a board.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
if [ "${1:-}" = "--perf" ]; then
    shift
    cmd=(python3 -m mindspore_bn_grad_bench.ascend_board "$@")
    if command -v msprof >/dev/null 2>&1 && python3 -c "import mindspore as ms, sys; sys.exit(0 if ms.hal.is_available('Ascend') else 1)" 2>/dev/null; then
        out="${MSPROF_OUT:-/tmp/bnb_msprof}"
        mkdir -p "$out"
        exec msprof --output="$out" --application="${cmd[*]}"
    fi
    exec "${cmd[@]}"
fi
exec python3 -m pytest tests/st -ra "$@"
