// The tile geometry of the column walks (channel-last tensors and short channel runs), shared by
// the forward (bn_forward_column.cpp) and the backward (bn_column_path.cpp): a tensor is cut the
// same way in both, so the two walks keep the same cache behaviour and the same summation order
// per column.
#pragma once

#include <cstdint>

namespace bn_grad {
namespace column {

constexpr int64_t kColBlock = 256;            // columns per tile: the fused walks, and tensors below kWideMinBytes (multiple of 8)
constexpr int64_t kWideBlock = 1024;          // columns per tile of a large tensor's chunked walk (multiple of 8)
constexpr int64_t kWideMinBytes = 1 << 20;    // input at least this big: kWideBlock (docs/performance.md)
constexpr int64_t kColTileElems = 32768;      // target elements per tile
constexpr int64_t kColFlushRows = 256;        // float rows summed before a flush to double
constexpr int64_t kColMaxPartials = 1 << 21;  // bound on chunks * L partial sums

}  // namespace column
}  // namespace bn_grad
