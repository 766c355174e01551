#include "core/value_walk.h"

#include <utility>
#include <vector>

#include "core/status_macros.h"

namespace kgrad {

absl::Status ForEachLeaf(
    const Value& v,
    absl::FunctionRef<absl::Status(const Value& leaf, absl::Span<const size_t> path)> fn) {
  // path[i] is the index taken at level i; tuples[i] the tuple it indexes.
  std::vector<const Value*> tuples;
  std::vector<size_t> path;
  const Value* at = &v;
  while (true) {
    if (at->is_tuple() && !at->tuple().empty()) {
      tuples.push_back(at);
      path.push_back(0);
      at = &at->tuple()[0];
      continue;
    }
    if (!at->is_tuple()) KGRAD_RETURN_IF_ERROR(fn(*at, path));
    // Next sibling, climbing out of finished tuples.
    while (!tuples.empty() && path.back() + 1 >= tuples.back()->tuple().size()) {
      tuples.pop_back();
      path.pop_back();
    }
    if (tuples.empty()) return absl::OkStatus();
    at = &tuples.back()->tuple()[++path.back()];
  }
}

absl::StatusOr<Value> MapLeaves(const Value& v,
                                absl::FunctionRef<absl::StatusOr<Value>(const Value&)> fn) {
  struct Frame {
    const Value* tuple;
    std::vector<Value> built;
  };
  std::vector<Frame> stack;
  const Value* at = &v;
  while (true) {
    Value done;
    if (at->is_tuple() && !at->tuple().empty()) {
      stack.push_back(Frame{at, {}});
      stack.back().built.reserve(at->tuple().size());
      at = &at->tuple()[0];
      continue;
    }
    if (at->is_tuple()) {
      done = Value::Tuple({});
    } else {
      KGRAD_ASSIGN_OR_RETURN(done, fn(*at));
    }
    // Hand the finished value to its tuple; close every tuple that is now complete.
    while (!stack.empty()) {
      Frame& f = stack.back();
      f.built.push_back(std::move(done));
      if (f.built.size() < f.tuple->tuple().size()) break;
      done = Value::Tuple(std::move(f.built));
      stack.pop_back();
    }
    if (stack.empty()) return done;
    at = &stack.back().tuple->tuple()[stack.back().built.size()];
  }
}

int64_t ValueDepth(const Value& v, int64_t limit) {
  // Breadth-first by level: the depth is the number of levels that hold a tuple
  // or a partial.
  std::vector<const Value*> level{&v};
  int64_t depth = 0;
  while (depth <= limit) {
    std::vector<const Value*> next;
    for (const Value* x : level) {
      if (x->is_tuple()) {
        for (const Value& e : x->tuple()) next.push_back(&e);
      } else if (x->is_partial()) {
        next.push_back(&x->partial().fn);
        for (const Value& a : x->partial().args) next.push_back(&a);
      }
    }
    bool aggregate = false;
    for (const Value* x : level) aggregate |= x->is_tuple() || x->is_partial();
    if (!aggregate) return depth;
    ++depth;
    level = std::move(next);
  }
  return limit + 1;
}

}  // namespace kgrad
