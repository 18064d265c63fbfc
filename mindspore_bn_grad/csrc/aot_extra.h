// Project-owned mirror of MindSpore 2.10's AotExtra interface
// (include/mindspore/ccsrc/utils/custom_aot_extra.h), which cannot be
// included on its own because it pulls in MindSpore-internal headers.
//
// What must match MindSpore exactly is the object layout: the order of the
// virtual functions (destructor, HasAttr, then the GetAttr* family) and the
// data members (workspace vector, kernel-data pointer). Strings cross this
// boundary by value, so the library is built with -D_GLIBCXX_USE_CXX11_ABI=0
// like MindSpore itself. test_attributes_reach_the_kernel_intact in
// tests/ut/test_build.py checks that attributes arrive intact; this file is
// pinned to mindspore==2.10.0 (setup.cfg).
#ifndef MS_BN_GRAD_AOT_EXTRA_H_
#define MS_BN_GRAD_AOT_EXTRA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mindspore {

class AotKernelData {
 public:
  AotKernelData() = default;
  virtual ~AotKernelData() = default;
};

class AotExtra {
 public:
  AotExtra() = default;
  virtual ~AotExtra() = default;
  virtual bool HasAttr(std::string name) = 0;

  template <typename T>
  T Attr(const std::string &name);

  void SetWorkSpace(const std::vector<size_t> &workspace) { workspace_ = workspace; }
  const std::vector<size_t> &WorkSpace() const { return workspace_; }
  void SetKernelData(AotKernelData *kernel_data) { kernel_data_ = kernel_data; }
  const AotKernelData *KernelData() const { return kernel_data_; }
  void DestructKernelData() {
    delete kernel_data_;
    kernel_data_ = nullptr;
  }

 private:
  virtual bool GetAttrBool(std::string name) = 0;
  virtual int64_t GetAttrInt(std::string name) = 0;
  virtual float GetAttrFloat(std::string name) = 0;
  virtual std::string GetAttrStr(std::string name) = 0;
  virtual std::vector<int64_t> GetAttrIntVec(std::string name) = 0;
  virtual std::vector<float> GetAttrFloatVec(std::string name) = 0;
  virtual std::vector<std::vector<int64_t>> GetAttrInt2DVec(std::string name) = 0;
  virtual std::vector<std::vector<float>> GetAttrFloat2DVec(std::string name) = 0;

  std::vector<size_t> workspace_;
  AotKernelData *kernel_data_{nullptr};
};

template <> inline bool AotExtra::Attr<bool>(const std::string &n) { return GetAttrBool(n); }
template <> inline int64_t AotExtra::Attr<int64_t>(const std::string &n) { return GetAttrInt(n); }
template <> inline float AotExtra::Attr<float>(const std::string &n) { return GetAttrFloat(n); }
template <> inline std::string AotExtra::Attr<std::string>(const std::string &n) { return GetAttrStr(n); }
template <> inline std::vector<int64_t> AotExtra::Attr<std::vector<int64_t>>(const std::string &n) {
  return GetAttrIntVec(n);
}

}  // namespace mindspore

#endif  // MS_BN_GRAD_AOT_EXTRA_H_
