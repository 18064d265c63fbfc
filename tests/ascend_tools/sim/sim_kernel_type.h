// KernelMetaType of the Ascend C API (CPU build): the kernel declares its
// type with KERNEL_TASK_TYPE_DEFAULT (see kernel_operator.h).
#ifndef BNB_SIM_KERNEL_TYPE_H
#define BNB_SIM_KERNEL_TYPE_H
#include <cstdint>

enum KernelMetaType : uint8_t {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
    KERNEL_TYPE_AICORE,
    KERNEL_TYPE_VECTORCORE,
    KERNEL_TYPE_MIX_AICORE,
    KERNEL_TYPE_MIX_VECTOR_CORE,
    KERNEL_TYPE_MAX,
};
#endif
