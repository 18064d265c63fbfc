// What the vector core the kernel is compiled for offers (device compiler
// macros only; no Ascend C header needed). Included by the kernel and by the
// real-API CPU launcher (tests/ascend_tools/api_check), which takes the SoC features
// of its tiling input from here.
#ifndef BATCH_NORM_SOC_FEATURES_H
#define BATCH_NORM_SOC_FEATURES_H

// What the core offers, from the device compiler's architecture macro:
// __NPU_ARCH__ 1001 (dav-c100, ascend910) and 2002 (dav-m200, ascend310p) are
// Atlas training / inference; older toolkits say __CCE_AICORE__ 100 / 200.
// Those cores have no hardware SyncAll (the software one, yes), no DataCacheCleanAndInvalid, no
// DataCopyPad(Local, Global, DataCopyExtParams, DataCopyPadExtParams) (dav-c100)
// and no float <-> bfloat16 Cast, so the calls are compiled out there (the host
// tiling never asks for them on those SoCs). Without either macro (the
// project's CPU build, tests/ascend_tools/sim) everything is compiled and the CPU
// build refuses, at run time, what the simulated SoC lacks.
#if (defined(__NPU_ARCH__) && (__NPU_ARCH__ == 1001 || __NPU_ARCH__ == 2002)) || \
    (!defined(__NPU_ARCH__) && defined(__CCE_AICORE__) && (__CCE_AICORE__ == 100 || __CCE_AICORE__ == 200))
#define BNB_SOC_LEGACY 1
#else
#define BNB_SOC_LEGACY 0
#endif
#define BNB_SOC_HAS_SYNC_ALL (!BNB_SOC_LEGACY)
// The software SyncAll(gmWorkspace, ubWorkspace, usedCores): on every line (SoftSyncAllImpl in the
// dav-c100, dav-m200, dav-c220 and dav-3510 headers); the tiling asks for it (softSync) only where
// the hardware one is missing.
#define BNB_SOC_HAS_SOFT_SYNC_ALL 1
#define BNB_SOC_HAS_DCCI (!BNB_SOC_LEGACY)
#define BNB_SOC_HAS_DATA_COPY_PAD (!BNB_SOC_LEGACY)
#define BNB_SOC_HAS_BF16 (!BNB_SOC_LEGACY)
// MulAddDst / FusedMulAdd: on every line but dav-c100 (ascend910), whose headers report them not
// supported; the kernel takes them only where the tiling says so (mulAdd).
#if (defined(__NPU_ARCH__) && __NPU_ARCH__ == 1001) || \
    (!defined(__NPU_ARCH__) && defined(__CCE_AICORE__) && __CCE_AICORE__ == 100)
#define BNB_SOC_HAS_MUL_ADD 0
#else
#define BNB_SOC_HAS_MUL_ADD 1
#endif
// ReduceRepeat<ReduceType::SUM> on float (a sum per repeat: the single pass's per-channel sums of a
// sub-group in one instruction): Atlas training (dav-c100, ascend910) has it for half only; the kernel
// takes it only where the tiling says so (spSegSum).
#define BNB_SOC_HAS_REDUCE_REPEAT BNB_SOC_HAS_MUL_ADD
// ReduceSum on float (the per-unit and per-channel sums): Atlas training (dav-c100, ascend910) has it for
// half only, as ReduceRepeat (ReduceSum.md, 数据类型: "Atlas 训练系列产品，支持half"); there the sums are
// a tree of float Adds to one block of lane partials whose lanes the scalar unit adds (BlockTreeSum,
// tiling reduceSum 0).
#define BNB_SOC_HAS_FLOAT_REDUCE_SUM BNB_SOC_HAS_REDUCE_REPEAT
// The masked repeat form of the UB -> UB Copy, with Brcb the single pass's per-block broadcasts (spSegSum):
// not on Atlas training / inference. (Brcb alone is documented for the Atlas inference AI Core, Brcb.md,
// not for Atlas training; spSegSum needs both.)
#define BNB_SOC_HAS_BLOCK_COPY (!BNB_SOC_LEGACY)
// Gather (dst[i] = src[(srcBaseAddr + srcOffset[i]) / sizeof(T)], Gather.md): on every line but Atlas
// training (dav-c100, ascend910: "不支持"); half and float on the Atlas inference AI Core (dav-m200).
#define BNB_SOC_HAS_GATHER BNB_SOC_HAS_MUL_ADD
// ReduceDataBlock<ReduceType::SUM> (BlockReduceSum) on float, a sum per 32-byte block (the 7x7 lane sums,
// LaneSums): Atlas training (dav-c100) has it for half only (ReduceDataBlock.md, 数据类型); the kernel takes
// it where it takes Gather (LaneGather), which no line has without it.
#define BNB_SOC_HAS_BLOCK_REDUCE_SUM BNB_SOC_HAS_REDUCE_REPEAT
#if BNB_SOC_HAS_GATHER && !BNB_SOC_HAS_BLOCK_REDUCE_SUM
#error "LaneGather's lane sums need ReduceDataBlock on float wherever Gather is"
#endif
// The single pass's segmented sums and per-block broadcasts (tiling spSegSum) need both.
#define BNB_SOC_HAS_SEG_SUM (BNB_SOC_HAS_REDUCE_REPEAT && BNB_SOC_HAS_BLOCK_COPY)

// Marks for the performance model (ascend_impl/perf_model/sim_perf.h defines
// them in the CPU build, before this header): the combine of the per-channel
// sums begins / ends on this core's timeline. Nothing on a board.
#ifndef BNB_PERF_COMBINE_BEGIN
#define BNB_PERF_COMBINE_BEGIN() ((void)0)
#define BNB_PERF_COMBINE_END() ((void)0)
#endif

#endif
