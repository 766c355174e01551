// Registration of the CPU kernels, one function per op family (each in its own
// translation unit so that Eigen-heavy files compile separately), and helpers
// the families share.
#ifndef KGRAD_BACKENDS_CPU_CPU_KERNELS_H_
#define KGRAD_BACKENDS_CPU_CPU_KERNELS_H_

#include <functional>
#include <type_traits>

#include "backends/kernel.h"
#include "ops/elementwise_functors.h"

// The op families with kernels. Every device defines, in its own namespace, one
// `void Register<Family>Kernels(KernelTable* table)` per family (backends/cuda
// declares its set from this list too).
#define KGRAD_KERNEL_FAMILIES(X) X(Elementwise) X(Reduce) X(Shape) X(Linalg) X(Nn) X(Conv)
#define KGRAD_DECLARE_REGISTER_KERNELS(Family) void Register##Family##Kernels(KernelTable* table);

namespace kgrad {

struct StridedView;  // backends/view_kernels.h
namespace ops {
struct AxisShape;    // ops/shape_checks.h
struct CumSumSpec;   // ops/index_ops.h
}  // namespace ops

namespace cpu {

KGRAD_KERNEL_FAMILIES(KGRAD_DECLARE_REGISTER_KERNELS)
// The CPU's families beside the shape family, each in its own file and library
// and registered by CpuKernels (cpu_device.cc). CUDA runs the index family in
// its shape family and the others through the CPU fallback.
// gather_elements, scatter_elements, cumsum (index_kernels.cc).
void RegisterIndexKernels(KernelTable* table);
// The run-time shapes: shape_of, dynamic_reshape, ... (dynamic_shape_kernels.cc).
void RegisterDynamicShapeKernels(KernelTable* table);
// cumsum, one_hot, split and tile with a run-time axis, depth, sizes or repeats
// (dynamic_index_kernels.cc).
void RegisterDynamicIndexKernels(KernelTable* table);
// The run-time axes: dynamic_unsqueeze, dynamic_squeeze, dynamic_reduce_sum
// (dynamic_axes_kernels.cc).
void RegisterDynamicAxesKernels(KernelTable* table);
// Input i (called `what`) as a one-element i32 or i64 operand's value
// (ops::CheckScalarOperand's check), for the kernels that read a run-time count
// (dynamic_index_kernels.cc).
absl::StatusOr<int64_t> ScalarOperand(const KernelContext& ctx, int i, const char* what);
// topk and nonzero (selection_kernels.cc).
void RegisterSelectionKernels(KernelTable* table);
// tc, tensor comprehensions run by an interpreter and GEMMs (tc_kernels.cc).
void RegisterTcKernels(KernelTable* table);
// batch_norm_grad and layer_norm_grad (norm_grad_kernels.cc, in the nn family's
// library; RegisterNnKernels calls it).
void RegisterNormGradKernels(KernelTable* table);

// The loops that a static op and its run-time form share, given the parsed spec:
// cumsum (index_kernels.cc) and one_hot (shape_kernels.cc; the output dtype and
// on/off values from the primitive's attributes).
absl::StatusOr<Value> CumSumOf(KernelContext& ctx, const Tensor* x, const ops::CumSumSpec& s);
absl::StatusOr<Value> OneHotOf(KernelContext& ctx, const Tensor* indices, const ops::AxisShape& s);

// The CPU's copies for the data-movement kernels (backends/view_kernels.h's
// `Mover`: a strided view to or from a dense tensor, a fill), defined in
// shape_kernels.cc and shared by the shape family's files.
struct CpuMover {
  static absl::Status ViewToDense(KernelContext& ctx, const StridedView& v, const Tensor& src,
                                  const Tensor& dst);
  static absl::Status DenseToView(KernelContext& ctx, const Tensor& src, const StridedView& v,
                                  const Tensor& dst);
  static absl::Status Fill(KernelContext& ctx, const Tensor& t, double value);
};

// Wrapping integer arithmetic: the elementwise functors' (one definition).
using ew::WrapAdd;
using ew::WrapMul;
using ew::WrapNeg;
using ew::WrapSub;

}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_CPU_KERNELS_H_
