#!/usr/bin/env bash
# Runs the board system tests (tests/st); they skip with a reason where no
# Ascend device exists. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
exec python3 -m pytest tests/st -ra "$@"
