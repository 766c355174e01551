#include "backends/cpu/fused_elementwise_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/elementwise_rows.h"
#include "backends/cpu/parallel.h"
#include "backends/device.h"

namespace kgrad {
namespace cpu {
namespace {

constexpr int64_t kBlock = 512;

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

template <typename T>
T* AlignUp(T* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<T*>((a + 63) & ~static_cast<std::uintptr_t>(63));
}

// One instruction over n elements of contiguous rows: its primitive's functor
// through the kernels' row loops (elementwise_rows.h).
template <typename T>
void RunInstr(const FusedInstr& in, const T* a, const T* b, const T* c, const T* d, T* y,
              int64_t n) {
#define KGRAD_FUSED_RUN_Fused(Name, arity)                                            \
  case FusedCode::k##Name:                                                           \
    if constexpr (arity == 1) {                                                      \
      UnaryRow<ew::Name##Op>(in.attrs, a, y, n);                                     \
    } else {                                                                         \
      BinaryRow<ew::Name##Op>(in.attrs, a, 1, b, 1, y, n);                           \
    }                                                                                \
    return;
#define KGRAD_FUSED_RUN_Unfused(Name, arity)
  switch (in.code) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  KGRAD_FUSED_RUN_##fusion(Name, arity)
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
    case FusedCode::kMulAdd:
      MulAddRow(a, b, c, d, y, n);
      return;
  }
#undef KGRAD_FUSED_RUN_Fused
#undef KGRAD_FUSED_RUN_Unfused
}

// Rank-0 inputs when the run is larger than one element: each is read from a
// row filled with its value (per thread), like any other operand.
std::vector<int32_t> BroadcastInputs(absl::Span<const Tensor* const> inputs, int64_t count) {
  std::vector<int32_t> out;
  for (size_t v = 0; v < inputs.size(); ++v) {
    if (count > 1 && inputs[v]->NumElements() == 1) out.push_back(static_cast<int32_t>(v));
  }
  return out;
}

template <typename T>
void Evaluate(const FusedProgram& p, absl::Span<const Tensor* const> inputs,
              absl::Span<Tensor> outputs, int64_t count) {
  const std::vector<int32_t> broadcast = BroadcastInputs(inputs, count);
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  const int64_t work = static_cast<int64_t>(p.instrs.size()) * std::min(count, kBlock);
  // Threads only for two blocks or more, each worth a parallel region.
  ParallelFor(blocks, std::max<int64_t>(2, kParallelGrain / std::max<int64_t>(1, work)),
              [&](int64_t bb, int64_t be) {
    // Rows 64-byte aligned (a row of 16 floats is one AVX-512 vector): with
    // malloc's 16-byte alignment every vector load may straddle two cache lines.
    const int64_t width = RoundUp(std::min(count, kBlock), 64 / static_cast<int64_t>(sizeof(T)));
    const int64_t rows = p.rows + static_cast<int64_t>(broadcast.size());
    std::vector<T> storage(static_cast<size_t>(rows * width + 64 / sizeof(T)));
    T* scratch = AlignUp(storage.data());
    std::vector<const T*> at(p.num_inputs + p.instrs.size());
    std::vector<bool> row_input(p.num_inputs, false);
    for (size_t k = 0; k < broadcast.size(); ++k) {
      T* row = scratch + (p.rows + static_cast<int64_t>(k)) * width;
      std::fill(row, row + width, *inputs[broadcast[k]]->data<T>());
      at[broadcast[k]] = row;
      row_input[broadcast[k]] = true;
    }
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t off = blk * kBlock, n = std::min(kBlock, count - off);
      auto where = [&](int32_t v) -> T* {
        if (p.output_of[v] >= 0) return outputs[p.output_of[v]].mutable_data<T>() + off;
        return scratch + static_cast<int64_t>(p.row_of[v]) * width;
      };
      for (int32_t v = 0; v < p.num_inputs; ++v) {
        if (!row_input[v]) at[v] = inputs[v]->data<T>() + off;
      }
      for (size_t i = 0; i < p.instrs.size(); ++i) {
        const FusedInstr& in = p.instrs[i];
        const int32_t v = p.num_inputs + static_cast<int32_t>(i);
        T* y = where(v);
        auto operand = [&](int32_t id) { return id >= 0 ? at[id] : nullptr; };
        RunInstr(in, operand(in.a), operand(in.b), operand(in.c), operand(in.d), y, n);
        at[v] = y;
      }
    }
  });
}

}  // namespace

absl::Status RunFusedElementwise(const FusedProgram& program, absl::Span<const Tensor* const> inputs,
                                 absl::Span<Tensor> outputs, Device* device) {
  (void)device;
  // The run's size is its outputs' (inputs may be broadcast scalars).
  const Tensor& first = outputs.empty() ? *inputs.at(0) : outputs[0];
  const int64_t count = first.NumElements();
  if (count == 0) return absl::OkStatus();
  if (first.dtype() == DType::kFloat64) {
    Evaluate<double>(program, inputs, outputs, count);
  } else {
    Evaluate<float>(program, inputs, outputs, count);
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace kgrad
