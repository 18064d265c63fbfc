// The thread-count setting (num_threads.h).
#include "num_threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>

#include "thread_pool.h"

namespace bn_grad {
namespace {

std::atomic<int> g_num_threads{UsableCpus()};

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

int GetNumThreads() { return g_num_threads.load(); }

}  // namespace bn_grad
