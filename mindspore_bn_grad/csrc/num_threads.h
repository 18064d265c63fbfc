// The thread count every CPU kernel of the library uses (BatchNormBackward,
// the double backward, the SyncBatchNorm steps, the zero-fills of masked
// outputs), 1..MaxThreads(). Default: the CPUs this process may run on. On a
// thread of MindSpore's PYNATIVE pipeline a call of the forward or backward
// (CallThreads) runs on the setting or on one CPU fewer, whichever has been
// faster there for calls of its size (num_threads.cpp); results never depend
// on the thread count.
//
// The MS_BN_GRAD_NUM_THREADS variable is parsed in one place, cpu_kernel/native.py,
// which passes the number here (through MsBnGradSetNumThreads, aot_entry.cpp).
// SetNumThreads starts the pool threads (thread_pool.h) at once and returns
// false, keeping the previous setting, when the OS refuses one.
#ifndef MS_BN_GRAD_NUM_THREADS_H_
#define MS_BN_GRAD_NUM_THREADS_H_

#include <chrono>
#include <cstdint>

#include "tensor.h"

namespace bn_grad {

constexpr int kThreadsPerCpu = 4;
int UsableCpus();
inline int MaxThreads() { return kThreadsPerCpu * UsableCpus(); }
bool SetNumThreads(int n);
int GetNumThreads();

// The threads of one kernel call that moves `bytes` of activations, for as long as it lives (on
// its thread, GetNumThreads() returns them): the setting, except on a thread of MindSpore's PYNATIVE
// pipeline, where MindSpore's Python thread runs beside the call (it dispatches, or busy-waits for
// the queue). There one CPU fewer can be faster or much slower, by how the machine schedules that
// thread: after a few warm-up calls on the setting, both are timed, call by call, per size class
// (log2 of the bytes), and the faster is kept (timed again every few thousand calls). Construct
// one at the top of each kernel entry.
class CallThreads {
 public:
  static int Last();  // the count of this thread's latest call (tests: MsBnGradLastCallThreads)
  // The most threads one parallel loop of this thread's latest call was given (ParallelFor notes
  // each; 1: the call ran on its own thread): tests of the kernels' one-thread rules
  // (MsBnGradLastCallParallel).
  static int LastParallel();
  static void NoteParallel(int nthreads);
  explicit CallThreads(int64_t bytes);
  CallThreads(const Geometry &g, DType d);  // the bytes of an [outer, channels, inner] tensor of d
  ~CallThreads();
  CallThreads(const CallThreads &) = delete;
  CallThreads &operator=(const CallThreads &) = delete;

 private:
  int count_;
  int outer_;            // the enclosing call's count (0: none), restored at the end
  int size_class_ = -1;  // the size class this call is timed for; -1: not timed
  int option_ = 1;       // 0: one CPU fewer; 1: the setting
  std::chrono::steady_clock::time_point start_;
};

}  // namespace bn_grad

#endif  // MS_BN_GRAD_NUM_THREADS_H_
