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
// This file only adapts KernelInputInfo: the argument mapping, the checks
// (every array before any memory is touched) and the dense copies of strided
// views are ms_primitive_runs.cpp's, shared with the kernel-factory route
// (factory_kernels.cpp). A call that does not fit is refused before any
// memory is touched, with a std::runtime_error that names the reason (the
// prototypes' kernel_errors) and the tensors' dtypes and shapes: MindSpore
// runs the entry points inside its own exception handling (PYNATIVE: its
// device task, re-raised in Python; GRAPH: the kernel actor), where a bare
// return code would only say "return code: 2". Nothing else is thrown.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bn_spec.gen.h"
#include "ms_primitive_runs.h"

#ifdef MS_BN_GRAD_MS_PLUGIN_HEADER
#include MS_BN_GRAD_MS_PLUGIN_HEADER

namespace bn_grad {
namespace plugin {
namespace {

using mindspore::kernel::op_plugin::KernelInputInfo;

std::atomic<int64_t> g_launches{0};

namespace ext = spec::batch_norm_forward::mindspore_primitive;
namespace grad_ext = spec::batch_norm_backward::mindspore_primitive;

// The op plugin's KernelInputInfo as the arguments ms_primitive_runs.h reads.
class PluginArgs final : public primitive::PrimitiveArgs {
 public:
  explicit PluginArgs(KernelInputInfo *info) : info_(info) {}
  size_t NumInputs() const override { return info_->GetInputSize(); }
  bool IsScalar(int arg) const override { return info_->IsScalarInput(arg); }
  bool Bool(int arg) const override { return info_->GetBoolInput(arg); }
  double Float(int arg) const override { return info_->GetFloatInput(arg); }
  std::vector<int64_t> IntVec(int arg) const override { return info_->GetIntVecInput(arg); }
  std::optional<primitive::TensorLayout> Layout(int arg) const override {
    const auto layout = info_->GetInputTensorLayout(arg);
    if (!layout.has_value()) return std::nullopt;
    return primitive::TensorLayout{layout->strides, static_cast<int64_t>(layout->storage_offset)};
  }

 private:
  KernelInputInfo *info_;
};

// The tensor arguments of a launch as "input float32 (4, 3, 5, 5), weight none, ...", for messages;
// scalars are left out. Reads only what the arrays hold (every pointer checked).
std::string DescribeTensors(const aot::Call &call, const PluginArgs &args, int num_inputs,
                            const char *const *names) {
  std::string out;
  if (call.dtypes == nullptr || call.ndims == nullptr || call.shapes == nullptr) return "no argument arrays";
  const int n = std::min<int>({call.nparam, num_inputs, static_cast<int>(args.NumInputs())});
  for (int i = 0; i < n; ++i) {
    if (args.IsScalar(i)) continue;
    out += out.empty() ? "" : ", ";
    out += names[i];
    if (call.NoneDtype(i)) {
      out += " none";
      continue;
    }
    out += std::string(" ") + call.dtypes[i] + " (";
    const int nd = call.shapes[i] == nullptr ? 0 : call.ndims[i];
    for (int d = 0; d < nd; ++d) out += (d ? ", " : "") + std::to_string(call.shapes[i][d]);
    out += nd == 1 ? ",)" : ")";
  }
  return out;
}

template <int (*Run)(aot::Call, const primitive::PrimitiveArgs &), int kNumInputs, const char *const *kNames>
int Launch(const char *name, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
           void *kernel_info) {
  g_launches.fetch_add(1, std::memory_order_relaxed);
  if (kernel_info == nullptr) return spec::kBadParamCount;
  const PluginArgs args(static_cast<KernelInputInfo *>(kernel_info));
  const aot::Call call{nparam, params, ndims, shapes, dtypes};
  const int rc = Run(call, args);
  if (rc == spec::kOk) return rc;
  std::string what;
  try {
    what = DescribeTensors(call, args, kNumInputs, kNames);
  } catch (...) {  // a scalar reader of MindSpore's that throws: the reason alone
  }
  throw std::runtime_error(std::string("For '") + name + "' (mindspore_bn_grad's CPU op plugin), the arguments "
                           "were refused: " + spec::ErrorMessage(rc) + " (error code " + std::to_string(rc) +
                           "); " + what + ". Nothing was computed. Tensors taken: " + aot::DtypeNamesList() +
                           ", ranks " + std::to_string(spec::kMinRank) + ".." +
                           std::to_string(spec::kMaxRank) + ", channel-first");
}

const char *kRegisteredOps[] = {ext::kName, grad_ext::kName};

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
  namespace ext = bn_grad::plugin::ext;
  return bn_grad::plugin::Launch<bn_grad::primitive::RunBatchNormExt, ext::kNumInputs, ext::kArgNames>(
      ext::kName, nparam, params, ndims, shapes, dtypes, kernel_info);
}

int BatchNormGradExt(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                     void * /*stream*/, void *kernel_info) {
  namespace grad_ext = bn_grad::plugin::grad_ext;
  return bn_grad::plugin::Launch<bn_grad::primitive::RunBatchNormGradExt, grad_ext::kNumInputs,
                                 grad_ext::kArgNames>(grad_ext::kName, nparam, params, ndims, shapes, dtypes,
                                                      kernel_info);
}

// How many times MindSpore launched one of the primitives above in this
// process: the self-test of cpu_kernel/plugin.py reads it to prove that our
// kernel, not another, ran.
int64_t MsBnGradPluginLaunches() { return bn_grad::plugin::g_launches.load(std::memory_order_relaxed); }

}  // extern "C"

#endif  // MS_BN_GRAD_MS_PLUGIN_HEADER
