#!/usr/bin/env bash
# Data-parallel training with SyncBatchNorm on this host (CPU, msrun, mccl, 127.0.0.1).
#
#   scripts/run_syncbn_example.sh [pynative|graph] [extra options of examples/syncbn_train.py]
#
# Env: SYNCBN_WORKERS (default 2), SYNCBN_PORT (default: a free port),
#      SYNCBN_LOG_DIR (default: a temporary folder, removed at the end: set it to keep the logs).
# Several hosts: run examples/syncbn_train.py on each host (docs/syncbn.md).
# Nothing temporary is left behind, whatever the outcome. msrun runs in a temporary folder: give
# paths in the options (--checkpoint-dir) as absolute paths.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-pynative}"
shift || true
workers="${SYNCBN_WORKERS:-2}"
port="${SYNCBN_PORT:-$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
work_dir="$(mktemp -d -t syncbn_run.XXXXXX)"   # MindSpore writes rank_*/ dumps into the cwd
log_dir="${SYNCBN_LOG_DIR:-$work_dir/logs}"
trap 'rm -rf "$work_dir"' EXIT
cd "$work_dir"
status=0
python "$here/examples/syncbn_train.py" --hosts 1 --workers-per-host "$workers" --node-rank 0 \
       --master-addr 127.0.0.1 --master-port "$port" --log-dir "$log_dir" --mode "$mode" "$@" \
       >"$work_dir/msrun.out" 2>&1 || status=$?
grep -h -E "^(epoch|rank) " "$log_dir"/worker_*.log || true
if [ "$status" -ne 0 ]; then
  echo "msrun failed ($status)" >&2
  grep -h -A3 -E "Error|Traceback" "$log_dir"/worker_*.log | grep -v WARNING | tail -30 >&2 || true
  tail -5 "$work_dir/msrun.out" >&2 || true
  exit "$status"
fi
if [ -n "${SYNCBN_LOG_DIR:-}" ]; then echo "logs: $log_dir"; fi
