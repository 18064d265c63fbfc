// BatchNormBackward CPU kernel: the interface between the entry points
// (aot_entry.cpp: MindSpore's ops.Custom aot ABI and a direct ctypes entry)
// and the compute (bn_backward_cpu.cpp).
//
// Every activation tensor is viewed as [outer, channels, inner], contiguous:
//   channel-first (NCHW, NCL, NCDHW, ND): outer = N, inner = prod(dims[2:])
//   channel-last  (NHWC, NDHWC):          outer = prod(dims[:-1]), inner = 1
// so one kernel serves every rank and both layouts.
#ifndef MS_BN_GRAD_BN_BACKWARD_H_
#define MS_BN_GRAD_BN_BACKWARD_H_

#include <cstdint>

namespace bn_grad {

enum class DType : int { kNone = 0, kFloat16 = 1, kBFloat16 = 2, kFloat32 = 3, kFloat64 = 4 };

struct ConstTensor {
  const void *data = nullptr;   // null when absent (dtype kNone)
  DType dtype = DType::kNone;
};

struct MutTensor {
  void *data = nullptr;
  DType dtype = DType::kNone;
};

struct BnBackwardArgs {
  int64_t outer = 0, channels = 0, inner = 0;
  ConstTensor grad_out, input;                 // [outer, channels, inner]
  ConstTensor weight;                          // (C,) or absent: 1
  ConstTensor running_mean, running_var;       // (C,) or absent: 0 and 1
  ConstTensor save_mean, save_invstd;          // (C,); required when training
  MutTensor grad_input;                        // [outer, channels, inner], grad_out's dtype
  MutTensor grad_weight, grad_bias;            // (C,)
  bool training = true;
  double eps = 1e-5;
  bool mask[3] = {true, true, true};           // by mask bit: grad_input, grad_weight, grad_bias
  // mask[0] False: zero-fill grad_input as well, in the sweep that reads x and
  // dy for the other outputs (a separate fill would move the same bytes again).
  bool zero_grad_input = false;
};

// Computes the outputs whose mask bit is set; does not touch the others
// (the entry points zero-fill them), except grad_input with zero_grad_input. Returns 0, or a nonzero code for
// arguments it cannot honour (the Python layer rejects those earlier).
int BnBackward(const BnBackwardArgs &args);

// Thread count used by BnBackward, 1..MaxThreads(). Default: the CPUs this
// process may run on. The MS_BN_GRAD_NUM_THREADS variable is parsed in one
// place, _native.py, which passes the number here (through
// MsBnGradSetNumThreads). SetNumThreads starts the pool threads at once and
// returns false, keeping the previous setting, when the OS refuses one.
constexpr int kThreadsPerCpu = 4;
int UsableCpus();
inline int MaxThreads() { return kThreadsPerCpu * UsableCpus(); }
bool SetNumThreads(int n);
int GetNumThreads();

}  // namespace bn_grad

#endif  // MS_BN_GRAD_BN_BACKWARD_H_
