// Graph passes. A pass is a small class with a static-free Run that rewrites the
// graphs reachable from a root and returns whether anything changed (after XLA's
// HloPassInterface). Optimize (core/passes/optimize.h) runs them to a fixpoint.
//
// Threading contract: a pass mutates one Module; it runs on one thread, and no
// other thread may touch that Module meanwhile. Passes keep no state between runs.
#ifndef KGRAD_CORE_PASSES_PASS_H_
#define KGRAD_CORE_PASSES_PASS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/module.h"

namespace kgrad {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // Rewrites the graphs `root` reaches; true when the IR changed.
  virtual absl::StatusOr<bool> Run(Module& module, FuncGraph* root) = 0;
};

// Runs passes one at a time and keeps what each did: how many runs changed the IR
// and the time spent ("inline x2 (1.3 ms), simplify x3 (0.8 ms)"). With
// `check_uses`, the use lists are verified after every run (a debugging aid: slow).
class PassLog {
 public:
  explicit PassLog(bool check_uses = false) : check_uses_(check_uses) {}
  absl::StatusOr<bool> Run(Pass& pass, Module& module, FuncGraph* root);
  std::string ToString() const;

 private:
  bool check_uses_;
  std::map<std::string, int> counts_;
  std::map<std::string, double> ms_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_PASS_H_
