// MindSpore's CPU op plugin ABI: our kernels as MindSpore's own BatchNormExt
// and BatchNormGradExt (the aclnnBatchNorm / aclnnBatchNormBackward pair
// behind mint.nn.BatchNorm*, mint.nn.functional.batch_norm and the native
// route of converted networks).
//
// MindSpore opens the library named by MS_OP_PLUGIN_PATH once per process
// (RTLD_LAZY | RTLD_LOCAL; the same file as the ops.Custom kernel library, so
// one copy of the thread pool and the thread count serves both routes), asks
// GetRegisteredOpCount / GetAllRegisteredOps which primitives it provides, and
// then launches each by its primitive's name with the aot argument arrays:
// the inputs (tensors and scalars, in the primitive's order), then the
// outputs. Scalars are read through the KernelInputInfo interface of the
// installed MindSpore's own header (MS_BN_GRAD_MS_PLUGIN_HEADER, passed by
// cpu_kernel/build.py; std-only). Launches run on MindSpore's device thread
// (PYNATIVE) or its kernel actors (GRAPH): the compute uses the persistent
// pool, never a thread of its own per call.
//
// A user's own plugin is chained, not replaced: cpu_kernel/plugin.py builds a
// small library that needs both ours and theirs (op_plugin_chain.cpp); the
// dynamic linker then finds each primitive's function in the first library
// that has it, ours first.
//
// Every array is checked before any memory is touched (aot_args.h); a tensor
// input that is a strided view is read through a dense copy (DenseInputs); a
// call that does not fit returns a nonzero code, which MindSpore raises as an
// error; nothing here throws into MindSpore.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "aot_args.h"
#include "bn_forward.h"
#include "bn_spec.gen.h"
#include "entry_runs.h"

#ifdef MS_BN_GRAD_MS_PLUGIN_HEADER
#include MS_BN_GRAD_MS_PLUGIN_HEADER

namespace bn_grad {
namespace plugin {
namespace {

using mindspore::kernel::op_plugin::KernelInputInfo;
using namespace aot;  // NOLINT: Call, the parse helpers, the error codes

std::atomic<int64_t> g_launches{0};

// MindSpore's argument order (its op definitions of BatchNormExt and
// BatchNormGradExt; checked by tests/ut/test_op_plugin.py against the
// installed release's Python signature).
namespace ext {
enum Slot : int {
  INPUT = 0, WEIGHT, BIAS, RUNNING_MEAN, RUNNING_VAR,  // tensors, all but input optional
  TRAINING, MOMENTUM, EPS,                            // scalars
  OUTPUT, SAVE_MEAN, SAVE_INVSTD,                     // outputs
  NUM_SLOTS,
};
}  // namespace ext
namespace grad_ext {
enum Slot : int {
  DOUT = 0, INPUT, WEIGHT, RUNNING_MEAN, RUNNING_VAR, SAVED_MEAN, SAVED_RSTD,  // tensors
  TRAINING, EPS, OUTPUT_MASK,                                                  // scalars
  DX, DWEIGHT, DBIAS,                                                          // outputs
  NUM_SLOTS,
};
}  // namespace grad_ext

// Strided views (PYNATIVE hands them over as they are, e.g. a transposed
// tensor): each is gathered into a dense copy that the kernels read instead.
// MindSpore's pointer is the storage's start; element i0..i{n-1} lives at
// storage_offset + sum(i_d * strides[d]) elements from it.
class DenseInputs {
 public:
  // kOk, or kBadShape for a layout that does not fit its shape.
  Error Gather(KernelInputInfo *info, Call *call, int slot) {
    if (info->IsScalarInput(slot) || call->params[slot] == nullptr) return kOk;
    const auto layout = info->GetInputTensorLayout(slot);
    if (!layout.has_value()) return kOk;
    const int nd = call->ndims[slot];
    const std::vector<int64_t> &strides = layout->strides;
    if (strides.empty() && layout->storage_offset == 0) return kOk;
    std::vector<int64_t> st = strides;
    if (st.empty()) {  // dense but offset
      st.assign(nd, 1);
      for (int d = nd - 2; d >= 0; --d) st[d] = st[d + 1] * call->shapes[slot][d + 1];
    }
    if (static_cast<int>(st.size()) != nd) return kBadShape;
    bool dense = layout->storage_offset == 0;
    int64_t expect = 1, numel = 1;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t extent = call->shapes[slot][d];
      if (extent < 0 || st[d] < 0) return kBadShape;
      if (extent != 1 && st[d] != expect) dense = false;
      expect *= extent;
      numel *= extent;
    }
    if (dense) return kOk;
    const DType dt = call->Dtype(slot);
    if (dt == DType::kNone) return kBadDtype;
    const size_t es = ElemSize(dt);
    buffers_.emplace_back(static_cast<size_t>(numel) * es);
    char *dst = buffers_.back().data();
    const char *src = static_cast<const char *>(call->params[slot]) + layout->storage_offset * es;
    std::vector<int64_t> idx(nd, 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t off = 0;
      for (int d = 0; d < nd; ++d) off += idx[d] * st[d];
      std::memcpy(dst + static_cast<size_t>(i) * es, src + off * static_cast<int64_t>(es), es);
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < call->shapes[slot][d]) break;
        idx[d] = 0;
      }
    }
    call->params[slot] = dst;
    return kOk;
  }

 private:
  std::vector<std::vector<char>> buffers_;
};

// Dense copies of the tensor inputs in [first, last] that are strided views;
// the call's pointers are redirected to them.
Error GatherInputs(KernelInputInfo *info, Call *call, int first, int last, DenseInputs *dense,
                   std::vector<void *> *params) {
  params->assign(call->params, call->params + call->nparam);
  call->params = params->data();
  for (int s = first; s <= last; ++s) {
    const Error rc = dense->Gather(info, call, s);
    if (rc != kOk) return rc;
  }
  return kOk;
}

// A tensor slot MindSpore filled with None (an absent optional input) comes
// as a scalar of dtype "none" with a null pointer.
ConstTensor OptionalInput(const Call &call, int slot, int64_t channels, Error *rc) {
  ConstTensor t;
  if (*rc == kOk) *rc = ParseChannelInput(call, slot, channels, /*optional=*/true, /*empty_ok=*/false, &t);
  return t;
}

int RunForward(Call call, KernelInputInfo *info) {
  using namespace ext;  // NOLINT
  if (call.Check(NUM_SLOTS) != kOk || info == nullptr || info->GetInputSize() != OUTPUT) return kBadParamCount;
  if (!info->IsScalarInput(TRAINING) || !info->IsScalarInput(MOMENTUM) || !info->IsScalarInput(EPS)) {
    return kBadParamCount;
  }
  // The running statistics are updated in place: a strided view of them would be
  // updated in a copy, so those are refused (nn and mint cells hold them dense).
  DenseInputs dense;
  std::vector<void *> params;
  void *running[2] = {call.params[RUNNING_MEAN], call.params[RUNNING_VAR]};
  Error rc = GatherInputs(info, &call, INPUT, RUNNING_VAR, &dense, &params);
  if (rc != kOk) return rc;
  if (call.params[RUNNING_MEAN] != running[0] || call.params[RUNNING_VAR] != running[1]) return kBadShape;
  BnForwardArgs a;
  DType dt = DType::kNone;
  int64_t numel = 0;
  rc = ParseActivations(call, NUM_SLOTS, {INPUT, OUTPUT}, /*channel_last=*/false, &a, &dt, &numel);
  if (rc != kOk) return rc;
  a.input = ConstTensor{call.params[INPUT], dt};
  a.output = MutTensor{call.params[OUTPUT], dt};
  a.weight = OptionalInput(call, WEIGHT, a.channels, &rc);
  a.bias = OptionalInput(call, BIAS, a.channels, &rc);
  a.running_mean = OptionalInput(call, RUNNING_MEAN, a.channels, &rc);
  a.running_var = OptionalInput(call, RUNNING_VAR, a.channels, &rc);
  if (rc != kOk) return rc;
  if ((rc = ParseChannelOutput(call, SAVE_MEAN, a.channels, &a.save_mean)) != kOk) return rc;
  if ((rc = ParseChannelOutput(call, SAVE_INVSTD, a.channels, &a.save_invstd)) != kOk) return rc;
  a.training = info->GetBoolInput(TRAINING);
  a.momentum = info->GetFloatInput(MOMENTUM);
  a.eps = info->GetFloatInput(EPS);
  // BatchNormExt updates the running statistics in place (in training).
  if (a.training && a.running_mean.data != nullptr && a.running_var.data != nullptr) {
    a.running_mean_out = MutTensor{const_cast<void *>(a.running_mean.data), a.running_mean.dtype};
    a.running_var_out = MutTensor{const_cast<void *>(a.running_var.data), a.running_var.dtype};
  }
  try {
    return BnForward(a);
  } catch (...) {
    return kKernelFailed;
  }
}

int RunBackward(Call call, KernelInputInfo *info) {
  using namespace grad_ext;  // NOLINT
  namespace bnb = spec::batch_norm_backward;
  if (call.Check(NUM_SLOTS) != kOk || info == nullptr || info->GetInputSize() != DX) return kBadParamCount;
  if (!info->IsScalarInput(TRAINING) || !info->IsScalarInput(EPS) || !info->IsScalarInput(OUTPUT_MASK)) {
    return kBadParamCount;
  }
  DenseInputs dense;
  std::vector<void *> gathered;
  const Error rc = GatherInputs(info, &call, DOUT, SAVED_RSTD, &dense, &gathered);
  if (rc != kOk) return rc;
  bnb::Attrs attrs;
  attrs.training = info->GetBoolInput(TRAINING);
  attrs.eps = info->GetFloatInput(EPS);
  attrs.channel_last = false;  // BatchNormExt has no layout: the channel is dim 1
  const std::vector<int64_t> mask = info->GetIntVecInput(OUTPUT_MASK);
  if (mask.size() != static_cast<size_t>(bnb::kOutputMaskLength)) return kBadParamCount;
  for (int i = 0; i < bnb::kOutputMaskLength; ++i) attrs.output_mask[i] = mask[i] != 0;

  // Our BatchNormBackward takes the same tensors in the same order, without the scalars.
  constexpr int kTensors[bnb::NUM_SLOTS] = {DOUT, INPUT, WEIGHT, RUNNING_MEAN, RUNNING_VAR,
                                            SAVED_MEAN, SAVED_RSTD, DX, DWEIGHT, DBIAS};
  void *params[bnb::NUM_SLOTS];
  int ndims[bnb::NUM_SLOTS];
  int64_t *shapes[bnb::NUM_SLOTS];
  const char *dtypes[bnb::NUM_SLOTS];
  for (int i = 0; i < bnb::NUM_SLOTS; ++i) {
    params[i] = call.params[kTensors[i]];
    ndims[i] = call.ndims[kTensors[i]];
    shapes[i] = call.shapes[kTensors[i]];
    dtypes[i] = call.dtypes[kTensors[i]];
  }
  return RunBatchNormBackward(Call{bnb::NUM_SLOTS, params, ndims, shapes, dtypes}, attrs);
}

const char *kRegisteredOps[] = {"BatchNormExt", "BatchNormGradExt"};

}  // namespace
}  // namespace plugin
}  // namespace bn_grad

extern "C" {

int GetRegisteredOpCount() {
  return static_cast<int>(sizeof(bn_grad::plugin::kRegisteredOps) / sizeof(bn_grad::plugin::kRegisteredOps[0]));
}
const char **GetAllRegisteredOps() { return bn_grad::plugin::kRegisteredOps; }

int BatchNormExt(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void * /*stream*/,
                 void *kernel_info) {
  bn_grad::plugin::g_launches.fetch_add(1, std::memory_order_relaxed);
  try {
    return bn_grad::plugin::RunForward({nparam, params, ndims, shapes, dtypes},
                                       static_cast<bn_grad::plugin::KernelInputInfo *>(kernel_info));
  } catch (...) {  // std::bad_alloc of a dense copy: an error code, never an exception into MindSpore
    return bn_grad::spec::kKernelFailed;
  }
}

int BatchNormGradExt(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                     void * /*stream*/, void *kernel_info) {
  bn_grad::plugin::g_launches.fetch_add(1, std::memory_order_relaxed);
  try {
    return bn_grad::plugin::RunBackward({nparam, params, ndims, shapes, dtypes},
                                        static_cast<bn_grad::plugin::KernelInputInfo *>(kernel_info));
  } catch (...) {
    return bn_grad::spec::kKernelFailed;
  }
}

// How many times MindSpore launched one of the primitives above in this
// process: the self-test of cpu_kernel/plugin.py reads it to prove that our
// kernel, not another, ran.
int64_t MsBnGradPluginLaunches() { return bn_grad::plugin::g_launches.load(std::memory_order_relaxed); }

}  // extern "C"

#endif  // MS_BN_GRAD_MS_PLUGIN_HEADER
