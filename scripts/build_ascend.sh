#!/usr/bin/env bash
# Builds and installs the BatchNormBackward Ascend C op package from
# ascend_impl/ with MindSpore's bundled custom_compiler (CANN msopgen project
# underneath). Needs the CANN toolkit.
#
#   scripts/build_ascend.sh --soc ascend910b [--install-dir DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENDOR=mindspore_bn_grad
SOC=""
INSTALL_DIR="$ROOT/build/ascend_opp"

usage() { echo "usage: $0 --soc <$(socs | tr '\n' '|' | sed 's/|$//')> [--install-dir DIR]" >&2; }
socs() { python3 -c "import sys; sys.path.insert(0, '$ROOT'); from mindspore_bn_grad import support_rules; print('\n'.join(support_rules.targets(device='Ascend')))"; }

while [ $# -gt 0 ]; do
    case "$1" in
        --soc) SOC="${2:-}"; shift 2 ;;
        --install-dir) INSTALL_DIR="${2:-}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build_ascend.sh: unknown argument $1" >&2; usage; exit 2 ;;
    esac
done
if [ -z "$SOC" ]; then usage; exit 2; fi
KNOWN_SOCS="$(socs)"
if ! printf '%s\n' "$KNOWN_SOCS" | grep -x -- "$SOC" >/dev/null; then
    echo "build_ascend.sh: unknown SoC '$SOC'; expected one of: $(printf '%s ' $KNOWN_SOCS)" >&2
    exit 2
fi

CANN="${ASCEND_HOME_PATH:-${ASCEND_CANN_PACKAGE_PATH:-}}"
if [ -z "$CANN" ] && [ -d /usr/local/Ascend/ascend-toolkit/latest ]; then
    CANN=/usr/local/Ascend/ascend-toolkit/latest
fi
if [ -z "$CANN" ] || [ ! -d "$CANN" ]; then
    cat >&2 <<MSG
build_ascend.sh: the CANN toolkit is required to build the Ascend C op package, and none was found.
Install CANN, then either
  source <cann>/set_env.sh            (sets ASCEND_HOME_PATH), or
  export ASCEND_HOME_PATH=<cann>       (or ASCEND_CANN_PACKAGE_PATH=<cann>)
The default location /usr/local/Ascend/ascend-toolkit/latest does not exist here.
MSG
    exit 1
fi

python3 "$ROOT/scripts/gen_ascend_op_def.py" --check || {
    echo "build_ascend.sh: run scripts/gen_ascend_op_def.py first (the generated op definition is stale)" >&2
    exit 1
}
COMPILER="$(python3 -c 'import mindspore, os; print(os.path.join(os.path.dirname(mindspore.__file__), "lib", "plugin", "ascend", "custom_compiler", "setup.py"))')"
if [ ! -f "$COMPILER" ]; then
    echo "build_ascend.sh: MindSpore's custom_compiler not found at $COMPILER" >&2
    exit 1
fi
mkdir -p "$INSTALL_DIR"
cd "$INSTALL_DIR"
python3 "$COMPILER" --op_host_path "$ROOT/ascend_impl/op_host" --op_kernel_path "$ROOT/ascend_impl/op_kernel" \
    --soc_version "$SOC" --vendor_name "$VENDOR" --ascend_cann_package_path "$CANN" -i
echo "Installed. Before running MindSpore on the board:"
echo "  export ASCEND_CUSTOM_OPP_PATH=$INSTALL_DIR/vendors/$VENDOR:\${ASCEND_CUSTOM_OPP_PATH:-}"
