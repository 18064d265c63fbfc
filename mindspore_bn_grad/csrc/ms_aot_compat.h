// MindSpore's own AotExtra interface, from the installed MindSpore, made
// compilable on its own.
//
// MS_BN_GRAD_MS_AOT_HEADER is the installed
// <site-packages>/mindspore/include/mindspore/ccsrc/utils/custom_aot_extra.h
// (cpu_kernel/build.py passes its path and hashes it into the kernel cache key). Its
// AotExtra is the base of the AotExtraImpl that MindSpore's CPU aot kernel
// hands to our Init functions in every release from 2.7.0 to 2.10.0.
// (custom_aot_extra_dual_abi.h declares another class, AotExtraDualABI, that
// the CPU aot kernel does not use; it has the same internal includes.)
//
// Two things this file supplies, for every release from 2.7.0 to 2.10.0:
//
// 1. The header cannot be compiled on its own. It includes MindSpore-internal
//    headers ("ir/anf.h", and "include/utils/anfalgo.h", in 2.7
//    "mindspore/ccsrc/include/common/utils/anfalgo.h") for MindSpore's own
//    subclass AotExtraImpl. Compiling them in would pull MindSpore's global
//    type objects into our library: static initialisers and undefined
//    references to libmindspore symbols, so it could no longer be loaded
//    without MindSpore (the direct ctypes path). So those includes resolve
//    to the empty files under ms_internal/ (the only include directory
//    given), and the few names AotExtraImpl's inline bodies mention are
//    declared below. A new internal include in a later release fails the
//    build loudly ("No such file"); it is never picked up silently.
//    Our copy of AotExtraImpl is renamed: GCC speculatively devirtualizes
//    calls through AotExtra* to the subclass it can see, emitting its inline
//    bodies (here with the stand-ins) as weak symbols; under MindSpore's name
//    they could be bound to MindSpore's own. Under a name of ours the
//    speculation never matches the object MindSpore passes, and the
//    stand-ins trap should they ever run.
//
// 2. The header declares `template <typename T> T Attr(std::string) const`
//    with a body that returns T() for any T, and ships no specializations: on
//    its own, Attr<bool>(name) of a bool attribute would quietly read false. The
//    specializations that call the private GetAttr* virtual functions are
//    defined below, and Attr<T> for any other T does not compile.
//
// Strings cross this interface by value, so the library is built with
// -D_GLIBCXX_USE_CXX11_ABI=0 like MindSpore itself.
#ifndef MS_BN_GRAD_MS_AOT_COMPAT_H_
#define MS_BN_GRAD_MS_AOT_COMPAT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#ifndef MS_BN_GRAD_MS_AOT_HEADER
#error "MS_BN_GRAD_MS_AOT_HEADER (the installed MindSpore's custom_aot_extra.h) is set by cpu_kernel/build.py"
#endif

// --- 1. What the header's inline bodies name; never run (see above) ---
namespace ms_bn_grad_aot_stub {
struct Value {};
struct Primitive {
  bool HasAttr(const std::string &) const { __builtin_trap(); }
  std::shared_ptr<Value> GetAttr(const std::string &) const { __builtin_trap(); }
  std::string ToString() const { __builtin_trap(); }
};
struct NullLog {
  template <typename T>
  NullLog &operator<<(const T &) { return *this; }
};
}  // namespace ms_bn_grad_aot_stub

namespace mindspore {
using PrimitivePtr = std::shared_ptr<ms_bn_grad_aot_stub::Primitive>;
template <typename T>
T GetValue(const std::shared_ptr<ms_bn_grad_aot_stub::Value> &) { __builtin_trap(); }
}  // namespace mindspore

#define AotExtraImpl MsBnGradAotExtraImplNotUsed
#define MS_EXCEPTION_IF_NULL(ptr) static_cast<void>(ptr)
#define MS_LOG(level) ::ms_bn_grad_aot_stub::NullLog()
// Used only in the body of the unspecialized AotExtra::Attr<T> (T in scope):
// instantiating it for a T without a specialization below is a compile error.
#define MS_EXCEPTION_IF_CHECK_FAIL(cond, msg) \
  static_assert(sizeof(T) == 0, "AotExtra::Attr<T>: no specialization for this T in ms_aot_compat.h")

#include MS_BN_GRAD_MS_AOT_HEADER

#undef AotExtraImpl
#undef MS_EXCEPTION_IF_NULL
#undef MS_LOG
#undef MS_EXCEPTION_IF_CHECK_FAIL

// --- 2. The Attr<T> specializations ---
namespace mindspore {

// An explicit specialization is a member, so it may call the private
// virtuals. Those are not const while Attr is; the object MindSpore passes
// (its AotExtraImpl) is not const either.
template <>
inline bool AotExtra::Attr<bool>(std::string name) const {
  return const_cast<AotExtra *>(this)->GetAttrBool(name);
}
template <>
inline int64_t AotExtra::Attr<int64_t>(std::string name) const {
  return const_cast<AotExtra *>(this)->GetAttrInt(name);
}
template <>
inline float AotExtra::Attr<float>(std::string name) const {
  return const_cast<AotExtra *>(this)->GetAttrFloat(name);
}
template <>
inline std::string AotExtra::Attr<std::string>(std::string name) const {
  return const_cast<AotExtra *>(this)->GetAttrStr(name);
}
template <>
inline std::vector<int64_t> AotExtra::Attr<std::vector<int64_t>>(std::string name) const {
  return const_cast<AotExtra *>(this)->GetAttrIntVec(name);
}

}  // namespace mindspore

#endif  // MS_BN_GRAD_MS_AOT_COMPAT_H_
