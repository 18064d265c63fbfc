#!/usr/bin/env bash
# Real-API build of the Ascend C operator, without a board or a CANN compiler:
# compiles every kernel entry (ascend_impl/op_kernel) for every SoC line of the
# YAML against the public Ascend C API headers in their CPU-debug mode
# (g++ -DASCENDC_CPU_DEBUG=1 plus the core macros asc-devkit's own tests use),
# the op_host sources against the public registration / tiling / logging
# headers, and a probe that every API the project's simulator (tests/ascend_tools/sim)
# provides is called the same way against both. For the SoCs whose intrinsics
# the project's stand-ins cover it also links the CPU launcher
# (tests/ascend_tools/api_check/bnb_api_launch.cpp) that tests/ut/ascend_api runs
# against tests/reference.py.
#
#   scripts/check_ascend_api.sh [--soc NAME|all] [--build-dir DIR]
#   scripts/check_ascend_api.sh --list          # SoC lines: name, runs (1/0), core macros
#   scripts/check_ascend_api.sh --find-headers  # the asc-devkit tree it would use (exit 3: none)
#   scripts/check_ascend_api.sh --soc NAME --probe FILE.cpp
#       # builds a probe program (kernel fragments with its own main, run on the
#       # stand-ins' cores) as BUILD_DIR/NAME/probe_FILE; prints "ok probe PATH"
#
# Headers (never copied into this repository):
#   ASCEND_DEVKIT_PATH   checkout of the public asc-devkit repository
#                        (tested at commit 82b89a1, GitHub mirror-cann/asc-devkit)
#   or ASCEND_HOME_PATH  a CANN toolkit (its include/ascendc tree is used)
#   ASCEND_METADEF_PATH  checkout of the public metadef repository   (op_host)
#   ASCEND_GE_PATH       checkout of the public graph-engine (ge) repository (op_host)
#   ASCEND_OPBASE_PATH   checkout of the public opbase repository (OP_LOGE; optional)
# Only ASCEND_DEVKIT_PATH (or ASCEND_HOME_PATH) is required; the op_host check
# is skipped with a message when metadef / ge are not given.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KERNEL_DIR="$ROOT/ascend_impl/op_kernel"
HOST_DIR="$ROOT/ascend_impl/op_host"
CHECK_DIR="$ROOT/tests/ascend_tools/api_check"
SIM_DIR="$ROOT/tests/ascend_tools/sim"
SOC=all
BUILD_DIR="${TMPDIR:-/tmp}/bnb_ascend_api"
CXX="${CXX:-g++}"

# SoC line -> core macros (as asc-devkit's tests/api/basic_api/CMakeLists.txt
# sets them for a vector core) and whether the stand-ins model its intrinsics
# well enough to run the kernels.
soc_flags() {
    case "$1" in
        ascend910) echo "-D__NPU_ARCH__=1001 -D__DAV_C100__" ;;
        ascend310p) echo "-D__NPU_ARCH__=2002 -D__DAV_M200__" ;;
        ascend910b|ascend910_93) echo "-D__NPU_ARCH__=2201 -D__DAV_C220__ -D__DAV_C220_VEC__ -D__DAV_VEC__" ;;
        ascend950) echo "-D__NPU_ARCH__=3510 -D__DAV_C310__ -D__DAV_C310_VEC__ -D__DAV_VEC__" ;;
        *) return 1 ;;
    esac
}
soc_runs() {
    case "$1" in
        ascend910|ascend310p|ascend910b|ascend910_93) return 0 ;;
        *) return 1 ;;
    esac
}
socs() { python3 -c "import sys; sys.path.insert(0, '$ROOT'); from mindspore_bn_grad import support_rules; print('\n'.join(support_rules.targets(device='Ascend')))"; }

usage() { echo "usage: $0 [--soc <all|$(socs | tr '\n' '|' | sed 's/|$//')>] [--build-dir DIR] [--list]" >&2; }
LIST=0
FIND=0
PROBE=""
while [ $# -gt 0 ]; do
    case "$1" in
        --soc) SOC="${2:-}"; shift 2 ;;
        --build-dir) BUILD_DIR="${2:-}"; shift 2 ;;
        --list) LIST=1; shift ;;
        --find-headers) FIND=1; shift ;;
        --probe) PROBE="${2:-}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "check_ascend_api.sh: unknown argument $1" >&2; usage; exit 2 ;;
    esac
done
KNOWN_SOCS="$(socs)"
if [ "$LIST" = 1 ]; then
    # name, runs (1/0), core macros
    for s in $KNOWN_SOCS; do
        if soc_runs "$s"; then r=1; else r=0; fi
        echo "$s $r $(soc_flags "$s")"
    done
    exit 0
fi
if [ "$SOC" = all ]; then
    SOC_LIST="$KNOWN_SOCS"
elif printf '%s\n' "$KNOWN_SOCS" | grep -x -- "$SOC" >/dev/null; then
    SOC_LIST="$SOC"
else
    echo "check_ascend_api.sh: unknown SoC '$SOC'; expected all or one of: $(printf '%s ' $KNOWN_SOCS)" >&2
    exit 2
fi

# ---- the public headers ----
DEVKIT="${ASCEND_DEVKIT_PATH:-}"
if [ -z "$DEVKIT" ] && [ -n "${ASCEND_HOME_PATH:-}" ]; then
    for d in "$ASCEND_HOME_PATH/include/ascendc" "$ASCEND_HOME_PATH/compiler/ascendc" "$ASCEND_HOME_PATH"; do
        if [ -f "$d/include/kernel_operator.h" ] && [ -d "$d/impl" ]; then DEVKIT="$d"; break; fi
    done
fi
if [ -z "$DEVKIT" ] || [ ! -f "$DEVKIT/include/kernel_operator.h" ]; then
    cat >&2 <<MSG
check_ascend_api.sh: the public Ascend C API headers are required and were not found.
Check out the public asc-devkit repository (tested at commit 82b89a1) outside this
project and point ASCEND_DEVKIT_PATH at it, e.g.
  git clone https://github.com/mirror-cann/asc-devkit /opt/asc-devkit && git -C /opt/asc-devkit checkout 82b89a1
  export ASCEND_DEVKIT_PATH=/opt/asc-devkit
or source a CANN toolkit's set_env.sh (ASCEND_HOME_PATH). For the op_host check also
set ASCEND_METADEF_PATH (metadef), ASCEND_GE_PATH (graph-engine, "ge") and optionally
ASCEND_OPBASE_PATH (opbase).
MSG
    exit 3
fi
if [ "$FIND" = 1 ]; then
    echo "$DEVKIT"
    exit 0
fi
mkdir -p "$BUILD_DIR"
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
GEN="$BUILD_DIR/gen"
if [ ! -f "$GEN/kernel_tiling/kernel_tiling.h" ]; then
    # Generated from the headers' own tiling definitions, as asc-devkit's tests do.
    mkdir -p "$GEN/kernel_tiling"
    python3 "$DEVKIT/impl/adv_api/cmake/scripts/gen_kernel_tiling_data_def.py" "$DEVKIT/include/adv_api" \
        "$GEN/kernel_tiling/kernel_tiling.h" >"$BUILD_DIR/gen_kernel_tiling.log"
fi
# -w: the headers are not warning-clean under g++ (asc-devkit's own tests build with -w too).
# -g1: line tables, so a stopped core names the kernel source line (bnb_stub_where.cpp).
KFLAGS=(-std=c++17 -O1 -g1 -w -DASCENDC_CPU_DEBUG=1 "-DBNB_SKIP_PREFIXES=\"$DEVKIT:$ROOT/tests/ascend_tools\"" -I"$CHECK_DIR/stubs" -I"$GEN" -I"$DEVKIT" -I"$DEVKIT/include"
        -I"$DEVKIT/include/basic_api" -I"$DEVKIT/include/utils" -I"$DEVKIT/impl" -I"$DEVKIT/impl/basic_api"
        -I"$DEVKIT/impl/utils" -I"$KERNEL_DIR" -I"$HOST_DIR" -I"$CHECK_DIR")
ENTRIES="batch_norm_backward:bnb::BatchNormBackwardTilingData batch_norm_reduce_backward:bnb::BatchNormSyncTilingData batch_norm_elemt_backward:bnb::BatchNormSyncTilingData"

fail=0
log_fail() { echo "FAIL $1 (log: $2)"; fail=1; }

# The process-level stand-ins every program run on the stand-ins' cores links.
runtime_objs() {  # SOC OUT_DIR LOG -> prints the object paths
    local s="$1" out="$2" log="$3" f
    read -r -a flags <<<"$(soc_flags "$s")"
    for f in bnb_stub_runtime bnb_stub_checks bnb_stub_where bnb_stub_pipes; do
        if [ ! -f "$out/$f.o" ] || [ "$CHECK_DIR/$f.cpp" -nt "$out/$f.o" ]; then
            "$CXX" "${KFLAGS[@]}" "${flags[@]}" -c "$CHECK_DIR/$f.cpp" -o "$out/$f.o" >>"$log" 2>&1 || return 1
        fi
        echo "$out/$f.o"
    done
}

if [ -n "$PROBE" ]; then
    if [ "$SOC" = all ] || ! soc_runs "$SOC"; then
        echo "check_ascend_api.sh: --probe needs one --soc the stand-ins run" >&2
        exit 2
    fi
    out="$BUILD_DIR/$SOC"
    mkdir -p "$out"
    read -r -a flags <<<"$(soc_flags "$SOC")"
    stem="$(basename "${PROBE%.*}")"
    log="$out/probe_$stem.log"
    : >"$log"
    if objs="$(runtime_objs "$SOC" "$out" "$log")" &&
        "$CXX" "${KFLAGS[@]}" "${flags[@]}" -I"$(dirname "$PROBE")" -c "$PROBE" -o "$out/probe_$stem.o" >>"$log" 2>&1 &&
        "$CXX" "$out/probe_$stem.o" $objs -pthread -ldl -o "$out/probe_$stem" >>"$log" 2>&1; then
        echo "ok   probe $out/probe_$stem"
        exit 0
    fi
    echo "FAIL probe $stem (log: $log)"
    exit 1
fi

for s in $SOC_LIST; do
    out="$BUILD_DIR/$s"
    mkdir -p "$out"
    read -r -a flags <<<"$(soc_flags "$s")"
    objs=()
    for e in $ENTRIES; do
        name="${e%%:*}"; tiling="${e#*:}"
        if "$CXX" "${KFLAGS[@]}" "${flags[@]}" -include "$CHECK_DIR/bnb_op_tiling_macros.h" \
            -DBNB_API_CHECK_TILING_STRUCT="$tiling" -c "$KERNEL_DIR/$name.cpp" -o "$out/$name.o" \
            >"$out/$name.log" 2>&1; then
            echo "ok   $s kernel $name"
            objs+=("$out/$name.o")
        else
            log_fail "$s kernel $name" "$out/$name.log"
        fi
    done
    # The simulator's API, called the same way against the real headers.
    if "$CXX" "${KFLAGS[@]}" "${flags[@]}" -fsyntax-only "$CHECK_DIR/sim_api_probe.cpp" >"$out/sim_api_probe.log" 2>&1; then
        echo "ok   $s sim-api probe"
    else
        log_fail "$s sim-api probe" "$out/sim_api_probe.log"
    fi
    if soc_runs "$s" && [ "${#objs[@]}" = 3 ]; then
        : >"$out/launcher.log"
        if rt="$(runtime_objs "$s" "$out" "$out/launcher.log")" &&
            "$CXX" "${KFLAGS[@]}" "${flags[@]}" -c "$CHECK_DIR/bnb_api_launch.cpp" -o "$out/bnb_api_launch.o" \
                >>"$out/launcher.log" 2>&1 &&
            "$CXX" "${objs[@]}" $rt "$out/bnb_api_launch.o" -pthread -ldl -o "$out/bnb_api_launch" \
                >>"$out/launcher.log" 2>&1; then
            echo "ok   $s launcher $out/bnb_api_launch"
        else
            log_fail "$s launcher" "$out/launcher.log"
        fi
    fi
done

# The simulator against itself (the same probe), so the probe stays honest.
if "$CXX" -std=c++17 -fsyntax-only -I"$SIM_DIR" -I"$ROOT/ascend_impl/perf_model" -I"$KERNEL_DIR" "$CHECK_DIR/sim_api_probe.cpp" \
    >"$BUILD_DIR/sim_api_probe_sim.log" 2>&1; then
    echo "ok   sim sim-api probe"
else
    log_fail "sim sim-api probe" "$BUILD_DIR/sim_api_probe_sim.log"
fi

# ---- op_host against the public registration / tiling / logging headers ----
METADEF="${ASCEND_METADEF_PATH:-}"
GE="${ASCEND_GE_PATH:-}"
if [ -n "$METADEF" ] && [ -n "$GE" ]; then
    HFLAGS=(-std=c++17 -w -fsyntax-only -I"$CHECK_DIR/host_stubs" -I"$METADEF/inc/external/asc"
            -I"$METADEF/inc/external" -I"$METADEF/inc" -I"$METADEF/pkg_inc" -I"$METADEF/base"
            -I"$GE/inc/graph_metadef/external" -I"$GE/inc/graph_metadef" -I"$GE/inc/external" -I"$GE/inc"
            -I"$DEVKIT/include/utils" -I"$DEVKIT/include" -I"$HOST_DIR")
    if [ -n "${ASCEND_OPBASE_PATH:-}" ]; then
        HFLAGS+=(-I"$ASCEND_OPBASE_PATH/include" -I"$ASCEND_OPBASE_PATH/include/op_common")
    fi
    for f in batch_norm_backward batch_norm_reduce_backward batch_norm_elemt_backward; do
        if "$CXX" "${HFLAGS[@]}" "$HOST_DIR/$f.cpp" >"$BUILD_DIR/host_$f.log" 2>&1; then
            echo "ok   op_host $f"
        else
            log_fail "op_host $f" "$BUILD_DIR/host_$f.log"
        fi
    done
else
    echo "skip op_host: set ASCEND_METADEF_PATH and ASCEND_GE_PATH (public metadef and ge repositories)"
fi
exit $fail
