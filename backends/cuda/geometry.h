// Internal to backends/cuda: the builders that turn shapes into launch.h's
// geometry structs. Host code with no CUDA dependency, so that the kernels'
// emulation test (tests/cuda/emulated_kernels_test.cc) runs it on any machine.
#ifndef KGRAD_BACKENDS_CUDA_GEOMETRY_H_
#define KGRAD_BACKENDS_CUDA_GEOMETRY_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "backends/cuda/kernels/launch.h"
#include "core/shape.h"

namespace kgrad {
namespace cuda {

// The broadcast walk of `out` over up to three operand shapes (right-aligned;
// size-1 dims broadcast), with dims of size 1 dropped and neighbours merged
// wherever every operand walks them as one.
BroadcastGeom MakeBroadcastGeom(const Shape& out, absl::Span<const Shape* const> ins);

// A copy over `dims` reading `src_strides` from src_offset and writing
// `dst_strides` from dst_offset; size-1 dims dropped and contiguous neighbours
// merged.
CopyGeom MakeCopyGeom(const Shape& dims, const Shape& src_strides, const Shape& dst_strides,
                      int64_t src_offset = 0, int64_t dst_offset = 0);
// Dense destination / dense source variants.
CopyGeom DenseWrite(const Shape& dims, const Shape& src_strides, int64_t src_offset = 0);
CopyGeom DenseRead(const Shape& dims, const Shape& dst_strides, int64_t dst_offset = 0);

// The reduction of `in` over the dims marked in `reduced`: kept dims (the output,
// dense) and reduced dims, each run of neighbours of one kind merged.
ReduceGeom MakeReduceGeom(const Shape& in, const std::vector<bool>& reduced);

}  // namespace cuda
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CUDA_GEOMETRY_H_
