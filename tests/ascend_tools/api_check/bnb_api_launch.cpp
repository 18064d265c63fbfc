// Launcher of the real-API CPU build (scripts/check_ascend_api.sh,
// tests/ut/ascend_api): runs one case of BatchNormBackward or of a
// SyncBatchNorm step after the unchanged host tiling, with the kernel entry
// compiled against the public asc-devkit headers in CPU-debug mode for one SoC.
// As CANN's CPU-debug runner does, every core is a forked process (the
// headers keep per-core state in process-wide singletons); GM buffers are
// shared memory and SyncAll is a process-shared barrier (bnb_stub_runtime.cpp).
//
// Usage: bnb_api_launch CASE_FILE OUT_FILE. CASE_FILE: 32 int64 header words
// (see Header), then 10 input buffers, each an int64 byte length (0: absent)
// and its bytes. OUT_FILE: 5 output buffers in the same form. Exit codes:
// 0 ran, 1 the tiling refused the case (reason on stderr), 2 a core failed.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>
#include "kernel_operator.h"
#include "batch_norm_soc_features.h"
#include "batch_norm_sync_tiling_calc.h"
#include "bnb_stub_runtime.h"

extern "C" void batch_norm_backward(uint8_t *grad_out, uint8_t *input, uint8_t *weight, uint8_t *running_mean,
                                    uint8_t *running_var, uint8_t *save_mean, uint8_t *save_invstd,
                                    uint8_t *grad_input, uint8_t *grad_weight, uint8_t *grad_bias,
                                    uint8_t *workspace, uint8_t *tiling);
extern "C" void batch_norm_reduce_backward(uint8_t *grad_out, uint8_t *input, uint8_t *mean, uint8_t *invstd,
                                           uint8_t *weight, uint8_t *sum_dy, uint8_t *sum_dy_xmu,
                                           uint8_t *grad_weight, uint8_t *grad_bias, uint8_t *workspace,
                                           uint8_t *tiling);
extern "C" void batch_norm_elemt_backward(uint8_t *grad_out, uint8_t *input, uint8_t *mean, uint8_t *invstd,
                                          uint8_t *weight, uint8_t *sum_dy, uint8_t *sum_dy_xmu, uint8_t *counter,
                                          uint8_t *grad_input, uint8_t *workspace, uint8_t *tiling);

namespace {
enum Header {
    H_MODE = 0, H_RANK, H_SHAPE, H_CHANNEL_LAST = H_SHAPE + 8, H_DTYPE, H_TRAINING, H_EPS_BITS, H_OUTPUT_MASK,
    H_PRESENT, H_PARAM_F32, H_GRAD_PARAM_F32, H_UB_BYTES, H_CORE_NUM, H_COUNTER_LEN, H_COUNTER_TYPE, H_WORDS = 32
};
enum Input { I_GRAD_OUT = 0, I_INPUT, I_PARAM0, I_SUM_DY = I_PARAM0 + bnb::PARAM_COUNT, I_SUM_DY_XMU, I_COUNTER,
             I_COUNT };
enum Output { O_GRAD_INPUT = 0, O_GRAD_WEIGHT, O_GRAD_BIAS, O_SUM_DY, O_SUM_DY_XMU, O_COUNT };
constexpr int MODE_FULL = 0, MODE_REDUCE = 1, MODE_ELEMT = 2;

// GM buffer visible to every forked core.
uint8_t *SharedAlloc(size_t bytes, uint8_t fill)
{
    const size_t n = bytes ? bytes : 64;
    void *p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        std::perror("mmap");
        std::exit(2);
    }
    std::memset(p, fill, n);
    return static_cast<uint8_t *>(p);
}

bool ReadBuffer(std::ifstream &f, std::vector<uint8_t> &out, bool &present)
{
    int64_t len = 0;
    if (!f.read(reinterpret_cast<char *>(&len), sizeof(len)) || len < 0) {
        return false;
    }
    present = len > 0;
    out.resize(size_t(len));
    return len == 0 || bool(f.read(reinterpret_cast<char *>(out.data()), len));
}
}  // namespace

int main(int argc, char **argv)
{
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s CASE_FILE OUT_FILE\n", argv[0]);
        return 2;
    }
    std::ifstream f(argv[1], std::ios::binary);
    int64_t h[H_WORDS] = {};
    if (!f.read(reinterpret_cast<char *>(h), sizeof(h))) {
        std::fprintf(stderr, "bad case file\n");
        return 2;
    }
    std::vector<uint8_t> in[I_COUNT];
    bool present[I_COUNT] = {};
    for (int i = 0; i < I_COUNT; ++i) {
        if (!ReadBuffer(f, in[i], present[i])) {
            std::fprintf(stderr, "bad case file (buffer %d)\n", i);
            return 2;
        }
    }
    const int mode = int(h[H_MODE]);
    bnb::TilingInput ti;
    ti.shape.assign(h + H_SHAPE, h + H_SHAPE + h[H_RANK]);
    ti.channelLast = h[H_CHANNEL_LAST] != 0;
    ti.dtype = uint32_t(h[H_DTYPE]);
    ti.training = h[H_TRAINING] != 0;
    const uint32_t epsBits = uint32_t(h[H_EPS_BITS]);
    std::memcpy(&ti.eps, &epsBits, sizeof(float));
    ti.outputMask = uint32_t(h[H_OUTPUT_MASK]);
    ti.present = uint32_t(h[H_PRESENT]);
    ti.paramFloat32 = uint32_t(h[H_PARAM_F32]);
    ti.gradParamFloat32 = h[H_GRAD_PARAM_F32] != 0;
    // UB: the headers' size for this core unless the case asks for less; the
    // SoC features: what the kernel was compiled with (batch_norm_soc_features.h).
    ti.ubBytes = h[H_UB_BYTES] > 0 ? uint32_t(h[H_UB_BYTES]) : uint32_t(AscendC::TOTAL_UB_SIZE);
    ti.coreNum = uint32_t(h[H_CORE_NUM] > 0 ? h[H_CORE_NUM] : 1);
    ti.hasDataCopyPad = BNB_SOC_HAS_DATA_COPY_PAD;
    ti.hasSyncAll = BNB_SOC_HAS_SYNC_ALL;
    ti.hasSoftSyncAll = BNB_SOC_HAS_SOFT_SYNC_ALL;
    ti.hasDcci = BNB_SOC_HAS_DCCI;
    ti.hasBf16 = BNB_SOC_HAS_BF16;
    ti.hasMulAdd = BNB_SOC_HAS_MUL_ADD;
    ti.hasReduceRepeat = BNB_SOC_HAS_REDUCE_REPEAT;
    ti.hasBlockCopy = BNB_SOC_HAS_BLOCK_COPY;
    ti.eventIds = uint32_t(AscendC::QUE_MAX_EVENT);  // the headers' own

    bnb::BatchNormBackwardTilingData full{};
    bnb::BatchNormSyncTilingData sync{};
    std::string why;
    if (mode == MODE_FULL) {
        why = bnb::ComputeTiling(ti, full);
    } else {
        why = bnb::ComputeSyncTiling(mode == MODE_REDUCE, ti, h[H_COUNTER_LEN], uint32_t(h[H_COUNTER_TYPE]), sync);
    }
    if (!why.empty()) {
        std::fprintf(stderr, "tiling: %s\n", why.c_str());
        return 1;
    }
    const bnb::BatchNormBackwardTilingData &t = mode == MODE_FULL ? full : sync.base;
    const uint64_t wsBytes = mode == MODE_FULL ? bnb::WorkspaceBytes(full)
                                               : bnb::SyncWorkspaceBytes(mode == MODE_REDUCE, sync);
    std::printf("ub_bytes=%u used_cores=%u layout=%u units=%lld groups=%lld use_pad=%u cross_core=%u flat=%u shift_last=%u "
                "soft_sync=%u\n",
                ti.ubBytes, t.usedCores, t.layout, (long long)t.units, (long long)t.groups, t.usePad, t.crossCore, t.flat,
                t.shiftLast, t.softSync);
    std::fflush(stdout);

    // Inputs and outputs in shared GM; outputs start as 0xFF bytes (NaN), so
    // an element the kernel does not write cannot pass.
    uint8_t *gmIn[I_COUNT] = {};
    for (int i = 0; i < I_COUNT; ++i) {
        if (present[i]) {
            gmIn[i] = SharedAlloc(in[i].size(), 0);
            std::memcpy(gmIn[i], in[i].data(), in[i].size());
        }
    }
    uint64_t total = 1;
    for (int64_t d : ti.shape) total *= uint64_t(d);
    const int64_t c = ti.channelLast ? ti.shape.back() : ti.shape[1];
    const uint64_t eb = bnb::DtypeBytes(ti.dtype);
    const uint64_t gradParamBytes = (ti.gradParamFloat32 ? 4 : eb) * uint64_t(c);
    const uint64_t sumBytes = ((ti.paramFloat32 >> bnb::SAVE_MEAN & 1) ? 4 : eb) * uint64_t(c);
    uint64_t outBytes[O_COUNT] = {};
    if (mode != MODE_REDUCE) outBytes[O_GRAD_INPUT] = total * eb;
    if (mode != MODE_ELEMT) outBytes[O_GRAD_WEIGHT] = outBytes[O_GRAD_BIAS] = gradParamBytes;
    if (mode == MODE_REDUCE) outBytes[O_SUM_DY] = outBytes[O_SUM_DY_XMU] = sumBytes;
    uint8_t *gmOut[O_COUNT] = {};
    for (int o = 0; o < O_COUNT; ++o) {
        if (outBytes[o]) gmOut[o] = SharedAlloc(outBytes[o], 0xFF);
    }
    uint8_t *workspace = SharedAlloc(wsBytes + 32, 0xA5);  // garbage, as the framework's workspace holds
    uint8_t *tiling = SharedAlloc(sizeof(sync), 0);
    if (mode == MODE_FULL) {
        std::memcpy(tiling, &full, sizeof(full));
    } else {
        std::memcpy(tiling, &sync, sizeof(sync));
    }

    bnb_stub::LaunchConfig launch;
    launch.blockNum = t.usedCores;
    launch.scheduleMode = bnb::ScheduleMode(t);  // what the op_host tiling sets
    launch.kernel = [&]() {
        uint8_t **p = gmIn + I_PARAM0;
        if (mode == MODE_FULL) {
            batch_norm_backward(gmIn[I_GRAD_OUT], gmIn[I_INPUT], p[0], p[1], p[2], p[3], p[4], gmOut[O_GRAD_INPUT],
                                gmOut[O_GRAD_WEIGHT], gmOut[O_GRAD_BIAS], workspace, tiling);
        } else if (mode == MODE_REDUCE) {
            batch_norm_reduce_backward(gmIn[I_GRAD_OUT], gmIn[I_INPUT], p[bnb::SAVE_MEAN], p[bnb::SAVE_INVSTD],
                                       p[bnb::WEIGHT], gmOut[O_SUM_DY], gmOut[O_SUM_DY_XMU], gmOut[O_GRAD_WEIGHT],
                                       gmOut[O_GRAD_BIAS], workspace, tiling);
        } else {
            batch_norm_elemt_backward(gmIn[I_GRAD_OUT], gmIn[I_INPUT], p[bnb::SAVE_MEAN], p[bnb::SAVE_INVSTD],
                                      p[bnb::WEIGHT], gmIn[I_SUM_DY], gmIn[I_SUM_DY_XMU], gmIn[I_COUNTER],
                                      gmOut[O_GRAD_INPUT], workspace, tiling);
        }
    };
    const std::string failure = bnb_stub::RunCores(launch);
    if (!failure.empty()) {
        std::fprintf(stderr, "%s\n", failure.c_str());
        return 2;
    }
    std::ofstream out(argv[2], std::ios::binary);
    for (int o = 0; o < O_COUNT; ++o) {
        const int64_t len = int64_t(outBytes[o]);
        out.write(reinterpret_cast<const char *>(&len), sizeof(len));
        if (len) out.write(reinterpret_cast<const char *>(gmOut[o]), len);
    }
    return out ? 0 : 2;
}
