#include "core/value_walk.h"

#include <utility>
#include <vector>

#include "core/status_macros.h"

namespace kgrad {

absl::Status ForEachLeaf(
    const Value& v,
    absl::FunctionRef<absl::Status(const Value& leaf, absl::Span<const size_t> path)> fn) {
  // path[i] is the index taken at level i; seqs[i] the tuple or list it indexes.
  std::vector<const Value*> seqs;
  std::vector<size_t> path;
  const Value* at = &v;
  while (true) {
    if (at->is_sequence() && !at->elements().empty()) {
      seqs.push_back(at);
      path.push_back(0);
      at = &at->elements()[0];
      continue;
    }
    if (!at->is_sequence()) KGRAD_RETURN_IF_ERROR(fn(*at, path));
    // Next sibling, climbing out of finished sequences.
    while (!seqs.empty() && path.back() + 1 >= seqs.back()->elements().size()) {
      seqs.pop_back();
      path.pop_back();
    }
    if (seqs.empty()) return absl::OkStatus();
    at = &seqs.back()->elements()[++path.back()];
  }
}

absl::StatusOr<Value> MapLeaves(const Value& v,
                                absl::FunctionRef<absl::StatusOr<Value>(const Value&)> fn) {
  struct Frame {
    const Value* seq;
    std::vector<Value> built;
  };
  // A tuple or list of `elems`, of `like`'s kind.
  auto rebuild = [](const Value& like, std::vector<Value> elems) {
    return like.is_list() ? Value::List(std::move(elems)) : Value::Tuple(std::move(elems));
  };
  std::vector<Frame> stack;
  const Value* at = &v;
  while (true) {
    Value done;
    if (at->is_sequence() && !at->elements().empty()) {
      stack.push_back(Frame{at, {}});
      stack.back().built.reserve(at->elements().size());
      at = &at->elements()[0];
      continue;
    }
    if (at->is_sequence()) {
      done = rebuild(*at, {});
    } else {
      KGRAD_ASSIGN_OR_RETURN(done, fn(*at));
    }
    // Hand the finished value to its sequence; close every one that is now complete.
    while (!stack.empty()) {
      Frame& f = stack.back();
      f.built.push_back(std::move(done));
      if (f.built.size() < f.seq->elements().size()) break;
      done = rebuild(*f.seq, std::move(f.built));
      stack.pop_back();
    }
    if (stack.empty()) return done;
    at = &stack.back().seq->elements()[stack.back().built.size()];
  }
}

int64_t ValueDepth(const Value& v, int64_t limit) {
  // Breadth-first by level: the depth is the number of levels that hold a tuple,
  // a list or a partial.
  std::vector<const Value*> level{&v};
  int64_t depth = 0;
  while (depth <= limit) {
    std::vector<const Value*> next;
    for (const Value* x : level) {
      if (x->is_sequence()) {
        for (const Value& e : x->elements()) next.push_back(&e);
      } else if (x->is_partial()) {
        next.push_back(&x->partial().fn);
        for (const Value& a : x->partial().args) next.push_back(&a);
      }
    }
    bool aggregate = false;
    for (const Value* x : level) aggregate |= x->is_sequence() || x->is_partial();
    if (!aggregate) return depth;
    ++depth;
    level = std::move(next);
  }
  return limit + 1;
}

}  // namespace kgrad
