// The tensors of an aot call, checked before any memory is touched: every
// entry point (aot_entry.cpp, bn_double_backward_entry.cpp,
// bn_sync_entry.cpp) reads its (nparam, params, ndims, shapes, dtypes)
// through these, so a call whose shapes, dtypes or pointers do not fit
// together returns an error code (spec::Error) instead of reading out of
// bounds. Slots, dtype names and error codes: bn_spec.gen.h; the
// [outer, C, inner] view: geometry.h.
#ifndef MS_BN_GRAD_AOT_ARGS_H_
#define MS_BN_GRAD_AOT_ARGS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <initializer_list>

#include "bn_spec.gen.h"
#include "element_io.h"
#include "geometry.h"
#include "num_threads.h"
#include "tensor.h"
#include "thread_pool.h"

namespace bn_grad {
namespace aot {

using namespace spec;  // NOLINT: the error codes (kOk, ...)

inline DType ParseDtype(const char *s) {
  if (s == nullptr) return DType::kNone;
  for (const DtypeName &d : kDtypeNames) {
    if (std::strcmp(s, d.name) == 0) return d.dtype;
  }
  return DType::kNone;
}

// The aot dtype string of d (the prototypes' names); "none" for a dtype the kernels do not take.
inline const char *DtypeNameOf(DType d) {
  for (const DtypeName &n : kDtypeNames) {
    if (n.dtype == d) return n.name;
  }
  return "none";
}

// The dtypes the kernels take (the prototypes' names), as "float16, bfloat16, ...", for messages.
inline std::string DtypeNamesList() {
  std::string out;
  for (const DtypeName &n : kDtypeNames) out += std::string(out.empty() ? "" : ", ") + n.name;
  return out;
}

// The arguments of an aot call, by slot.
struct Call {
  int nparam;
  void **params;
  int *ndims;
  int64_t **shapes;
  const char **dtypes;

  // kOk when every array is there and there are num_slots of each.
  Error Check(int num_slots) const {
    const bool ok = params != nullptr && ndims != nullptr && shapes != nullptr && dtypes != nullptr &&
                    nparam == num_slots;
    return ok ? kOk : kBadParamCount;
  }
  // MindSpore passes dtype "none" for an absent optional input.
  bool NoneDtype(int slot) const { return dtypes[slot] == nullptr || std::strcmp(dtypes[slot], "none") == 0; }
  // An absent optional input: dtype "none", or (a direct caller) a null pointer with no dims.
  bool Absent(int slot) const { return NoneDtype(slot) || (params[slot] == nullptr && ndims[slot] == 0); }
  DType Dtype(int slot) const { return ParseDtype(dtypes[slot]); }
};

// The start of every entry: the call has its num_slots tensors, and those at
// `slots` (activations: the first sets the shape and the dtype, the others
// must match it) are [outer, C, inner]: *g, their dtype, their element count.
inline Error ParseActivations(const Call &call, int num_slots, std::initializer_list<int> slots,
                              bool channel_last, Geometry *g, DType *dtype, int64_t *numel) {
  const Error checked = call.Check(num_slots);
  if (checked != kOk) return checked;
  const int first = *slots.begin();
  const int rank = call.ndims[first];
  if (!RankSupported(rank)) return kBadRank;
  const int64_t *shape = call.shapes[first];
  for (int s : slots) {
    if (!SameShape(rank, shape, call.ndims[s], call.shapes[s])) return kBadShape;
  }
  *dtype = call.Dtype(first);
  if (*dtype == DType::kNone) return kBadDtype;
  for (int s : slots) {
    if (call.Dtype(s) != *dtype) return kBadDtype;
  }
  const Error rc = ParseGeometry(rank, shape, channel_last, g, numel);
  if (rc != kOk) return rc;
  if (*numel > 0) {
    for (int s : slots) if (call.params[s] == nullptr) return kMissingTensor;
  }
  return kOk;
}

// A (C,) input: absent (kOk when `optional`, else kMissingTensor) or (C,);
// with `empty_ok`, (0,) also means absent.
inline Error ParseChannelInput(const Call &call, int slot, int64_t C, bool optional, bool empty_ok,
                               ConstTensor *out) {
  *out = ConstTensor{};
  if (call.Absent(slot)) return optional ? kOk : kMissingTensor;
  const DType d = call.Dtype(slot);
  if (d == DType::kNone) return kBadDtype;
  if (call.ndims[slot] != 1) return kBadRank;
  if (call.shapes[slot][0] == 0 && empty_ok && C != 0) return kOk;
  if (call.shapes[slot][0] != C) return kBadShape;
  if (call.params[slot] == nullptr && C > 0) return kMissingTensor;
  *out = ConstTensor{call.params[slot], d};
  return kOk;
}

// A (C,) output.
inline Error ParseChannelOutput(const Call &call, int slot, int64_t C, MutTensor *out) {
  const DType d = call.Dtype(slot);
  if (d == DType::kNone) return kBadDtype;
  if (call.ndims[slot] != 1 || call.shapes[slot][0] != C) return kBadShape;
  if (call.params[slot] == nullptr && C > 0) return kMissingTensor;
  *out = MutTensor{call.params[slot], d};
  return kOk;
}

// Zero-fills the first n elements of a masked output. A dx-sized fill moves
// as many bytes as computing dx, so large ones are split over the kernels'
// threads.
inline void ZeroFill(const MutTensor &t, int64_t n) {
  if (n <= 0 || t.data == nullptr) return;
  const size_t bytes = static_cast<size_t>(n) * ElemSize(t.dtype);
  constexpr size_t kChunk = size_t{1} << 20;
  const int threads = GetNumThreads();
  if (threads <= 1 || bytes < 4 * kChunk) {
    std::memset(t.data, 0, bytes);
    return;
  }
  const int64_t ntasks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
  char *base = static_cast<char *>(t.data);
  ThreadPool::Global().Run(ntasks, threads, [&](int64_t task) {
    const size_t off = static_cast<size_t>(task) * kChunk;
    std::memset(base + off, 0, std::min(kChunk, bytes - off));
  });
}

}  // namespace aot
}  // namespace bn_grad

#endif  // MS_BN_GRAD_AOT_ARGS_H_
