// The suite's table: scenarios 1-6, kgrad vs PyTorch, with the targets.
#ifndef KGRAD_BENCH_SUITE_ROWS_H_
#define KGRAD_BENCH_SUITE_ROWS_H_

#include "bench/suite_kgrad.h"
#include "bench/suite_report.h"

namespace kgrad {
namespace bench {

// Adds rows and notes to `report` from report->kgrad and report->torch (either may
// lack keys: the row shows n/a).
void AddRows(const SuiteShapes& s, Report* report);

// The GPU suite's table (//bench:gpu_suite): MLP and conv net forward, step and
// MLP Jvp against PyTorch on the same GPU, the losses, and how far each step's
// result is from the CPU backend's.
void AddGpuRows(const SuiteShapes& s, Report* report);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_ROWS_H_
