// The pool's stall fallback (csrc/thread_pool.h, ThreadPool::Stalled), as a program:
// prints "<label> <jobs> <jobs on one thread> <jobs on two threads>" per phase; every task must
// run exactly once in every job (exit 1 otherwise).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace {

constexpr int kTasks = 64;

void Busy(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

// One job of kTasks tasks of ~10 us; with `stall`, a pool thread's tasks take 5 ms (a pool thread
// preempted while it holds a task). Returns how many threads ran tasks; false in *ok on a task
// run twice or never.
size_t Job(bool stall, bool *ok) {
  static const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::vector<std::atomic<int>> runs(kTasks);
  bn_grad::ThreadPool::Global().Run(kTasks, 2, [&](int64_t t) {
    runs[t].fetch_add(1);
    {
      std::lock_guard<std::mutex> lk(mu);
      ids.insert(std::this_thread::get_id());
    }
    if (stall && std::this_thread::get_id() != caller) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } else {
      Busy(std::chrono::microseconds(10));
    }
  });
  for (auto &r : runs) *ok = *ok && r.load() == 1;
  return ids.size();
}

void Phase(const char *label, int jobs, bool stall, bool *ok) {
  int one = 0, two = 0;
  for (int i = 0; i < jobs; ++i) {
    const size_t n = Job(stall, ok);
    one += n == 1;
    two += n == 2;
  }
  std::printf("%s %d %d %d\n", label, jobs, one, two);
}

}  // namespace

int main() {
  if (bn_grad::ThreadPool::Global().Reserve(1) < 1) return 2;
  bool ok = true;
  Phase("clean", 20, false, &ok);
  Phase("stall", 1, true, &ok);
  Phase("after_stall", 16, false, &ok);  // kMinSerialRuns: on the caller alone
  Phase("recovered", 20, false, &ok);
  return ok ? 0 : 1;
}
