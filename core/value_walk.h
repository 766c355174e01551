// Walks over the tuple and list structure of a Value without recursion: a tuple
// may nest as deep as a user's loop makes it, so every consumer that descends into
// tuples and lists (device transfers, zeros-like, printing, saving, metering) goes
// through these instead of calling itself. Leaves are the values that are neither
// (tensors, scalars, functions, envs, ...), visited depth-first, left to right.
#ifndef KGRAD_CORE_VALUE_WALK_H_
#define KGRAD_CORE_VALUE_WALK_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/value.h"

namespace kgrad {

// Calls `fn(leaf, path)` for every leaf; `path` holds the element indices from the
// root (empty when `v` is a leaf). Stops at the first error and returns it.
absl::Status ForEachLeaf(
    const Value& v,
    absl::FunctionRef<absl::Status(const Value& leaf, absl::Span<const size_t> path)> fn);

// `v` with each leaf replaced by `fn(leaf)`; tuples and lists are rebuilt with the
// same structure. The first error is returned.
absl::StatusOr<Value> MapLeaves(const Value& v,
                                absl::FunctionRef<absl::StatusOr<Value>(const Value&)> fn);

// Levels of tuple, list and partial-application nesting (0 for a leaf), counted without
// recursion; stops counting at `limit` (returns `limit` + 1 when deeper).
int64_t ValueDepth(const Value& v, int64_t limit = INT64_MAX - 1);

}  // namespace kgrad

#endif  // KGRAD_CORE_VALUE_WALK_H_
