// Timing and progress for the benchmark suite (bench/suite_main.cc).
#ifndef KGRAD_BENCH_SUITE_TIMING_H_
#define KGRAD_BENCH_SUITE_TIMING_H_

#include <functional>
#include <string>

namespace kgrad {
namespace bench {

// How long each measurement runs. bench/torch_side.py follows the same rule.
struct TimingBudget {
  int warmup = 2;        // untimed runs first (caches, allocator, threads)
  double budget_s = 2;   // repetitions stop once this much time has passed...
  int min_reps = 5;      // ...and at least this many ran,
  int max_reps = 30;     // or at this many
};

// The median wall time of fn() in ms under `budget`; at most `max_reps` (< 0: the
// budget's) repetitions. `setup` (when given) runs untimed before every run.
double MedianMs(const std::function<void()>& fn, const TimingBudget& budget, int max_reps = -1,
                const std::function<void()>& setup = nullptr);

// A progress bar on stderr: redrawn in place on a terminal, one line per stage
// otherwise (logs stay readable).
class Progress {
 public:
  explicit Progress(int total);
  // Marks one stage done.
  void Done(const std::string& what);
  // A message on its own line (the bar is redrawn after it).
  void Note(const std::string& message);
  void Finish();

 private:
  void Draw(const std::string& what);

  int total_;
  int done_ = 0;
  bool tty_;
  std::string last_;
};

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_TIMING_H_
