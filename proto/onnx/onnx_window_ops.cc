// ONNX op mappings: the sliding-window ops (Conv, ConvTranspose, MaxPool,
// AveragePool, the global pools) over 1-D (N, C, L), 2-D (N, C, H, W) and 3-D
// (N, C, D, H, W) inputs.
//
// kgrad's window primitives take 2-D and 3-D windows natively (ops/conv_window.h)
// with (begin, end) padding per axis; a 1-D op runs on the input with a unit
// height (expand_dims / squeeze at axis 2), so that every backend runs it as the
// 2-D op it has tuned. What the primitives lack is composed exactly:
//   * ceil_mode: extra padding at the end, as many cells as the last window needs
//     (windows start inside the input or its left padding, as ONNX and PyTorch say);
//   * AveragePool's divisor: avg_pool2d with count_include_pad=true divides by
//     the kernel's cell count; the result is rescaled by cells / count, a
//     constant folded here from the static spatial shape (count: the window's
//     cells inside the input, plus the declared pads when count_include_pad=1,
//     never the ceil extension);
//   * dilated pooling: the max (or sum) of the kernel's strided slices of the
//     input padded with -inf (or 0);
//   * MaxPool's Indices: the argmax over those slices, mapped through constants.
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"

namespace kgrad {
namespace onnx_import {
namespace {

// Three axes (depth, height, width) as in ops/conv_window.h: an op over nsp
// spatial axes fills the last nsp; the others are trivial.
constexpr int kAxes = 3;
using Axes = std::array<int64_t, kAxes>;

// The window of one node. `prim` is the spatial rank of the primitive it
// becomes: 2 for 1-D and 2-D ops (a 1-D op is lifted to a unit height), 3 for 3-D.
struct WindowNd {
  int nsp = 2, prim = 2;
  Axes kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1}, lo{0, 0, 0}, hi{0, 0, 0};
  std::string auto_pad;
  int64_t Eff(int i) const { return dilation[i] * (kernel[i] - 1) + 1; }
  // The primitive's axes, first to last.
  int first() const { return kAxes - prim; }
  std::vector<int64_t> Prim(const Axes& v) const { return {v.begin() + first(), v.end()}; }
  // (begin, end) per primitive axis, with the end padding `end`.
  std::vector<int64_t> Padding(const Axes& end) const {
    std::vector<int64_t> p;
    for (int i = first(); i < kAxes; ++i) p.insert(p.end(), {lo[i], end[i]});
    return p;
  }
  std::vector<int64_t> Padding() const { return Padding(hi); }
  std::vector<int64_t> Kernel() const { return Prim(kernel); }
  std::vector<int64_t> Strides() const { return Prim(stride); }
  std::vector<int64_t> Dilations() const { return Prim(dilation); }
};

// The number of spatial axes of x (1, 2 or 3).
absl::StatusOr<int> SpatialRank(NodeContext& c, const AbstractTensor* x) {
  if (x->rank() < 3 || x->rank() > 5) {
    return c.Error(absl::StrCat("needs a 1-D (N, C, L), 2-D (N, C, H, W) or 3-D (N, C, D, H, W) input, got ",
                                x->ToString()));
  }
  return x->rank() - 2;
}

// The static spatial sizes of x in the last nsp axes (kUnknownDim where unknown).
Axes SpatialSizes(const AbstractTensor* x, int nsp) {
  Axes in{1, 1, 1};
  for (int i = 0; i < nsp; ++i) in[kAxes - nsp + i] = x->shape()[2 + i];
  return in;
}

// Reads an `nsp`-entry attribute into the last nsp axes of `out` (whose entries
// there are the default).
absl::Status ReadAxes(NodeContext& c, const std::string& name, int nsp, int64_t min, Axes* out) {
  const std::vector<int64_t> dflt(out->end() - nsp, out->end());
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> v, c.Ints(name, dflt));
  if (static_cast<int>(v.size()) != nsp) {
    return c.Error(absl::StrCat(name, " must have ", nsp, " entries, got [", absl::StrJoin(v, ", "), "]"));
  }
  for (int i = 0; i < nsp; ++i) {
    if (v[i] < min || v[i] > (int64_t{1} << 30)) {
      return c.Error(
          absl::StrCat(name, " must be >= ", min, " (and at most 2^30), got [", absl::StrJoin(v, ", "), "]"));
    }
    (*out)[kAxes - nsp + i] = v[i];
  }
  return absl::OkStatus();
}

// kernel_shape (default `kernel`, empty: required), strides, dilations, pads
// ([x1_begin, x2_begin, ..., x1_end, x2_end]) and auto_pad. SAME_UPPER/SAME_LOWER
// are resolved for forward windows (output ceil(in / stride)) from the static
// sizes `in`; ConvTranspose resolves them itself (`transpose`).
absl::StatusOr<WindowNd> ReadWindow(NodeContext& c, int nsp, const std::vector<int64_t>& kernel, const Axes& in,
                                    bool transpose) {
  WindowNd w;
  w.nsp = nsp;
  w.prim = nsp == 3 ? 3 : 2;
  if (kernel.empty() && !c.HasAttr("kernel_shape")) return c.Error("kernel_shape is required");
  for (int i = 0; i < static_cast<int>(kernel.size()) && i < nsp; ++i) w.kernel[kAxes - nsp + i] = kernel[i];
  KGRAD_RETURN_IF_ERROR(ReadAxes(c, "kernel_shape", nsp, 1, &w.kernel));
  KGRAD_RETURN_IF_ERROR(ReadAxes(c, "strides", nsp, 1, &w.stride));
  KGRAD_RETURN_IF_ERROR(ReadAxes(c, "dilations", nsp, 1, &w.dilation));
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> pads, c.Ints("pads", std::vector<int64_t>(2 * nsp, 0)));
  if (static_cast<int>(pads.size()) != 2 * nsp) {
    return c.Error(absl::StrCat("pads must have ", 2 * nsp, " entries, got [", absl::StrJoin(pads, ", "), "]"));
  }
  for (int i = 0; i < nsp; ++i) {
    if (pads[i] < 0 || pads[nsp + i] < 0 || pads[i] > (1 << 30) || pads[nsp + i] > (1 << 30)) {
      return c.Error(absl::StrCat("pads must be >= 0, got [", absl::StrJoin(pads, ", "), "]"));
    }
    w.lo[kAxes - nsp + i] = pads[i];
    w.hi[kAxes - nsp + i] = pads[nsp + i];
  }
  KGRAD_ASSIGN_OR_RETURN(w.auto_pad, c.String("auto_pad", "NOTSET"));
  if (w.auto_pad == "NOTSET") return w;
  if (w.auto_pad == "VALID") {
    w.lo = w.hi = {0, 0, 0};
    return w;
  }
  if (w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER") {
    return c.Error(absl::StrCat("auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, got ", w.auto_pad));
  }
  if (transpose) return w;
  for (int i = kAxes - nsp; i < kAxes; ++i) {
    if (in[i] < 0) return c.Error("auto_pad SAME needs static spatial sizes");
    const int64_t out = (in[i] + w.stride[i] - 1) / w.stride[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * w.stride[i] + w.Eff(i) - in[i]);
    const int64_t small = total / 2;  // SAME_UPPER puts the odd cell at the end
    w.lo[i] = w.auto_pad == "SAME_UPPER" ? small : total - small;
    w.hi[i] = total - w.lo[i];
  }
  return w;
}

absl::StatusOr<ImportedValue> Lift(NodeContext& c, const ImportedValue& v, int nsp) {
  if (nsp != 1) return v;
  return c.Emit(PrimId::kExpandDims, {v}, {{"axis", int64_t{2}}});
}

absl::StatusOr<ImportedValue> Unlift(NodeContext& c, const ImportedValue& v, int nsp) {
  if (nsp != 1) return v;
  return c.Emit(PrimId::kSqueeze, {v}, {{"axes", std::vector<int64_t>{2}}});
}

// y + reshape(b, [C, 1, ...]) when the optional bias input 2 is present; then
// the lifted height is dropped again.
Outputs AddBiasAndUnlift(NodeContext& c, ImportedValue y, const WindowNd& w) {
  if (c.HasInput(2)) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue bias, c.Input(2));
    std::vector<int64_t> shape(1 + w.prim, 1);
    shape[0] = -1;
    KGRAD_ASSIGN_OR_RETURN(bias, c.Emit(PrimId::kReshape, {bias}, {{"shape", shape}}));
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kAdd, {y, bias}));
  }
  return OneOutput(Unlift(c, y, w.nsp));
}

// The filter's spatial sizes (empty when unknown).
absl::StatusOr<std::vector<int64_t>> FilterKernel(NodeContext& c, const AbstractTensor* w, int nsp) {
  if (w->rank() != nsp + 2) {
    return c.Error(absl::StrCat("the filter must have rank ", nsp + 2, " like the input, got ", w->ToString()));
  }
  std::vector<int64_t> k(w->shape().begin() + 2, w->shape().end());
  for (int64_t d : k) {
    if (d < 0) return std::vector<int64_t>{};
  }
  return k;
}

// What Conv and ConvTranspose read first: x, the filter w (input 1), their types,
// the spatial rank and the filter's static spatial sizes (empty when unknown).
struct ConvOperands {
  ImportedValue x, w;
  const AbstractTensor* tx;
  const AbstractTensor* tw;
  int nsp;
  std::vector<int64_t> kernel;
};

absl::StatusOr<ConvOperands> ReadConvOperands(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  ConvOperands in;
  KGRAD_ASSIGN_OR_RETURN(in.x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(in.w, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(in.tx, c.TensorType(in.x));
  KGRAD_ASSIGN_OR_RETURN(in.tw, c.TensorType(in.w));
  KGRAD_ASSIGN_OR_RETURN(in.nsp, SpatialRank(c, in.tx));
  KGRAD_ASSIGN_OR_RETURN(in.kernel, FilterKernel(c, in.tw, in.nsp));
  return in;
}

// Conv(x, w[, b]){auto_pad, dilations, group, kernel_shape, pads, strides} =
// conv2d(x, w) + reshape(b, [C, 1, ...]).
Outputs Conv(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ConvOperands operands, ReadConvOperands(c));
  auto [x, w, tx, tw, nsp, kernel] = std::move(operands);
  if (kernel.empty() && !c.HasAttr("kernel_shape")) {
    return c.Error(absl::StrCat("needs kernel_shape or a filter of static shape, got ", tw->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(WindowNd win, ReadWindow(c, nsp, kernel, SpatialSizes(tx, nsp), false));
  KGRAD_ASSIGN_OR_RETURN(int64_t group, c.Int("group", 1));
  KGRAD_ASSIGN_OR_RETURN(x, Lift(c, x, nsp));
  KGRAD_ASSIGN_OR_RETURN(w, Lift(c, w, nsp));
  KGRAD_ASSIGN_OR_RETURN(
      ImportedValue y,
      c.Emit(
          PrimId::kConv2d, {x, w},
          {{"stride", win.Strides()}, {"padding", win.Padding()}, {"dilation", win.Dilations()}, {"groups", group}}));
  return AddBiasAndUnlift(c, y, win);
}

// ConvTranspose's pads and output sizes (three axes): from output_shape or SAME
// (output in * stride) as the ONNX spec says, total = stride * (in - 1) +
// output_padding + eff - out, SAME_UPPER: begin = total / 2, else begin = total -
// total / 2 (ONNX Runtime swaps the two for odd totals; the spec is followed),
// with the floor division of ONNX's reference. An output larger than the window
// reaches (total < 0) gives negative pads: `extend` gets those cells (begin, end
// per axis), zeros appended to the primitive's output, whose pads are then 0.
absl::Status TransposePads(NodeContext& c, int nsp, const Axes& in, const Axes& extra, WindowNd* win, Axes* out,
                           std::array<Axes, 2>* extend) {
  KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.Ints("output_shape", {}));
  const bool same = win->auto_pad == "SAME_UPPER" || win->auto_pad == "SAME_LOWER";
  if (!shape.empty() && static_cast<int>(shape.size()) != nsp && static_cast<int>(shape.size()) != nsp + 2) {
    return c.Error(absl::StrCat("output_shape must have ", nsp, " entries, got [", absl::StrJoin(shape, ", "), "]"));
  }
  auto floor_half = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  (*extend)[0] = (*extend)[1] = {0, 0, 0};
  for (int i = 0; i < kAxes; ++i) {
    const bool used = i >= kAxes - nsp;
    int64_t want = -1;
    if (used && !shape.empty()) want = shape[shape.size() - kAxes + i];
    if (used && shape.empty() && same) want = in[i] * win->stride[i];
    if (want > (int64_t{1} << 30)) return c.Error(absl::StrCat("output_shape ", want, " is too large"));
    if (want >= 0) {
      const int64_t total = win->stride[i] * (in[i] - 1) + extra[i] + win->Eff(i) - want;
      const int64_t lo = win->auto_pad == "SAME_UPPER" ? floor_half(total) : total - floor_half(total);
      const int64_t hi = total - lo;
      win->lo[i] = std::max<int64_t>(lo, 0);
      win->hi[i] = std::max<int64_t>(hi, 0);
      (*extend)[0][i] = std::max<int64_t>(-lo, 0);
      (*extend)[1][i] = std::max<int64_t>(-hi, 0);
    }
    (*out)[i] = win->stride[i] * (in[i] - 1) + extra[i] + win->Eff(i) - win->lo[i] - win->hi[i];
    if ((*out)[i] <= 0) return c.Error("the output would be empty");
  }
  return absl::OkStatus();
}

// Zeros shaped [N, C, spatial...] (`cs`: C and the primitive's spatial sizes), N
// x's batch: conv2d_backprop_input reads only the shape of this input. A
// constant when the batch is known; else zeros_like(x)[:, :1, :1, ...] broadcast
// against constant zeros [1, C, spatial...].
absl::StatusOr<ImportedValue> OutputRef(NodeContext& c, const ImportedValue& x, const AbstractTensor* tx,
                                        const std::vector<int64_t>& cs) {
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max();
  const int64_t batch = tx->shape()[0];
  Shape shape = {batch < 0 ? 1 : batch};
  shape.insert(shape.end(), cs.begin(), cs.end());
  absl::StatusOr<int64_t> n = CheckedNumElements(shape);
  if (!n.ok() || *n > c.importer().options().max_folded_elements) return c.Error("output too large");
  KGRAD_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(tx->dtype(), shape));
  if (batch >= 0) return c.Const(std::move(zeros));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue z, c.Emit(PrimId::kZerosLike, {x}));
  std::vector<int64_t> begin(shape.size(), 0), end(shape.size(), 1);
  end[0] = kAll;
  KGRAD_ASSIGN_OR_RETURN(z, c.Emit(PrimId::kSlice, {z}, {{"begin", begin}, {"end", end}}));
  return c.Emit(PrimId::kAdd, {z, c.Const(std::move(zeros))});
}

// ConvTranspose(x, w[, b]){auto_pad, dilations, group, kernel_shape,
// output_padding, output_shape, pads, strides} = conv2d_backprop_input(x, w,
// zeros of the output shape) (+ bias): the adjoint of conv2d in its input.
Outputs ConvTranspose(NodeContext& c) {
  KGRAD_ASSIGN_OR_RETURN(ConvOperands operands, ReadConvOperands(c));
  auto [x, w, tx, tw, nsp, kernel] = std::move(operands);
  bool known = !kernel.empty() && tw->shape()[1] >= 0;
  for (int i = 1; i < tx->rank(); ++i) known = known && tx->shape()[i] >= 0;
  if (!known) {
    return c.Error(
        absl::StrCat("needs static input (but the batch) and filter shapes: the output shape is "
                     "built at import; got ",
                     tx->ToString(), " and ", tw->ToString()));
  }
  const Axes in = SpatialSizes(tx, nsp);
  KGRAD_ASSIGN_OR_RETURN(WindowNd win, ReadWindow(c, nsp, kernel, in, true));
  KGRAD_ASSIGN_OR_RETURN(int64_t group, c.Int("group", 1));
  if (group < 1 || group > tx->shape()[1]) return c.Error(absl::StrCat("group must be in [1, C], got ", group));
  Axes extra{0, 0, 0}, out{0, 0, 0};
  KGRAD_RETURN_IF_ERROR(ReadAxes(c, "output_padding", nsp, 0, &extra));
  for (int i = 0; i < kAxes; ++i) {
    if (extra[i] >= win.stride[i]) {
      return c.Error(absl::StrCat("output_padding must be smaller than the stride, got ", extra[i], " for stride ",
                                  win.stride[i]));
    }
  }
  std::array<Axes, 2> extend;
  KGRAD_RETURN_IF_ERROR(TransposePads(c, nsp, in, extra, &win, &out, &extend));
  KGRAD_ASSIGN_OR_RETURN(x, Lift(c, x, nsp));
  KGRAD_ASSIGN_OR_RETURN(w, Lift(c, w, nsp));
  std::vector<int64_t> cs = {tw->shape()[1] * group};
  for (int64_t d : win.Prim(out)) cs.push_back(d);
  KGRAD_ASSIGN_OR_RETURN(ImportedValue ref, OutputRef(c, x, tx, cs));
  KGRAD_ASSIGN_OR_RETURN(
      ImportedValue y,
      c.Emit(
          PrimId::kConv2dBackpropInput, {x, w, ref},
          {{"stride", win.Strides()}, {"padding", win.Padding()}, {"dilation", win.Dilations()}, {"groups", group}}));
  if (extend[0] != Axes{0, 0, 0} || extend[1] != Axes{0, 0, 0}) {
    std::vector<int64_t> pads = {0, 0, 0, 0};
    for (int i = win.first(); i < kAxes; ++i) pads.insert(pads.end(), {extend[0][i], extend[1][i]});
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kPad, {y}, {{"pads", pads}, {"value", 0.0}}));
  }
  return AddBiasAndUnlift(c, y, win);
}

// ----- Pooling -----------------------------------------------------------------------

// The pooled sizes (three axes) and, with ceil_mode, the end padding extended so
// that the primitive's floor count is the ceil count. A window must start inside
// the input or its left padding (the last one is dropped otherwise, as PyTorch
// and the ONNX spec do).
absl::Status PoolSizes(NodeContext& c, const Axes& in, bool ceil_mode, const WindowNd& win, Axes* out,
                       Axes* hi_ext) {
  for (int i = 0; i < kAxes; ++i) {
    (*hi_ext)[i] = win.hi[i];
    (*out)[i] = kUnknownDim;
    if (in[i] < 0) {
      if (ceil_mode) return c.Error("ceil_mode=1 needs static spatial sizes");
      continue;
    }
    const int64_t span = in[i] + win.lo[i] + win.hi[i] - win.Eff(i);
    if (span < 0) {
      return c.Error(absl::StrCat("the padded input (", in[i] + win.lo[i] + win.hi[i],
                                  ") is smaller than the window (", win.Eff(i), ")"));
    }
    int64_t n = (ceil_mode ? span + win.stride[i] - 1 : span) / win.stride[i] + 1;
    if (ceil_mode && (n - 1) * win.stride[i] >= in[i] + win.lo[i]) --n;
    (*out)[i] = n;
    (*hi_ext)[i] = std::max(win.hi[i], (n - 1) * win.stride[i] + win.Eff(i) - in[i] - win.lo[i]);
  }
  return absl::OkStatus();
}

// The divisor of each pooled position along axis i: the window's cells inside
// [0, in), or inside [-lo, in + hi) (the declared pads) with count_include_pad.
std::vector<int64_t> PoolCounts(const WindowNd& w, int i, int64_t in, int64_t out, bool include_pad) {
  const int64_t first = include_pad ? -w.lo[i] : 0, last = include_pad ? in + w.hi[i] : in;
  std::vector<int64_t> counts(out, 0);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < w.kernel[i]; ++k) {
      const int64_t p = o * w.stride[i] - w.lo[i] + k * w.dilation[i];
      counts[o] += p >= first && p < last;
    }
  }
  return counts;
}

// A constant of x's dtype from doubles (cast at import when x is not f64).
absl::StatusOr<ImportedValue> FloatConst(NodeContext& c, DType dtype, const Shape& shape,
                                         const std::vector<double>& v) {
  ImportedValue k = c.Const(Tensor::FromVector<double>(shape, v));
  if (dtype == DType::kFloat64) return k;
  return c.Emit(PrimId::kCast, {k}, {{"dtype", dtype}});
}

// y * (numerator / (count_d[z] * count_h[i] * count_w[j])) over the primitive's
// axes, skipped when every factor is 1.
absl::StatusOr<ImportedValue> Rescale(NodeContext& c, const ImportedValue& y, DType dtype, const WindowNd& w,
                                      const std::array<std::vector<int64_t>, kAxes>& counts, double numerator) {
  Shape shape;
  for (int i = w.first(); i < kAxes; ++i) shape.push_back(static_cast<int64_t>(counts[i].size()));
  std::vector<double> f;
  bool ones = true;
  for (int64_t a : counts[0]) {
    for (int64_t b : counts[1]) {
      for (int64_t d : counts[2]) {
        if (a * b * d == 0) return c.Error("a pooling window lies entirely in the padding");
        f.push_back(numerator / static_cast<double>(a * b * d));
        ones = ones && f.back() == 1.0;
      }
    }
  }
  if (ones) return y;
  KGRAD_ASSIGN_OR_RETURN(ImportedValue k, FloatConst(c, dtype, shape, f));
  return c.Emit(PrimId::kMul, {y, k});
}

// The kernel's cells (row-major) as offsets along the primitive's axes.
std::vector<std::vector<int64_t>> KernelCells(const WindowNd& w) {
  std::vector<std::vector<int64_t>> cells = {{}};
  for (int i = w.first(); i < kAxes; ++i) {
    std::vector<std::vector<int64_t>> next;
    for (const std::vector<int64_t>& cell : cells) {
      for (int64_t k = 0; k < w.kernel[i]; ++k) {
        next.push_back(cell);
        next.back().push_back(k);
      }
    }
    cells = std::move(next);
  }
  return cells;
}

// The window's cells for every pooled position: strided slices of x padded with
// `fill`, in row-major window order.
absl::StatusOr<std::vector<ImportedValue>> WindowCells(NodeContext& c, const ImportedValue& x, const WindowNd& w,
                                                       const Axes& hi, const Axes& out, double fill) {
  std::vector<int64_t> pads = {0, 0, 0, 0};
  for (int i = w.first(); i < kAxes; ++i) pads.insert(pads.end(), {w.lo[i], hi[i]});
  KGRAD_ASSIGN_OR_RETURN(ImportedValue p, c.Emit(PrimId::kPad, {x}, {{"pads", pads}, {"value", fill}}));
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max();
  std::vector<ImportedValue> cells;
  for (const std::vector<int64_t>& cell : KernelCells(w)) {
    std::vector<int64_t> begin = {0, 0}, end = {kAll, kAll}, strides = {1, 1};
    for (int i = w.first(), k = 0; i < kAxes; ++i, ++k) {
      const int64_t b = cell[k] * w.dilation[i];
      begin.push_back(b);
      end.push_back(b + (out[i] - 1) * w.stride[i] + 1);
      strides.push_back(w.stride[i]);
    }
    KGRAD_ASSIGN_OR_RETURN(ImportedValue s,
                           c.Emit(PrimId::kSlice, {p}, {{"begin", begin}, {"end", end}, {"strides", strides}}));
    cells.push_back(s);
  }
  return cells;
}

// Dilated pooling: the max (or sum) over the window's cells, the input padded
// with -inf (or 0).
absl::StatusOr<ImportedValue> SlicedPool(NodeContext& c, const ImportedValue& x, const WindowNd& w, const Axes& hi,
                                         const Axes& out, bool is_max) {
  const double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> cells, WindowCells(c, x, w, hi, out, fill));
  ImportedValue acc = cells[0];
  for (size_t k = 1; k < cells.size(); ++k) {
    // maximum routes a tie's gradient to its second operand: the earlier window
    // cell keeps it, as the first maximum does in max_pool2d.
    KGRAD_ASSIGN_OR_RETURN(acc, c.Emit(is_max ? PrimId::kMaximum : PrimId::kAdd, {cells[k], acc}));
  }
  return acc;
}

// MaxPool's Indices: the flat index of each window's first maximum (scanned
// row-major, as ONNX Runtime does) in x: the position in the spatial plane
// row-major ((d * H + h) * W + w), or column-major (d + h * D + w * D * H) with
// storage_order=1, plus the plane offset (n * C + c) * cells. The argmax over
// the stacked window cells picks a cell k; a constant table maps (k, position)
// to its place; the plane offset is a constant too.
absl::StatusOr<ImportedValue> MaxPoolIndices(NodeContext& c, const ImportedValue& x, const AbstractTensor* tx,
                                             const WindowNd& w, const Axes& in, const Axes& hi, const Axes& out,
                                             bool column_major) {
  const int64_t n = tx->shape()[0], ch = tx->shape()[1];
  if (n < 0 || ch < 0 || in[0] < 0 || in[1] < 0 || in[2] < 0) {
    return c.Error(absl::StrCat("the Indices output needs a static input shape, got ", tx->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> cells,
                         WindowCells(c, x, w, hi, out, -std::numeric_limits<double>::infinity()));
  const int64_t axis = 2 + w.prim;
  for (ImportedValue& v : cells) {
    KGRAD_ASSIGN_OR_RETURN(v, c.Emit(PrimId::kExpandDims, {v}, {{"axis", axis}}));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue stacked, c.Emit(PrimId::kConcat, cells, {{"axis", axis}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue k, c.Emit(PrimId::kArgmax, {stacked}, {{"axis", axis}}));
  const int64_t plane = out[0] * out[1] * out[2];
  std::vector<int64_t> table, pos(plane), offset(n * ch);
  for (const std::vector<int64_t>& cell : KernelCells(w)) {
    Axes tap{0, 0, 0};
    for (int i = w.first(), j = 0; i < kAxes; ++i, ++j) tap[i] = cell[j];
    for (int64_t a = 0; a < out[0]; ++a) {
      for (int64_t b = 0; b < out[1]; ++b) {
        for (int64_t d = 0; d < out[2]; ++d) {
          Axes at;  // padding cells never win
          for (int i = 0; i < kAxes; ++i) {
            const int64_t o = i == 0 ? a : i == 1 ? b : d;
            at[i] = o * w.stride[i] - w.lo[i] + tap[i] * w.dilation[i];
          }
          // The ONNX input's own axes: the last nsp (a lifted 1-D op's height is 0).
          table.push_back(column_major ? at[0] + (at[1] + at[2] * in[1]) * in[0]
                                       : (at[0] * in[1] + at[1]) * in[2] + at[2]);
        }
      }
    }
  }
  for (int64_t i = 0; i < plane; ++i) pos[i] = i;
  const int64_t cells_in = in[0] * in[1] * in[2];
  for (int64_t i = 0; i < n * ch; ++i) offset[i] = i * cells_in;
  ImportedValue plane_k = c.Const(Tensor::FromScalar<int64_t>(plane));
  KGRAD_ASSIGN_OR_RETURN(k, c.Emit(PrimId::kMul, {k, plane_k}));
  const std::vector<int64_t> prim_out = w.Prim(out);
  const Shape out_shape(prim_out.begin(), prim_out.end());
  KGRAD_ASSIGN_OR_RETURN(k, c.Emit(PrimId::kAdd, {k, c.Const(Tensor::FromVector<int64_t>(out_shape, pos))}));
  const int64_t size = static_cast<int64_t>(table.size());
  KGRAD_ASSIGN_OR_RETURN(
      ImportedValue idx,
      c.Emit(PrimId::kGather, {c.Const(Tensor::FromVector<int64_t>({size}, table)), k}, {{"axis", int64_t{0}}}));
  Shape offset_shape = {n, ch};
  offset_shape.resize(2 + w.prim, 1);
  return c.Emit(PrimId::kAdd, {idx, c.Const(Tensor::FromVector<int64_t>(offset_shape, offset))});
}

// MaxPool(x){auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order,
// strides} and AveragePool(x){auto_pad, ceil_mode, count_include_pad, dilations,
// kernel_shape, pads, strides}.
template <bool kMax>
Outputs Pool(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(kMax ? 2 : 1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tx, c.TensorType(x));
  KGRAD_ASSIGN_OR_RETURN(int nsp, SpatialRank(c, tx));
  // MaxPool also takes uint8 and int8: pooled as float32, which holds every such
  // value exactly and orders them alike, and cast back.
  const DType int_type = tx->dtype();
  const bool narrow = kMax && (int_type == DType::kUInt8 || int_type == DType::kInt8);
  if (narrow) {
    KGRAD_ASSIGN_OR_RETURN(x, c.Emit(PrimId::kCast, {x}, {{"dtype", DType::kFloat32}}));
  }
  const Axes in = SpatialSizes(tx, nsp);
  KGRAD_ASSIGN_OR_RETURN(WindowNd win, ReadWindow(c, nsp, {}, in, false));
  KGRAD_ASSIGN_OR_RETURN(int64_t ceil_mode, c.Int("ceil_mode", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t storage_order, c.Int("storage_order", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t include_pad, c.Int("count_include_pad", 0));
  if ((ceil_mode != 0 && ceil_mode != 1) || (storage_order != 0 && storage_order != 1) ||
      (include_pad != 0 && include_pad != 1)) {
    return c.Error("ceil_mode, storage_order and count_include_pad must be 0 or 1");
  }
  Axes out, hi;
  KGRAD_RETURN_IF_ERROR(PoolSizes(c, in, ceil_mode != 0, win, &out, &hi));
  const bool dilated = win.dilation != Axes{1, 1, 1};
  bool static_in = true, static_out = true;
  double cells = 1, positions = 1;
  for (int i = 0; i < kAxes; ++i) {
    static_in = static_in && in[i] >= 0;
    static_out = static_out && out[i] >= 0;
    cells *= static_cast<double>(win.kernel[i]);
    positions *= static_cast<double>(std::max<int64_t>(out[i], 0));
  }
  if (!kMax && !static_in) return c.Error("AveragePool needs static spatial sizes");
  if (dilated && !static_out) return c.Error("dilated pooling needs static spatial sizes");
  // The constants built below (counts, window cells, index tables) grow with
  // windows x kernel cells; hostile attributes must not make them huge.
  if (static_out && (dilated || !kMax || c.node().output_size() > 1) &&
      cells * positions > static_cast<double>(c.importer().options().max_folded_elements)) {
    return c.Error(absl::StrCat("the window (", absl::StrJoin(win.Kernel(), "x"), ") over ",
                                absl::StrJoin(win.Prim(out), "x"), " positions is too large to compose"));
  }
  KGRAD_ASSIGN_OR_RETURN(x, Lift(c, x, nsp));
  ImportedValue y;
  if (dilated) {
    KGRAD_ASSIGN_OR_RETURN(y, SlicedPool(c, x, win, hi, out, kMax));
  } else {
    AttrMap attrs = {{"kernel", win.Kernel()}, {"stride", win.Strides()}, {"padding", win.Padding(hi)}};
    if (!kMax) attrs["count_include_pad"] = true;  // divides by the kernel's cells; rescaled below
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(kMax ? PrimId::kMaxPool2d : PrimId::kAvgPool2d, {x}, std::move(attrs)));
  }
  if (narrow) {
    KGRAD_ASSIGN_OR_RETURN(y, c.Emit(PrimId::kCast, {y}, {{"dtype", int_type}}));
  }
  if (kMax && c.node().output_size() > 1 && !c.node().output(1).empty()) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue indices, MaxPoolIndices(c, x, tx, win, in, hi, out, storage_order != 0));
    KGRAD_ASSIGN_OR_RETURN(y, Unlift(c, y, nsp));
    KGRAD_ASSIGN_OR_RETURN(indices, Unlift(c, indices, nsp));
    return std::vector<ImportedValue>{y, indices};
  }
  if (!kMax) {
    const double numerator = dilated ? 1.0 : cells;
    std::array<std::vector<int64_t>, kAxes> counts;
    for (int i = 0; i < kAxes; ++i) counts[i] = PoolCounts(win, i, in[i], out[i], include_pad != 0);
    KGRAD_ASSIGN_OR_RETURN(y, Rescale(c, y, tx->dtype(), win, counts, numerator));
  }
  return OneOutput(Unlift(c, y, nsp));
}

// GlobalAveragePool / GlobalMaxPool(x) = reduce over the spatial dims, kept (any
// number of spatial dims).
template <PrimId id>
Outputs GlobalPool(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, c.TensorType(x));
  if (t->rank() < 3) return c.Error(absl::StrCat("needs rank >= 3 (N, C, spatial...), got ", t->ToString()));
  std::vector<int64_t> axes;
  for (int i = 2; i < t->rank(); ++i) axes.push_back(i);
  return OneOutput(c.Emit(id, {x}, {{"axes", axes}, {"keepdims", true}}));
}

}  // namespace

void AddWindowOps(OpTable* t) {
  AddMappings(t, {{"Conv", Conv}, {"ConvTranspose", ConvTranspose}, {"MaxPool", Pool<true>},
                  {"AveragePool", Pool<false>},
                  {"GlobalAveragePool", GlobalPool<PrimId::kReduceMean>},
                  {"GlobalMaxPool", GlobalPool<PrimId::kReduceMax>}});
}

}  // namespace onnx_import
}  // namespace kgrad
