// Project stand-in for CANN's closed CPU-debug library header of the same
// name (tikicpulib). The public asc-devkit headers include it when built with
// -DASCENDC_CPU_DEBUG=1; it supplies the compiler keywords, the element types
// and the intrinsic layer those headers are written against. Only what the
// headers and our kernels need is here. Not part of the operator: used by
// scripts/check_ascend_api.sh and tests/ut/ascend_api only.
#ifndef BNB_API_CHECK_STUB_DEF_H
#define BNB_API_CHECK_STUB_DEF_H
#include <cstdint>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <string>
#include <vector>
#include <iostream>
#include <type_traits>

// ---- compiler keywords of the device compiler: no meaning on the CPU ----
#define __aicore__
#define __global__
#define __host__
#define __host_aicore__
#define __simd_callee__
#define __simd_vf__
#define __simt_callee__
#define __simt_vf__
#define __sync_noalias__
#define __no_simd_vf_fusion__
#define __gm__
#define __ubuf__
#define __cbuf__
#define __ca__
#define __cb__
#define __cc__
#define __fbuf__
#define __biasbuf__
#define __ssbuf__
#define __in_pipe__(...)
#define __out_pipe__(...)
#define __inout_pipe__(...)
#define ASCENDC_HOST
#define ASCENDC_AICORE
#define ASCENDC_HOST_AICORE
#define __BLOCK_LOCAL__
#define __WORKGROUP_LOCAL__
#ifndef __disable_kernel_type_autoinfer__
#define __disable_kernel_type_autoinfer__
#endif

#include "bnb_stub_types.h"
#include "bnb_stub_intrinsics.h"
#endif
