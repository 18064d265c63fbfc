// The thread-count setting (num_threads.h).
#include "num_threads.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "thread_pool.h"

namespace bn_grad {
namespace {

std::atomic<int> g_num_threads{UsableCpus()};

// MindSpore's PYNATIVE pipeline runs kernels on threads it names "<stage>_queue" (frontend_queue,
// backend_queue, launch_queue: its runtime/pipeline AsyncRQueue). While one of them runs ours,
// MindSpore's Python thread runs too: it dispatches the next operators, or waits for the queue in a
// busy loop (AsyncRQueue::Wait). There the kernels leave it one CPU: on 2 CPUs a second kernel
// thread only competes with it, while GRAPH mode, where nothing spins, gains from every thread
// (docs/performance.md, "Threads"). The CPU count is the one the thread saw first.
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

int GetNumThreads() {
  const int n = g_num_threads.load();
  const int cap = PipelineThreadCap();
  return cap > 0 ? std::min(n, cap) : n;
}

}  // namespace bn_grad
