// The collective primitives (ops/collective.h) on host tensors, over any
// Communicator: the checks inference makes, repeated for the communicator's
// size; an agreement between the ranks on what they are about to run (so that
// ranks holding different shapes or different programs fail with a Status on
// every rank, not with a hang or garbage); the layout around the gathered or
// scattered axis; mean as a sum divided on every rank alike.
#ifndef KGRAD_BACKENDS_COLLECTIVES_H_
#define KGRAD_BACKENDS_COLLECTIVES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/communicator.h"
#include "core/primitive.h"
#include "core/tensor.h"

namespace kgrad {

// y = p(x) across the ranks of `comm`; x and y are host tensors (a communicator
// whose memory is the host).
absl::StatusOr<Tensor> RunCollective(const Primitive& p, const Tensor& x, Communicator& comm);

// What every collective kernel does first, whatever its device: the checks
// inference makes, for the communicator's size, and the ranks' agreement on what
// they run. Returns y's dims.
absl::StatusOr<Shape> PrepareCollective(const Primitive& p, const Tensor& x, Communicator& comm);

// A fingerprint that is the same in every process (FNV-1a; absl::Hash is
// salted per process), for Communicator::Agree.
uint64_t StableFingerprint(absl::string_view bytes);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_COLLECTIVES_H_
