// The pool's stall fallback (csrc/thread_pool.h, ThreadPool::Stalled), as a program. One job in
// which a pool thread holds a task for 200 ms (a preempted thread); then the jobs that follow must
// run on the caller alone until the fallback's count is used up, and the count must be back at 0.
// Prints "<what> <value>" lines; every task must run exactly once in every job (exit 1 otherwise).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "pool_job.h"

namespace {

// Runs one job; returns how many threads ran its tasks. With `stall`, the first task a pool
// thread takes sets `joined` and sleeps 200 ms, and the caller's tasks wait for it to join (2 s
// in all, so a pool thread that never joins fails the check on stall_threads, not the timeout),
// so the caller's own share is short against its wait for that task.
size_t Job(bool stall, bool *ok) {
  std::atomic<bool> joined{false};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  return pool_test::Job([&](bool on_caller) {
    if (!stall) return;
    if (!on_caller) {
      if (!joined.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    while (!joined.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  }, ok);
}

}  // namespace

int main() {
  bool ok = true;
  bn_grad::ThreadPool *warmed = pool_test::WarmedPool([&] { Job(false, &ok); });
  if (warmed == nullptr) return 2;
  auto &pool = *warmed;
  std::printf("stall_threads %zu\n", Job(true, &ok));
  const int left = pool.SerialJobsLeft();
  std::printf("serial_left %d\n", left);
  int alone = 0;
  for (int i = 0; i < left; ++i) alone += Job(false, &ok) == 1;
  std::printf("alone %d\n", alone);
  std::printf("serial_left_after %d\n", pool.SerialJobsLeft());
  return ok ? 0 : 1;
}
