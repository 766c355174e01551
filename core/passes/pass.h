// Graph passes. A pass is a small class with a static-free Run that rewrites the
// graphs reachable from a root and returns whether anything changed (after XLA's
// HloPassInterface). A Pipeline runs passes in order, repeatedly, to a fixpoint.
//
// Threading contract: a pass mutates one Module; it runs on one thread, and no
// other thread may touch that Module meanwhile. Passes keep no state between runs.
#ifndef KGRAD_CORE_PASSES_PASS_H_
#define KGRAD_CORE_PASSES_PASS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

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

class Pipeline {
 public:
  Pipeline& Add(std::unique_ptr<Pass> pass) {
    passes_.push_back(std::move(pass));
    return *this;
  }
  // Verifies the use lists after every pass (a debugging aid: slow).
  Pipeline& CheckUsesAfterEachPass(bool on) {
    check_uses_ = on;
    return *this;
  }
  // Runs every pass in turn until a whole round changes nothing (or
  // `max_rounds`); true when anything changed.
  absl::StatusOr<bool> Run(Module& module, FuncGraph* root, int max_rounds = 32);
  // What the last Run did: "inline x2 (1.3 ms), simplify x3 (0.8 ms), ...": how many
  // runs changed the IR, and the time spent in each pass.
  const std::string& log() const { return log_; }

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  bool check_uses_ = false;
  std::string log_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_PASSES_PASS_H_
