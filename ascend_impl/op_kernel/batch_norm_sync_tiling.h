// Tiling data of the two SyncBatchNorm backward steps (BatchNormReduceBackward,
// BatchNormElemtBackward): the BatchNormBackward tiling (training, weight /
// save_mean / save_invstd as the per-channel inputs) plus the count vector
// of the elementwise step. Included by the host tiling and by the kernels.
#ifndef BATCH_NORM_SYNC_TILING_H
#define BATCH_NORM_SYNC_TILING_H
#include "batch_norm_backward_tiling.h"

namespace bnb {

// Element type of BatchNormElemtBackward's `counter`.
enum CounterType : uint32_t { COUNTER_FLOAT = 0, COUNTER_INT32 = 1, COUNTER_INT64 = 2 };

struct BatchNormSyncTilingData {
    BatchNormBackwardTilingData base;  // layout, tiles, units, cores, UB plan, output mask
    int64_t counterLen;                // ELEMT: entries of `counter` (one per rank)
    uint32_t counterType;              // ELEMT: CounterType
    uint32_t reserved;
};

}  // namespace bnb
#endif
