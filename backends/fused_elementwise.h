// A run of elementwise applications evaluated as one executor step. Where a
// graph's applications are many and small (a chain of tiny elementwise ops, the
// tangent pass of such a chain), the executor's cost per application dominates;
// fused, the run's values stay in a small scratch block and only the values used
// outside the run are written to tensors.
//
// Values of a program are numbered: its inputs 0..num_inputs-1, then one per
// instruction in order. An instruction reads one or two earlier values. A device
// that can evaluate programs returns an evaluator from
// Device::fused_elementwise(); it is called only when every input is a tensor of
// one floating dtype and one shape, or a rank-0 tensor of that dtype (a scalar
// operand such as a clip bound, broadcast) (the executor checks, and otherwise
// runs the applications one by one with their own kernels). Each instruction
// computes exactly what its primitive's kernel would: both evaluate the op's
// functor (ops/elementwise_functors.h) through the same row loops.
#ifndef KGRAD_BACKENDS_FUSED_ELEMENTWISE_H_
#define KGRAD_BACKENDS_FUSED_ELEMENTWISE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/primitive.h"
#include "core/tensor.h"
#include "ops/elementwise_functors.h"

namespace kgrad {

class Device;

// One code per row of ops/elementwise_table.inc marked Fused, then kMulAdd:
// a * b + c * d, an add of two products read nowhere else (the product rule's
// tangent), one instruction instead of three; not a primitive of its own.
#define KGRAD_FUSED_CODE_Fused(Name) k##Name,
#define KGRAD_FUSED_CODE_Unfused(Name)
enum class FusedCode : uint8_t {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  KGRAD_FUSED_CODE_##fusion(Name)
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
  kMulAdd,
};
#undef KGRAD_FUSED_CODE_Fused
#undef KGRAD_FUSED_CODE_Unfused

// The instruction computing primitive `id`, or nullopt when it is not fused.
std::optional<FusedCode> FusedCodeOf(PrimId id);
// The primitive instruction `code` computes (add for kMulAdd, its last step).
PrimId PrimIdOf(FusedCode code);
bool IsBinary(FusedCode code);

struct FusedInstr {
  FusedCode code;
  int32_t a = -1;  // value ids
  int32_t b = -1;  // binary and kMulAdd
  int32_t c = -1;  // kMulAdd
  int32_t d = -1;  // kMulAdd
  ew::Attrs attrs;  // the application's attributes (ops::ElementwiseAttrs)
};

// The value ids an instruction reads (1, 2 or 4 of them).
int NumOperands(FusedCode code);

struct FusedProgram {
  int32_t num_inputs = 0;
  std::vector<FusedInstr> instrs;
  std::vector<int32_t> outputs;  // value ids written to tensors, in order
  // Where an evaluator keeps each value while it runs (AssignRows): output k, or a
  // scratch row (rows are reused after a value's last read), or neither (inputs).
  std::vector<int32_t> output_of;  // per value: output index, or -1
  std::vector<int32_t> row_of;     // per value: scratch row, or -1
  int32_t rows = 0;
  // Per value: the last instruction reading it, or -1. An output produced at or
  // after an input's last read may be written into that input's buffer (every
  // instruction is pointwise and a block runs the instructions in order).
  std::vector<int32_t> last_read;
};

// Fills output_of, row_of, rows and last_read by a linear scan over the instructions (an
// instruction may write a row it reads: every instruction is pointwise).
void AssignRows(FusedProgram* program);

// Evaluates `program` on `inputs` (one floating dtype; one shape, or rank 0 for
// broadcast scalars) into `outputs` (allocated by the caller with that dtype and
// the full shape; an output may share a full-shape input's buffer as last_read
// allows).
using FusedElementwiseFn = absl::Status (*)(const FusedProgram& program,
                                            absl::Span<const Tensor* const> inputs,
                                            absl::Span<Tensor> outputs, Device* device);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_FUSED_ELEMENTWISE_H_
