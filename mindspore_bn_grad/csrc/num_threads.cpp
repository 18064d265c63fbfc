// The thread-count setting (num_threads.h).
#include "num_threads.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "element_io.h"
#include "thread_pool.h"

namespace bn_grad {
namespace {

std::atomic<int> g_num_threads{UsableCpus()};

// MindSpore's PYNATIVE pipeline runs kernels on threads it names "<stage>_queue" (frontend_queue,
// backend_queue, launch_queue: its runtime/pipeline AsyncRQueue). While one of them runs ours,
// MindSpore's Python thread runs too: it dispatches the next operators, or waits for the queue in a
// busy loop (AsyncRQueue::Wait). One CPU fewer for the kernel (this cap) can then be faster, or much
// slower, by the machine (docs/performance.md, "Threads"): CallThreads times both. 0: not such a
// thread. The CPU count is the one the thread saw first.
int PipelineThreadCap() {
  thread_local const int cap = [] {
    char name[16] = {0};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return 0;
    const size_t n = std::strlen(name);
    const bool pipeline = n > 6 && std::strcmp(name + n - 6, "_queue") == 0;
    return pipeline ? std::max(1, UsableCpus() - 1) : 0;
  }();
  return cap;
}

}  // namespace

int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n >= 1) return n;
  }
  return 1;
}

bool SetNumThreads(int n) {
  n = std::max(1, std::min(n, MaxThreads()));
  if (ThreadPool::Global().Reserve(n - 1) < n - 1) return false;
  g_num_threads.store(n);
  return true;
}

thread_local int t_call_threads = 0;  // the count of the CallThreads around this thread's current call
thread_local int t_last_call_threads = 0;  // ... of its latest call

thread_local int t_last_call_parallel = 0;  // ... and the widest parallel loop it ran

int CallThreads::Last() { return t_last_call_threads; }
int CallThreads::LastParallel() { return t_last_call_parallel; }
void CallThreads::NoteParallel(int nthreads) { t_last_call_parallel = std::max(t_last_call_parallel, nthreads); }

int GetNumThreads() { return t_call_threads > 0 ? t_call_threads : g_num_threads.load(); }

// ---- CallThreads: on the pipeline's threads, the faster of the setting and the cap, per size class.
namespace {

constexpr int kSizeClasses = 64;          // log2 of a call's bytes
constexpr int kWarmupCalls = 16;          // a size class's first calls, untimed (MindSpore warms up too)
constexpr int kTrials = 7;                // timed calls of each option before a choice
constexpr int64_t kCallsPerChoice = 2048; // calls of a size class between two rounds of trials
constexpr double kClearlyFaster = 0.95;   // one CPU fewer is chosen when its median is below this share

struct SizeClass {
  int warmup = kWarmupCalls;  // untimed calls left, on the setting
  int64_t calls = 0;        // since the last choice
  int chosen = -1;          // -1: trying; 0: the cap; 1: the setting
  int tried[2] = {0, 0};
  double seconds[2][kTrials] = {};
};

std::mutex g_classes_mu;
SizeClass g_classes[kSizeClasses];

double Median(double *v, int n) {
  std::sort(v, v + n);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

CallThreads::CallThreads(int64_t bytes) : count_(g_num_threads.load()), outer_(t_call_threads) {
  const int cap = outer_ > 0 ? 0 : PipelineThreadCap();  // (a call inside a call keeps the outer's count)
  if (outer_ > 0) count_ = outer_;
  if (cap > 0 && cap < count_) {
    int size_class = 0;
    while (size_class + 1 < kSizeClasses && (int64_t{1} << (size_class + 1)) <= bytes) ++size_class;
    std::lock_guard<std::mutex> lk(g_classes_mu);
    SizeClass &k = g_classes[size_class];
    if (k.chosen >= 0 && ++k.calls > kCallsPerChoice) {  // time both again
      k = SizeClass();
      k.warmup = 0;
    }
    if (k.warmup > 0) {
      --k.warmup;
      option_ = 1;
    } else if (k.chosen >= 0) {
      option_ = k.chosen;
    } else {  // trying: alternate, and time this call
      option_ = k.tried[0] <= k.tried[1] ? 0 : 1;
      size_class_ = size_class;
    }
    if (option_ == 0) count_ = cap;
  }
  t_call_threads = t_last_call_threads = count_;
  if (outer_ == 0) t_last_call_parallel = 1;
  start_ = std::chrono::steady_clock::now();
}

CallThreads::CallThreads(const Geometry &g, DType d)
    : CallThreads(static_cast<int64_t>(std::min(9.0e18, static_cast<double>(g.outer) * static_cast<double>(g.channels) *
                                                            static_cast<double>(g.inner) * ElemSize(d)))) {}

CallThreads::~CallThreads() {
  t_call_threads = outer_;
  if (outer_ == 0) ThreadPool::Global().CallEnded(start_);
  if (size_class_ < 0) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard<std::mutex> lk(g_classes_mu);
  SizeClass &k = g_classes[size_class_];
  if (k.chosen >= 0 || k.tried[option_] >= kTrials) return;  // another thread completed the trials
  k.seconds[option_][k.tried[option_]++] = s;
  if (k.tried[0] == kTrials && k.tried[1] == kTrials) {
    // the setting unless one CPU fewer was clearly faster (a tie keeps every thread: GRAPH's choice)
    k.chosen = Median(k.seconds[0], kTrials) < kClearlyFaster * Median(k.seconds[1], kTrials) ? 0 : 1;
    k.calls = 0;
  }
}

}  // namespace bn_grad
