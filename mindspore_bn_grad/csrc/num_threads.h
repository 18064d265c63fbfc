// The thread count every CPU kernel of the library uses (BatchNormBackward,
// the double backward, the SyncBatchNorm steps, the zero-fills of masked
// outputs), 1..MaxThreads(). Default: the CPUs this process may run on. On a
// thread of MindSpore's PYNATIVE pipeline GetNumThreads() leaves one CPU to
// MindSpore's Python thread (num_threads.cpp); results never depend on it.
//
// The MS_BN_GRAD_NUM_THREADS variable is parsed in one place, cpu_kernel/native.py,
// which passes the number here (through MsBnGradSetNumThreads, aot_entry.cpp).
// SetNumThreads starts the pool threads (thread_pool.h) at once and returns
// false, keeping the previous setting, when the OS refuses one.
#ifndef MS_BN_GRAD_NUM_THREADS_H_
#define MS_BN_GRAD_NUM_THREADS_H_

namespace bn_grad {

constexpr int kThreadsPerCpu = 4;
int UsableCpus();
inline int MaxThreads() { return kThreadsPerCpu * UsableCpus(); }
bool SetNumThreads(int n);
int GetNumThreads();

}  // namespace bn_grad

#endif  // MS_BN_GRAD_NUM_THREADS_H_
