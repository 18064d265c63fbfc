// MindSpore's CPU kernel factory: our kernels as MindSpore's own BatchNormExt
// and BatchNormGradExt, registered as NativeCpuKernelMod classes.
//
// The second mechanism of the native route (docs/native_route.md), beside
// the op plugin (op_plugin.cpp). This file is its own library
// (libms_bn_grad_factory_*.so, cpu_kernel/factory.py): built against the
// INSTALLED MindSpore's C++ headers, so the class layouts it relies on
// (KernelMod, KernelTensor) are those of the release that loads it (the cache
// key holds MindSpore's version and a digest of the headers), and linked
// against MindSpore's libraries and our kernel library (DT_NEEDED by path: the
// one instance that ops.Custom uses, one thread pool, one thread count).
// Loaded with ctypes after `import mindspore`; MsBnGradFactoryRegister adds both
// kernels to MindSpore's factory. MindSpore creates a kernel from the factory
// whenever it needs one, so this works after other CPU operators ran. No
// MS_OP_PLUGIN_PATH, so MindSpore keeps making strided views dense before
// every kernel, ours included (an input that still arrives as a view is
// refused, never misread).
//
// What this file does is translate MindSpore's KernelTensors into the call
// ms_primitive_runs.h reads (the argument mapping, the checks and the compute
// are the kernel library's, shared with the op plugin). GRAPH mode unfolds
// BatchNormGradExt's output_mask tuple into three int64 scalars; PYNATIVE
// passes it as one tuple: both are read as the one argument.
// Launches run on MindSpore's device thread (PYNATIVE) or its kernel actors
// (GRAPH); the compute uses the kernel library's persistent pool.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ms_primitive_runs.h"

// The installed MindSpore's cpu_kernel.h (cpu_kernel/factory.py passes its path, ms_compat.CPU_KERNEL_FACTORY).
#include MS_BN_GRAD_MS_CPU_KERNEL_HEADER

namespace bn_grad {
namespace factory {
namespace {

using mindspore::kernel::KernelAttr;
using mindspore::kernel::KernelTensor;
using mindspore::kernel::NativeCpuKernelMod;
using TensorList = std::vector<KernelTensor *>;

std::atomic<int64_t> g_launches{0};

namespace ext = spec::batch_norm_forward::mindspore_primitive;
namespace grad_ext = spec::batch_norm_backward::mindspore_primitive;

// The dtype's name as the generated table spells it (MindSpore's own lower-case name, which the
// op plugin hands over too), "none" for an absent tensor, "unsupported" for any other type.
const char *DtypeName(mindspore::TypeId t) {
  if (t == mindspore::kMetaTypeNone) return "none";
  const std::string name = mindspore::TypeIdToString(t, true);
  for (const spec::DtypeName &d : spec::kDtypeNames) {
    if (name == d.name) return d.name;
  }
  return "unsupported";
}

bool IsNone(const KernelTensor *t) { return t == nullptr || t->dtype_id() == mindspore::kMetaTypeNone; }
// A scalar argument (a bool, a float, an int tuple), not a tensor and not an absent one.
bool IsScalarArg(const KernelTensor *t) { return !IsNone(t) && t->type_id() != mindspore::kObjectTypeTensorType; }

// One launch's KernelTensors: MindSpore's arguments (the last input, a tuple,
// may arrive unfolded into the remaining scalars) as an aot call plus the
// scalar readers.
class FactoryArgs final : public primitive::PrimitiveArgs {
 public:
  FactoryArgs(const TensorList &inputs, const TensorList &outputs, size_t num_inputs)
      : inputs_(inputs), num_inputs_(num_inputs) {
    const size_t n = num_inputs + outputs.size();
    params_.assign(n, nullptr);
    ndims_.assign(n, 0);
    shapes_.assign(n, nullptr);
    dtypes_.assign(n, "none");
    shape_store_.resize(n);
    ok_ = num_inputs > 0 && inputs.size() >= num_inputs;
    for (size_t i = 0; ok_ && i < n; ++i) {
      KernelTensor *t = i < num_inputs ? inputs[i] : outputs[i - num_inputs];
      if (i < num_inputs && (IsScalar(static_cast<int>(i)) || IsNone(t))) continue;
      if (t == nullptr) { ok_ = false; break; }
      shape_store_[i] = t->GetShapeVector();
      ndims_[i] = static_cast<int>(shape_store_[i].size());
      shapes_[i] = shape_store_[i].data();
      dtypes_[i] = DtypeName(t->dtype_id());
      params_[i] = t->device_ptr();
      const auto &storage = t->tensor_storage_info();
      if (storage != nullptr && !(storage->is_contiguous && storage->storage_offset == 0)) strided_ = true;
    }
  }

  // Tensors MindSpore did not make dense are refused: this route never reads strides.
  bool ok() const { return ok_ && !strided_; }
  aot::Call call() { return {static_cast<int>(params_.size()), params_.data(), ndims_.data(), shapes_.data(),
                             dtypes_.data()}; }

  size_t NumInputs() const override { return num_inputs_; }
  bool IsScalar(int arg) const override {
    return IsScalarArg(At(arg));
  }
  bool Bool(int arg) const override { return At(arg)->GetValueWithCheck<bool>(); }
  double Float(int arg) const override {
    KernelTensor *t = At(arg);
    return t->dtype_id() == mindspore::kNumberTypeFloat64 ? t->GetValueWithCheck<double>()
                                                          : t->GetValueWithCheck<float>();
  }
  std::vector<int64_t> IntVec(int arg) const override {
    if (static_cast<size_t>(arg) + 1 == num_inputs_ && inputs_.size() > num_inputs_) {  // an unfolded tuple
      std::vector<int64_t> v;
      for (size_t i = arg; i < inputs_.size(); ++i) v.push_back(inputs_[i]->GetValueWithCheck<int64_t>());
      return v;
    }
    KernelTensor *t = At(arg);
    if (t->type_id() == mindspore::kObjectTypeNumber) return {t->GetValueWithCheck<int64_t>()};  // one int
    return t->GetValueWithCheck<std::vector<int64_t>>();
  }
  std::optional<primitive::TensorLayout> Layout(int) const override { return std::nullopt; }

 private:
  KernelTensor *At(int arg) const {
    return arg >= 0 && static_cast<size_t>(arg) < inputs_.size() ? inputs_[arg] : nullptr;
  }

  const TensorList &inputs_;
  size_t num_inputs_;
  std::vector<void *> params_;
  std::vector<int> ndims_;
  std::vector<int64_t *> shapes_;
  std::vector<const char *> dtypes_;
  std::vector<std::vector<int64_t>> shape_store_;
  bool ok_ = false;
  bool strided_ = false;
};

// The tensor arguments of a launch as "input float32 (4, 3, 5, 5), weight none, ...", for messages.
std::string DescribeTensors(const TensorList &inputs, size_t num_inputs, const char *const *names) {
  std::string out;
  for (size_t i = 0; i < num_inputs && i < inputs.size(); ++i) {
    const KernelTensor *t = inputs[i];
    if (IsScalarArg(t)) continue;
    out += out.empty() ? "" : ", ";
    out += names[i];
    if (IsNone(t)) {
      out += " none";
      continue;
    }
    out += " " + mindspore::TypeIdToString(t->dtype_id(), true) + " (";
    const auto &shape = t->GetShapeVector();
    for (size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
    out += shape.size() == 1 ? ",)" : ")";
  }
  return out;
}

// At kernel creation (GRAPH: compile time, before anything runs): every tensor argument is None or
// of a dtype the kernels take, else an exception that says which.
void CheckDtypes(const std::string &kernel_name, const TensorList &inputs, size_t num_inputs,
                 const char *const *names) {
  for (size_t i = 0; i < num_inputs && i < inputs.size(); ++i) {
    const KernelTensor *t = inputs[i];
    if (IsNone(t) || IsScalarArg(t)) continue;
    if (std::string(DtypeName(t->dtype_id())) == "unsupported") {
      MS_LOG(EXCEPTION) << "For '" << kernel_name << "' (mindspore_bn_grad's CPU kernel), " << names[i]
                        << " expected a tensor of " << aot::DtypeNamesList() << ", got "
                        << mindspore::TypeIdToString(t->dtype_id(), true) << " ("
                        << DescribeTensors(inputs, num_inputs, names) << ")";
    }
  }
}

// One launch of our kernel on MindSpore's KernelTensors. Arguments the kernel refuses raise an
// exception naming the reason (the prototypes' kernel_errors) and the tensors, which MindSpore
// reports as the launch's error; nothing is computed then.
template <int (*Run)(aot::Call, const primitive::PrimitiveArgs &)>
bool LaunchOurs(const std::string &kernel_name, const TensorList &inputs, const TensorList &outputs,
                size_t num_inputs, const char *const *names) {
  int rc = spec::kBadParamCount;
  bool dense = true;
  try {
    FactoryArgs args(inputs, outputs, num_inputs);
    dense = args.ok();
    rc = dense ? Run(args.call(), args) : spec::kBadParamCount;
  } catch (...) {  // MindSpore's value readers throw on a malformed scalar: refused below, not a crash
    rc = spec::kBadParamCount;
  }
  if (rc != 0) {
    MS_LOG(EXCEPTION) << "For '" << kernel_name << "' (mindspore_bn_grad's CPU kernel), the arguments were refused: "
                      << spec::ErrorMessage(rc) << " (error code " << rc << ")"
                      << (dense ? "" : ", a strided or missing tensor") << "; "
                      << DescribeTensors(inputs, num_inputs, names);
  }
  return true;
}

template <int (*Run)(aot::Call, const primitive::PrimitiveArgs &), int kNumInputs, const char *const *kNames>
class BnKernelMod : public NativeCpuKernelMod {
 public:
  std::vector<KernelAttr> GetOpSupport() override { return {KernelAttr().AddSkipCheckAttr(true)}; }
  bool Init(const TensorList &inputs, const TensorList &) override {
    CheckDtypes(kernel_name_, inputs, kNumInputs, kNames);  // MindSpore's infer leaves dtypes to the kernel
    return true;
  }
  bool Launch(const TensorList &inputs, const TensorList &, const TensorList &outputs) override {
    g_launches.fetch_add(1, std::memory_order_relaxed);
    return LaunchOurs<Run>(kernel_name_, inputs, outputs, kNumInputs, kNames);
  }
};

// ---- MindSpore's legacy BatchNorm / BatchNormGrad / BatchNormGradGrad (nn.BatchNorm* and its bprops) -
//
// MindSpore has CPU kernels of these; ours take their place in the factory, and each of ours holds
// MindSpore's own kernel of the same node, which runs instead while UseMindSporeKernels(1) is set
// (benchmarks and tests compare the two in one process). MindSpore's kernel is prepared beside ours
// (Init; Resize once per shape, not per launch: PYNATIVE resizes BatchNormGrad on every launch)
// wherever it can run (NCHW, ranks up to 4); a launch that asks for it where it cannot fails rather
// than silently run ours.
std::atomic<int64_t> g_legacy_launches{0};    // ours
std::atomic<int64_t> g_mindspore_launches{0};  // MindSpore's, under the switch
std::atomic<bool> g_use_mindspore{false};

namespace legacy_fwd = spec::batch_norm_forward::mindspore_legacy_primitive;
namespace legacy_bwd = spec::batch_norm_backward::mindspore_legacy_primitive;
namespace legacy_dbl = spec::batch_norm_double_backward::mindspore_legacy_primitive;
constexpr size_t kMindSporeMaxRank = 4;  // MindSpore's CPU kernels pad the shape to 4-D (NCHW only)

template <int (*Run)(aot::Call, const primitive::PrimitiveArgs &), int kNumInputs, int kFormatArg,
          const char *const *kNames>
class LegacyKernelMod : public NativeCpuKernelMod {
 public:
  explicit LegacyKernelMod(std::shared_ptr<NativeCpuKernelMod> theirs) : theirs_(std::move(theirs)) {}

  std::vector<KernelAttr> GetOpSupport() override { return theirs_->GetOpSupport(); }  // the same selection

  bool Init(const TensorList &inputs, const TensorList &outputs) override {
    theirs_init_ = false;
    PrepareTheirs(inputs, outputs, /*resize=*/false);
    return true;
  }

  int Resize(const TensorList &inputs, const TensorList &outputs) override {
    const int ret = KernelMod::Resize(inputs, outputs);
    if (ret != 0) return ret;
    workspace_size_list_.clear();
    theirs_ready_ = PrepareTheirs(inputs, outputs, /*resize=*/true);
    if (theirs_ready_) workspace_size_list_ = theirs_->GetWorkspaceSizeList();
    return 0;
  }

  bool Launch(const TensorList &inputs, const TensorList &workspace, const TensorList &outputs) override {
    if (g_use_mindspore.load()) {
      if (!theirs_ready_) {
        MS_LOG(ERROR) << "For '" << kernel_name_ << "', MindSpore's own kernel was asked for "
                      << "(mindspore_bn_grad's use_mindspore_kernels), which cannot run this launch";
        return false;
      }
      g_mindspore_launches.fetch_add(1, std::memory_order_relaxed);
      return theirs_->Launch(inputs, workspace, outputs);
    }
    g_legacy_launches.fetch_add(1, std::memory_order_relaxed);
    return LaunchOurs<Run>(kernel_name_, inputs, outputs, kNumInputs, kNames);
  }

 private:
  // MindSpore's kernel takes what it was written for: NCHW, ranks up to 4.
  static bool TheirsFit(const TensorList &inputs) {
    if (inputs.size() < static_cast<size_t>(kNumInputs) || inputs[0] == nullptr) return false;
    if (inputs[0]->GetShapeVector().size() > kMindSporeMaxRank) return false;
    KernelTensor *f = inputs[kFormatArg];
    return f != nullptr && f->GetValueWithCheck<int64_t>() == 0;
  }

  // A scalar input's value, as bits (the signature of a Resize).
  static int64_t ScalarBits(KernelTensor *t) {
    switch (t->dtype_id()) {
      case mindspore::kNumberTypeBool: return t->GetValueWithCheck<bool>() ? 1 : 0;
      case mindspore::kNumberTypeInt64: return t->GetValueWithCheck<int64_t>();
      case mindspore::kNumberTypeFloat32: {
        const float f = t->GetValueWithCheck<float>();
        int32_t bits = 0;
        std::memcpy(&bits, &f, sizeof(bits));
        return bits;
      }
      default: return INT64_MIN;  // never equal to itself: MindSpore resizes every time
    }
  }

  // Init (once) and Resize (when a shape or scalar changed) of MindSpore's kernel; false when it cannot run.
  bool PrepareTheirs(const TensorList &inputs, const TensorList &outputs, bool resize) {
    try {
      if (!TheirsFit(inputs)) return false;
      if (!theirs_init_) {
        theirs_init_ = theirs_->Init(primitive_, inputs, outputs);
        theirs_sig_.clear();
      }
      if (!theirs_init_ || !resize) return theirs_init_;
      std::vector<int64_t> sig;
      for (size_t i = 0; i < static_cast<size_t>(kNumInputs); ++i) {
        KernelTensor *t = inputs[i];
        if (t == nullptr) { sig.push_back(-1); continue; }
        const auto &shape = t->GetShapeVector();
        sig.push_back(static_cast<int64_t>(shape.size()));
        sig.insert(sig.end(), shape.begin(), shape.end());
        if (t->type_id() == mindspore::kObjectTypeNumber) sig.push_back(ScalarBits(t));
      }
      if (sig == theirs_sig_ && std::find(sig.begin(), sig.end(), INT64_MIN) == sig.end()) return true;
      if (theirs_->Resize(inputs, outputs) != 0) return false;
      theirs_sig_ = sig;
      return true;
    } catch (...) {  // MindSpore's checks throw
      theirs_sig_.clear();
      return false;
    }
  }

  std::shared_ptr<NativeCpuKernelMod> theirs_;
  bool theirs_init_ = false;
  bool theirs_ready_ = false;
  std::vector<int64_t> theirs_sig_;
};

using BatchNormKernel =
    LegacyKernelMod<primitive::RunBatchNorm, legacy_fwd::kNumInputs, legacy_fwd::DATA_FORMAT, legacy_fwd::kArgNames>;
using BatchNormGradKernel =
    LegacyKernelMod<primitive::RunBatchNormGrad, legacy_bwd::kNumInputs, legacy_bwd::DATA_FORMAT, legacy_bwd::kArgNames>;
using BatchNormGradGradKernel =
    LegacyKernelMod<primitive::RunBatchNormGradGrad, legacy_dbl::kNumInputs, legacy_dbl::DATA_FORMAT,
                    legacy_dbl::kArgNames>;

using BatchNormExtKernel = BnKernelMod<primitive::RunBatchNormExt, ext::kNumInputs, ext::kArgNames>;
using BatchNormGradExtKernel = BnKernelMod<primitive::RunBatchNormGradExt, grad_ext::kNumInputs, grad_ext::kArgNames>;

using Factory = mindspore::kernel::Factory<NativeCpuKernelMod>;

// 0: both registered now or by an earlier call; 1: MindSpore (or another
// library) already has a kernel of one of these names, so none is added.
// A function, not MS_KERNEL_FACTORY_REG's static registrar: registering a
// taken name throws, and a throw from a static initializer during dlopen
// would end the process.
int Register() {
  static std::atomic<bool> done{false};
  if (done.load()) return 0;
  Factory &f = Factory::Instance();
  if (f.IsRegistered(ext::kName) || f.IsRegistered(grad_ext::kName)) return 1;
  f.Register(ext::kName, [] { return std::make_shared<BatchNormExtKernel>(); });
  f.Register(grad_ext::kName, [] { return std::make_shared<BatchNormGradExtKernel>(); });
  done.store(true);
  return 0;
}

// The factory keeps its creators private; its public interface can only erase one (UnRegister), which
// would lose MindSpore's kernel. An explicit instantiation may name a private member (the standard's one
// way to), so this reaches the creator map to wrap MindSpore's creator in ours.
using CreatorMap = std::map<std::string, std::function<std::shared_ptr<NativeCpuKernelMod>()>>;
struct CreatorsTag {
  using type = CreatorMap Factory::*;
  friend type Creators(CreatorsTag);
};
template <typename Tag, typename Tag::type Member>
struct Expose {
  friend typename Tag::type Creators(Tag) { return Member; }
};
template struct Expose<CreatorsTag, &Factory::kernel_mod_creators_>;

template <class Ours>
void Wrap(CreatorMap::iterator it) {
  auto theirs = it->second;
  it->second = [theirs] { return std::make_shared<Ours>(theirs()); };
}

// 0: all three wrapped now or by an earlier call; 1: MindSpore has no CPU kernel of one of these names.
int RegisterLegacy() {
  static std::atomic<bool> done{false};
  if (done.load()) return 0;
  CreatorMap &creators = Factory::Instance().*Creators(CreatorsTag{});
  auto fwd = creators.find(legacy_fwd::kName), bwd = creators.find(legacy_bwd::kName);
  auto dbl = creators.find(legacy_dbl::kName);
  if (fwd == creators.end() || bwd == creators.end() || dbl == creators.end()) return 1;
  Wrap<BatchNormKernel>(fwd);
  Wrap<BatchNormGradKernel>(bwd);
  Wrap<BatchNormGradGradKernel>(dbl);
  done.store(true);
  return 0;
}

}  // namespace
}  // namespace factory
}  // namespace bn_grad

extern "C" {
// Adds BatchNormExt / BatchNormGradExt to MindSpore's CPU kernel factory
// (cpu_kernel/factory.py calls it once, right after loading): 0 added, 1 a
// kernel of that name already exists, 2 MindSpore refused.
int MsBnGradFactoryRegister() {
  try {
    return bn_grad::factory::Register();
  } catch (...) {
    return 2;
  }
}

// Puts our kernels in place of MindSpore's CPU BatchNorm / BatchNormGrad / BatchNormGradGrad (each keeping
// MindSpore's own):
// 0 done, 1 MindSpore has no such kernel, 2 MindSpore refused.
int MsBnGradFactoryRegisterLegacy() {
  try {
    return bn_grad::factory::RegisterLegacy();
  } catch (...) {
    return 2;
  }
}

// on != 0: BatchNorm / BatchNormGrad launches run MindSpore's own kernels (tests and benchmarks).
void MsBnGradFactoryUseMindSporeKernels(int on) { bn_grad::factory::g_use_mindspore.store(on != 0); }

// Launches of our legacy kernels (which = 0) and of MindSpore's under the switch (which = 1).
int64_t MsBnGradFactoryLegacyLaunches(int which) {
  return which == 0 ? bn_grad::factory::g_legacy_launches.load() : bn_grad::factory::g_mindspore_launches.load();
}

// How many times MindSpore launched one of the kernels above in this process
// (cpu_kernel/factory.py's self-test: proof that ours ran).
int64_t MsBnGradFactoryLaunches() { return bn_grad::factory::g_launches.load(std::memory_order_relaxed); }
}
