// The one reader of the attributes MindSpore hands an aot kernel's Init.
//
// Each prototype's attributes, their kernel names and defaults are
// generated from op_def/ into bn_spec.gen.h as a struct Attrs and a
// VisitAttrs that names each one to a reader; AttrReader reads them by type:
//   Bool         a bool attribute
//   Float        a float (MindSpore passes float32) and, when the prototype
//                names one, the exact double as int64 bits
//   BoolList     a bool tuple, passed as a list of ints (nonzero = true)
//   ChannelLast  data_format (as `layout`): whether it puts the channel last
// An attribute MindSpore does not pass keeps its default.
//
//   int FooInit(..., AotExtra *extra) { return aot::InitAttrs<spec::foo::Attrs>(extra); }
//   int Foo(..., void *extra) { const auto at = aot::AttrsOf<spec::foo::Attrs>(extra); ... }
#ifndef MS_BN_GRAD_AOT_ATTRS_H_
#define MS_BN_GRAD_AOT_ATTRS_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bn_spec.gen.h"
#include "ms_aot_compat.h"

namespace bn_grad {
namespace aot {

// Whether a data_format value puts the channel last.
inline bool IsChannelLastLayout(const std::string &layout) {
  for (const char *name : spec::kChannelLastLayouts) {
    if (layout == name) return true;
  }
  return false;
}

class AttrReader {
 public:
  explicit AttrReader(mindspore::AotExtra *extra) : extra_(extra) {}

  void Bool(const char *name, bool *v) {
    if (extra_->HasAttr(name)) *v = extra_->Attr<bool>(name);
  }
  void Float(const char *name, const char *bits_name, double *v) {
    if (extra_->HasAttr(name)) *v = static_cast<double>(extra_->Attr<float>(name));
    if (bits_name != nullptr && extra_->HasAttr(bits_name)) {
      const int64_t bits = extra_->Attr<int64_t>(bits_name);
      std::memcpy(v, &bits, sizeof(*v));
    }
  }
  // A list of the wrong length leaves *v as it was and makes ok() false.
  void BoolList(const char *name, bool *v, int n) {
    if (!extra_->HasAttr(name)) return;
    const std::vector<int64_t> m = extra_->Attr<std::vector<int64_t>>(name);
    if (m.size() != static_cast<size_t>(n)) {
      ok_ = false;
      return;
    }
    for (int i = 0; i < n; ++i) v[i] = m[i] != 0;
  }
  void ChannelLast(const char *name, bool *v) {
    if (extra_->HasAttr(name)) *v = IsChannelLastLayout(extra_->Attr<std::string>(name));
  }
  void Ints(const char *name, std::vector<int64_t> *v) {
    if (extra_->HasAttr(name)) *v = extra_->Attr<std::vector<int64_t>>(name);
  }
  bool ok() const { return ok_; }

 private:
  mindspore::AotExtra *extra_;
  bool ok_ = true;
};

template <class A>
struct KernelAttrs : public mindspore::AotKernelData {
  A attrs;
};

// An Init: reads the attributes into the kernel data MindSpore keeps for the
// kernel's calls. kBadParamCount for an attribute it cannot read.
template <class A>
int InitAttrs(mindspore::AotExtra *extra) {
  auto *data = new KernelAttrs<A>();
  AttrReader reader(extra);
  VisitAttrs(&data->attrs, reader);  // bn_spec.gen.h, found by argument-dependent lookup
  if (!reader.ok()) {
    delete data;
    return spec::kBadParamCount;
  }
  extra->SetKernelData(data);
  return spec::kOk;
}

// The attributes InitAttrs read (the defaults when there is no kernel data).
template <class A>
A AttrsOf(void *extra) {
  if (extra != nullptr) {
    const auto *kd = static_cast<mindspore::AotExtra *>(extra)->KernelData();
    if (kd != nullptr) return static_cast<const KernelAttrs<A> *>(kd)->attrs;
  }
  return A{};
}

}  // namespace aot
}  // namespace bn_grad

#endif  // MS_BN_GRAD_AOT_ATTRS_H_
