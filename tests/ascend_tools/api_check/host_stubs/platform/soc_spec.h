// Project stand-in for CANN's closed platform header of the same name, which
// the public tiling header tiling/platform/platform_ascendc.h includes for the
// NpuArch enum (PlatformAscendC::GetCurNpuArch). The op_host sources do not
// use it; only the cores of the YAML's SoC lines are named.
#ifndef BNB_API_CHECK_SOC_SPEC_H
#define BNB_API_CHECK_SOC_SPEC_H
#include <cstdint>

enum class NpuArch : uint32_t {
    DAV_1001 = 1001,  // ascend910
    DAV_2002 = 2002,  // ascend310p
    DAV_2201 = 2201,  // ascend910b, ascend910_93
    DAV_3510 = 3510,  // ascend950
};
#endif
