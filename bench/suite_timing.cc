#include "bench/suite_timing.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace kgrad {
namespace bench {

double MedianMs(const std::function<void()>& fn, const TimingBudget& budget, int max_reps,
                const std::function<void()>& setup) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < budget.warmup; ++i) {
    if (setup) setup();
    fn();
  }
  int limit = max_reps < 0 ? budget.max_reps : std::min(max_reps, budget.max_reps);
  std::vector<double> times;
  Clock::time_point start = Clock::now();
  while (static_cast<int>(times.size()) < limit) {
    if (setup) setup();
    Clock::time_point t0 = Clock::now();
    fn();
    Clock::time_point t1 = Clock::now();
    times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    bool enough = static_cast<int>(times.size()) >= budget.min_reps;
    if (enough && std::chrono::duration<double>(t1 - start).count() > budget.budget_s) break;
  }
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
}

Progress::Progress(int total) : total_(std::max(total, 1)), tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::Draw(const std::string& what) {
  constexpr int kWidth = 30;
  int filled = std::min(kWidth, done_ * kWidth / total_);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  if (tty_) {
    // \033[K clears what a longer previous label left behind.
    std::fprintf(stderr, "\r[%s] %3d%% %s\033[K", bar.c_str(), 100 * done_ / total_, what.c_str());
  } else {
    std::fprintf(stderr, "[%s] %3d%% %s\n", bar.c_str(), 100 * done_ / total_, what.c_str());
  }
  std::fflush(stderr);
}

void Progress::Done(const std::string& what) {
  done_ = std::min(done_ + 1, total_);
  last_ = what;
  Draw(what);
}

void Progress::Note(const std::string& message) {
  if (tty_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", message.c_str());
  if (tty_ && done_ > 0) Draw(last_);
  std::fflush(stderr);
}

void Progress::Finish() {
  done_ = total_;
  Draw("done");
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace bench
}  // namespace kgrad
