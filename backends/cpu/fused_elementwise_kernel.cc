#include "backends/cpu/fused_elementwise_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/eigen.h"
#include "backends/cpu/parallel.h"
#include "backends/device.h"

namespace kgrad {
namespace cpu {
namespace {

constexpr int64_t kBlock = 512;

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

int64_t RoundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

template <typename T>
T* AlignUp(T* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<T*>((a + 63) & ~static_cast<std::uintptr_t>(63));
}

template <typename T>
void Unary(FusedCode code, const T* x, T* y, int64_t n) {
  ConstArrayMap<T> a(x, n);
  ArrayMap<T> out(y, n);
  switch (code) {
    case FusedCode::kNeg: for (int64_t i = 0; i < n; ++i) y[i] = -x[i]; break;
    case FusedCode::kRelu: for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? T(0) : x[i]; break;
    case FusedCode::kTanh: out = a.tanh(); break;
    case FusedCode::kSin: out = a.sin(); break;
    case FusedCode::kCos: out = a.cos(); break;
    case FusedCode::kExp: out = Exp(a); break;
    case FusedCode::kSigmoid: out = (T(1) + Exp(-a)).inverse(); break;
    default: break;
  }
}

template <typename T>
void Binary(FusedCode code, const T* a, const T* b, T* y, int64_t n) {
  switch (code) {
    case FusedCode::kAdd: for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i]; break;
    case FusedCode::kSub: for (int64_t i = 0; i < n; ++i) y[i] = a[i] - b[i]; break;
    case FusedCode::kMul: for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i]; break;
    case FusedCode::kDiv: for (int64_t i = 0; i < n; ++i) y[i] = a[i] / b[i]; break;
    case FusedCode::kTanhGrad: for (int64_t i = 0; i < n; ++i) y[i] = b[i] * (T(1) - a[i] * a[i]); break;
    case FusedCode::kSigmoidGrad: for (int64_t i = 0; i < n; ++i) y[i] = b[i] * a[i] * (T(1) - a[i]); break;
    // Eigen's vectorised cos and sin, as the sin and cos kernels use (the
    // unfused sin_grad kernel calls std::cos per element: equal within an ulp or
    // two, and several times slower).
    case FusedCode::kSinGrad: ArrayMap<T>(y, n) = ConstArrayMap<T>(b, n) * ConstArrayMap<T>(a, n).cos(); break;
    case FusedCode::kCosGrad: ArrayMap<T>(y, n) = -(ConstArrayMap<T>(b, n) * ConstArrayMap<T>(a, n).sin()); break;
    case FusedCode::kReluGrad: for (int64_t i = 0; i < n; ++i) y[i] = a[i] > T(0) ? b[i] : T(0); break;
    // NaN wins, as in the maximum and minimum kernels (`a != a`: a is NaN).
    case FusedCode::kMaximum: for (int64_t i = 0; i < n; ++i) y[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i]; break;
    case FusedCode::kMinimum: for (int64_t i = 0; i < n; ++i) y[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i]; break;
    default: break;
  }
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
        if (in.code == FusedCode::kMulAdd) {
          const T *a = at[in.a], *b = at[in.b], *c = at[in.c], *d = at[in.d];
          for (int64_t e = 0; e < n; ++e) y[e] = a[e] * b[e] + c[e] * d[e];
        } else if (IsBinary(in.code)) {
          Binary(in.code, at[in.a], at[in.b], y, n);
        } else {
          Unary(in.code, at[in.a], y, n);
        }
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
