// Entry header of the project's CPU build of the Ascend C API: the kernel
// includes "kernel_operator.h" and compiles unchanged against this or the
// real asc-devkit headers.
#ifndef BNB_SIM_KERNEL_OPERATOR_H
#define BNB_SIM_KERNEL_OPERATOR_H
#include "sim_runtime.h"
#include "sim_kernel_type.h"
#include "sim_types.h"
#include "sim_tensor.h"
#include "sim_pipe.h"
#include "sim_copy.h"
#include "sim_vector.h"
#include "sim_vector_repeat.h"
#include "sim_sync.h"

// Kernel type of the launch (recorded per core; SyncAll() checks it).
#define KERNEL_TASK_TYPE_DEFAULT(type) (AscendC::SimThisCore().kernelType = (type))

// Tiling data arrives as raw bytes in GM; the registered struct is copied out.
#define REGISTER_TILING_DEFAULT(STRUCT) using SimTilingStruct_ = STRUCT
#define GET_TILING_DATA(var, tiling)                                     \
    SimTilingStruct_ var;                                                \
    std::memcpy(&var, reinterpret_cast<const void *>(tiling), sizeof(var))
#define GET_TILING_DATA_WITH_STRUCT(STRUCT, var, tiling) \
    STRUCT var;                                          \
    std::memcpy(&var, reinterpret_cast<const void *>(tiling), sizeof(var))
#endif
