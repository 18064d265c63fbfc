// CPU build of the Ascend C API subset used by the BatchNormBackward kernel:
// runtime state (per-core context, SoC limits) and the error every violated
// hardware rule raises. Header-only; see tests/ascend_tools/sim/README.md.
#ifndef BNB_SIM_RUNTIME_H
#define BNB_SIM_RUNTIME_H
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#define __aicore__
#define __global__
#define __gm__
#define GM_ADDR uint8_t *

namespace AscendC {

// Raised for every rule the hardware (or the real headers) would refuse.
struct SimError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void SimCheck(bool ok, const std::string &what)
{
    if (!ok) {
        throw SimError(what);
    }
}

constexpr uint32_t ONE_BLK_SIZE = 32;       // bytes per data block (DataCopy and UB alignment unit)
constexpr uint32_t ONE_REPEAT_BYTE_SIZE = 256;  // bytes one vector repeat processes

// What differs between SoCs for this kernel.
struct SimSoc {
    const char *name;
    uint32_t ubBytes;       // Unified Buffer per vector core
    uint32_t coreNum;       // vector cores
    bool hasDataCopyPad;    // DataCopyPad exists (not on Atlas training / Atlas inference AI Core)
    bool hasBf16;
    bool hasSyncAll;        // SyncAll (soft and hard forms): Atlas A2 / A3 / 350 only
    bool hasDcci;           // DataCacheCleanAndInvalid: Atlas A2 / A3 / 350 only
};

inline const std::vector<SimSoc> &SimSocTable()
{
    static const std::vector<SimSoc> table = {
        // UB per vector core: Atlas training (910) and Atlas inference (310P)
        // AI Core 256 KB; Atlas A2 / A3 (910B, 910_93) AIV 192 KB; Ascend 950
        // (Atlas 350) AIV 256 KB. The kernel never hard-codes these: the host
        // tiling reads GetCoreMemSize(UB) from the platform on a board.
        {"ascend910", 256 * 1024, 32, false, false, false, false},
        {"ascend310p", 256 * 1024, 8, false, false, false, false},
        {"ascend910b", 192 * 1024, 48, true, true, true, true},
        {"ascend910_93", 192 * 1024, 48, true, true, true, true},
        {"ascend950", 256 * 1024, 64, true, true, true, true},
    };
    return table;
}

inline const SimSoc &SimFindSoc(const std::string &name)
{
    for (const auto &s : SimSocTable()) {
        if (name == s.name) {
            return s;
        }
    }
    throw SimError("unknown SoC '" + name + "'");
}

// One simulated vector core: its Unified Buffer and identity.
struct SimCore {
    SimSoc soc;
    uint32_t ubBytes = 0;
    uint32_t blockIdx = 0;
    uint32_t blockNum = 1;
    std::vector<uint8_t> ubStorage;
    uint8_t *ub = nullptr;  // 32-byte aligned start of the UB
    uint32_t ubUsed = 0;    // bytes handed out by TPipe::InitBuffer
    void *barrier = nullptr;  // SimBarrier shared by the cores of one launch
    int kernelType = -1;      // set by KERNEL_TASK_TYPE_DEFAULT

    void Reset(const SimSoc &s, uint32_t ubSize, uint32_t idx, uint32_t num)
    {
        soc = s;
        ubBytes = ubSize;
        blockIdx = idx;
        blockNum = num;
        ubStorage.assign(ubSize + ONE_BLK_SIZE, 0xA5);  // garbage, as a real UB holds
        auto base = reinterpret_cast<uintptr_t>(ubStorage.data());
        ub = ubStorage.data() + ((ONE_BLK_SIZE - base % ONE_BLK_SIZE) % ONE_BLK_SIZE);
        ubUsed = 0;
        kernelType = -1;
    }
    bool InUb(const void *p) const
    {
        auto a = static_cast<const uint8_t *>(p);
        return a >= ub && a < ub + ubBytes;
    }
    uint32_t UbOffset(const void *p) const
    {
        return static_cast<uint32_t>(static_cast<const uint8_t *>(p) - ub);
    }
};

inline SimCore &SimThisCore()
{
    thread_local SimCore core;
    return core;
}

inline int64_t GetBlockIdx() { return SimThisCore().blockIdx; }
inline int64_t GetBlockNum() { return SimThisCore().blockNum; }

// Custom-op projects reserve a system area at the head of the workspace; the
// CPU build has none, so the user area starts at the pointer itself.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }

}  // namespace AscendC

#endif
