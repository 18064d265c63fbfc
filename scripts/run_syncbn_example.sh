#!/usr/bin/env bash
# 2-worker data-parallel training with SyncBatchNorm on CPU (msrun, mccl, 127.0.0.1).
#
#   scripts/run_syncbn_example.sh [pynative|graph] [extra args of examples/syncbn_train.py]
#
# Env: SYNCBN_WORKERS (default 2), SYNCBN_PORT (default: a free port),
#      SYNCBN_LOG_DIR (default: a temporary directory, printed at the end).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-pynative}"
shift || true
workers="${SYNCBN_WORKERS:-2}"
port="${SYNCBN_PORT:-$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
log_dir="${SYNCBN_LOG_DIR:-$(mktemp -d -t syncbn_example.XXXXXX)}"
work_dir="$(mktemp -d -t syncbn_run.XXXXXX)"   # MindSpore writes rank_*/ dumps into the cwd
cd "$work_dir"
status=0
msrun --worker_num="$workers" --local_worker_num="$workers" --master_addr=127.0.0.1 \
      --master_port="$port" --join=True --log_dir="$log_dir" \
      "$here/examples/syncbn_train.py" --mode "$mode" "$@" >"$log_dir/msrun.out" 2>&1 || status=$?
grep -h -E "^(epoch|rank) " "$log_dir"/worker_*.log || true
if [ "$status" -ne 0 ]; then
  echo "msrun failed ($status); logs in $log_dir" >&2
  grep -h -A3 -E "Error|Traceback" "$log_dir"/worker_*.log | grep -v WARNING | tail -30 >&2 || true
  exit "$status"
fi
echo "logs: $log_dir"
