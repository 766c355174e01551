// What the importer's README table says about each ONNX op it maps: the kgrad
// form and what it refuses. The one-to-one mappings of the elementwise table get
// their note from their row (the primitive's wire name, nothing refused); the
// others, and table ops whose note says more, have a hand note below. A test
// checks that every mapped op has a note and every note a mapping, and that
// README.md's table is the one printed from here (`kgrad onnx-ops`), so neither
// can go stale.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_import.h"

namespace kgrad {
namespace onnx_import {
namespace {

// {op, kgrad form, refused (empty: nothing beyond the opset range)}, in
// alphabetical order.
constexpr OnnxOpNote kNotes[] = {
    {"ArgMax", "argmax (select_last_index: over the reversed axis)", "select_last_index=1 on a dynamic axis"},
    {"ArgMin", "argmin (select_last_index: over the reversed axis)", "select_last_index=1 on a dynamic axis"},
    {"AveragePool", "avg_pool2d x cells / a constant count map (ceil_mode, count_include_pad, dilations via strided slices); 2-D and 3-D native, 1-D lifted to 2-D", "dynamic spatial dims"},
    {"BatchNormalization", "inference: affine map; training: batch_norm + running statistics", "spatial=0"},
    {"Bernoulli", "cast(random_uniform_like(p){seed} < p): kgrad's seeded counter-based draws (the numbers differ from numpy's and ONNX Runtime's; the same seed gives the same numbers)", ""},
    {"BitShift", "bit_shift{direction}: a shift by the width or more gives 0", ""},
    {"Cast", "cast (to float16 and bfloat16 rounding to nearest even; to integers truncating toward zero)", "string and float8 types"},
    {"CastLike", "cast to the second input's element type (its values and shape unused)", "string types"},
    {"Celu", "select(x > 0, x, alpha * expm1(min(x, 0) / alpha))", ""},
    {"Clip", "maximum, minimum", ""},
    {"Concat", "concat", ""},
    {"ConcatFromSequence", "list_concat{axis, new_axis} (adjoint: list_concat_grad, the pieces shaped like the elements)", "an empty sequence (run time)"},
    {"Constant", "a constant", "sparse_value, string values"},
    {"ConstantOfShape", "a constant; dynamic_fill for a shape computed at run time", ""},
    {"Conv", "conv2d (+ bias); every auto_pad, asymmetric pads, dilations, group; 2-D and 3-D native, 1-D lifted to 2-D", ""},
    {"ConvTranspose", "conv2d_backprop_input (+ bias); output_padding, output_shape (beyond the window's reach: zero cells, as ONNX's negative pads), auto_pad, dilations, group; 1-D, 2-D, 3-D", "dynamic channel or spatial dims"},
    {"CumSum", "cumsum{exclusive, reverse}; dynamic_cumsum for an axis computed at run time", ""},
    {"DepthToSpace", "reshape, transpose, reshape (DCR, CRD)", "dynamic C, H, W"},
    {"DequantizeLinear", "(cast(x) - zero_point) * scale, per tensor or per axis; after a QuantizeLinear, its straight-through surrogate (QAT's fake quantisation: d/dx = 1 inside the range, 0 outside)", "blocked quantization; float8"},
    {"Det", "det (LU with partial pivoting, in double); gradient det * inverse^T", "the gradient at a singular matrix"},
    {"Dropout", "identity, or dropout{rate, seed} and its mask in training mode; ratio or training_mode computed at run time: dynamic_dropout(x, training_mode ? ratio : 0){seed} (rate 0 is the identity; a ratio outside [0, 1) fails at run time)", ""},
    {"Einsum", "einsum ('...' expanded to unused letters at import; broadcast ellipsis dims of size 1 against larger ones are refused by einsum)", ""},
    {"Elu", "select(x > 0, x, alpha * expm1(min(x, 0)))", ""},
    {"Expand", "broadcast_to; dynamic_broadcast_to for a shape computed at run time", ""},
    {"EyeLike", "a constant", "dynamic shapes"},
    {"Flatten", "reshape (symbolic dims on one side of axis: a -1); dynamic_reshape of the products at run time otherwise", ""},
    {"GRU", "a kgrad loop over time (input projection as one matmul; linear_before_reset 0 and 1; sequence_lens constant or computed in the graph)", ""},
    {"Gather", "gather (negative indices wrapped, against the run-time dim where it is not static)", ""},
    {"GatherElements", "gather_elements (negative indices)", ""},
    {"GatherND", "gathers from a constant index table (batch_dims)", "dynamic data or index shapes"},
    {"Gelu", "gelu{approximate}", ""},
    {"Gemm", "matmul{transpose_a, transpose_b}, mul, add", ""},
    {"GlobalAveragePool", "reduce_mean over the spatial dims (1-D, 2-D, 3-D)", ""},
    {"GlobalMaxPool", "reduce_max over the spatial dims (1-D, 2-D, 3-D)", ""},
    {"GridSample", "gather_elements of X at each tap, times the tap's weights, summed (bilinear/linear, nearest, bicubic/cubic; zeros, border, reflection; align_corners); 4-D and 5-D", "grids or inputs of dynamic shape; cubic in 3-D"},
    {"HardSigmoid", "max(0, min(1, alpha * x + beta))", ""},
    {"HardSwish", "x * max(0, min(1, x / 6 + 1/2))", ""},
    {"Identity", "its input (tensors, sequences and optionals)", ""},
    {"If", "switch over two nested graphs", ""},
    {"InstanceNormalization", "reduce_mean moments over the spatial dims, affine map", ""},
    {"IsInf", "equal(|x|, inf) (or the selected sign)", ""},
    {"IsNaN", "not_equal(x, x)", ""},
    {"LSTM", "a kgrad loop over time (peepholes, input_forget, clip, every activation, layout); sequence_lens constant or computed in the graph", ""},
    {"LayerNormalization", "layer_norm (+ Mean, InvStdDev outputs)", ""},
    {"LeakyRelu", "select(x >= 0, x, alpha * x)", ""},
    {"LogSoftmax", "log_softmax", "opset < 13 with an axis other than the last"},
    {"Loop", "a tail-recursive graph (GraphBuilder::While); scan outputs as state that starts empty, [0, ...], and grows by concat(acc, expand_dims(s, 0)) each iteration", ""},
    {"MatMul", "matmul (1-D operands via expand_dims/squeeze)", ""},
    {"Max", "maximum, folded over the inputs", ""},
    {"MaxPool", "max_pool2d (ceil_mode as end padding, dilations via strided slices, Indices output with storage_order); 2-D and 3-D native, 1-D lifted to 2-D; uint8 and int8 pooled as float32 (exact)", "dynamic spatial dims with ceil_mode, SAME or Indices"},
    {"Mean", "add, folded, / n", ""},
    {"Min", "minimum, folded over the inputs", ""},
    {"Mish", "x * tanh(softplus(x))", ""},
    {"Mod", "mod{fmod}", "fmod=0 on floats (as the spec says)"},
    {"NegativeLogLikelihoodLoss", "one_hot pick, weights, ignore_index, reduction", "a class count unknown at import"},
    {"NonZero", "nonzero (the count known at run time)", ""},
    {"OneHot", "one_hot (negative indices wrapped); dynamic_one_hot for a depth or values computed at run time", ""},
    {"Optional", "make_list(x) or make_list(): an optional is a list of at most one element", ""},
    {"OptionalGetElement", "list_getitem(o, 0); from opset 18 a tensor or sequence is itself", "from opset 18, a list not known to be an optional"},
    {"OptionalHasElement", "list_len(o) > 0; from opset 18 true for a tensor or sequence, false without input", "from opset 18, a list not known to be an optional"},
    {"PRelu", "select(x >= 0, x, slope * x)", ""},
    {"Pad", "pad (constant), gathers (edge, reflect, wrap), slices (negative pads); pads or value computed at run time: dynamic_pad (constant), gathers at positions computed at run time (edge, reflect, wrap)", "axes with pads computed at run time"},
    {"Pow", "pow (square, sqrt for constant 2, 0.5)", ""},
    {"QuantizeLinear", "cast(clip(round(x / scale) + zero_point)) to uint8, int8, uint16 or int16, per tensor or per axis", "blocked quantization; float8"},
    {"RNN", "a kgrad loop over time; sequence_lens constant or computed in the graph", ""},
    {"RandomNormal", "random_normal_like of zeros of `shape` (Box-Muller over the seeded draws)", ""},
    {"RandomNormalLike", "random_normal_like{mean, scale, seed} (Box-Muller over the seeded draws)", ""},
    {"RandomUniform", "random_uniform_like of zeros of `shape`", ""},
    {"RandomUniformLike", "random_uniform_like{low, high, seed}", ""},
    {"Range", "a constant; dynamic_range for bounds computed at run time", ""},
    {"ReduceL1", "reduce_sum(abs(x)); dynamic_reduce_sum for axes computed at run time", ""},
    {"ReduceL2", "sqrt(reduce_sum(square(x))); dynamic_reduce_sum for axes computed at run time", ""},
    {"ReduceLogSum", "log(reduce_sum(x)); dynamic_reduce_sum for axes computed at run time", ""},
    {"ReduceLogSumExp", "logsumexp", "axes computed at run time"},
    {"ReduceMax", "reduce_max", "axes computed at run time"},
    {"ReduceMean", "reduce_mean; dynamic_reduce_sum / (size_of(x) / size_of(sum)) for axes computed at run time", ""},
    {"ReduceMin", "reduce_min", "axes computed at run time"},
    {"ReduceProd", "reduce_prod", "axes computed at run time"},
    {"ReduceSum", "reduce_sum; dynamic_reduce_sum for axes computed at run time", ""},
    {"ReduceSumSquare", "reduce_sum(square(x)); dynamic_reduce_sum for axes computed at run time", ""},
    {"Reshape", "reshape; dynamic_reshape for a shape computed at run time", ""},
    {"Resize", "per resized axis: gathers at constant positions times constant weights (nearest, linear, cubic; every coordinate mode); scales, sizes, roi or input dims known only at run time: the positions and weights computed with primitives (dynamic_range, floor, select, ...; shape_of for the input dims); align_corners divides by length_resized = in * scale when scales are given (ONNX's reference, also when in * scale is not an integer; ONNX Runtime and PyTorch take the output size there) and by the output size when sizes are", "antialias=1"},
    {"Round", "round (half to even)", ""},
    {"Scatter", "scatter_elements (opsets 9, 10)", ""},
    {"ScatterElements", "scatter_elements{none, add, mul, max, min}", "gradients of mul, max, min"},
    {"ScatterND", "scatter_elements over a constant index table (reductions)", "dynamic data or index shapes"},
    {"Selu", "gamma * select(x > 0, x, alpha * expm1(min(x, 0)))", ""},
    {"SequenceAt", "list_getitem (negative positions from the end)", ""},
    {"SequenceConstruct", "make_list (elements of one dtype and rank)", "elements of different ranks"},
    {"SequenceEmpty", "make_list() (the element type is taken from what is inserted)", ""},
    {"SequenceErase", "list_erase (default: the last)", ""},
    {"SequenceInsert", "list_insert (default: appended)", ""},
    {"SequenceLength", "list_len as an i64 tensor", ""},
    {"Shape", "a constant for static dims, else shape_of", ""},
    {"Shrink", "selects", ""},
    {"Size", "a constant for static dims, else size_of", ""},
    {"Slice", "slice (positive steps), gather (negative steps); dynamic_slice for bounds computed at run time or negative steps on dims that are not static", ""},
    {"Softmax", "softmax", "opset < 13 with an axis other than the last"},
    {"SoftmaxCrossEntropyLoss", "log_softmax + the NegativeLogLikelihoodLoss form", "a class count unknown at import"},
    {"Softsign", "x / (1 + |x|)", ""},
    {"SpaceToDepth", "reshape, transpose, reshape", "dynamic C, H, W"},
    {"Split", "split; dynamic_split for sizes computed at run time or equal parts of a dim that is not static", ""},
    {"SplitToSequence", "split_to_list{axis, keepdims}: sizes, a chunk size (the last piece smaller) or pieces of 1", ""},
    {"Squeeze", "squeeze; dynamic_squeeze for axes computed at run time", ""},
    {"Sum", "add, folded over the inputs", ""},
    {"Tan", "sin / cos", ""},
    {"Tile", "gathers along the repeated dims; dynamic_tile for repeats computed at run time or dynamic tiled dims", ""},
    {"TopK", "topk{axis, largest, sorted} (ties: the lower index first; NaN largest); a K computed at run time gives an unknown dim", ""},
    {"Transpose", "transpose", ""},
    {"Trilu", "select with a mask (constant, or compared with a run-time k)", "dynamic matrix dims"},
    {"Unique", "unique{axis, sorted}: Y, indices, inverse_indices, counts (NaNs equal); no gradient, as torch.unique", "string tensors"},
    {"Unsqueeze", "expand_dims; dynamic_unsqueeze for axes computed at run time", ""},
    {"Upsample", "the Resize form (scales computed at run time too)", ""},
    {"Xor", "not_equal on bools", ""},
};

}  // namespace

// The hand notes, then a generated one for each table op whose mapping is the
// table's (a family's replacement needs a hand note), sorted by op.
absl::Span<const OnnxOpNote> OpNotes() {
  static const std::vector<OnnxOpNote>* const notes = [] {
    auto* v = new std::vector<OnnxOpNote>(std::begin(kNotes), std::end(kNotes));
    absl::flat_hash_set<std::string> noted;
    for (const OnnxOpNote& n : kNotes) noted.insert(n.op);
    for (const TableOp& op : TableOps()) {
      if (!noted.contains(op.onnx) && FindOpMapping(op.onnx) == op.mapping) {
        v->push_back({op.onnx, op.wire, ""});
      }
    }
    std::sort(v->begin(), v->end(),
              [](const OnnxOpNote& a, const OnnxOpNote& b) { return std::strcmp(a.op, b.op) < 0; });
    return v;
  }();
  return *notes;
}

}  // namespace onnx_import

std::vector<std::string> SupportedOnnxOps() {
  std::vector<std::string> ops;
  for (const auto& [op, mapping] : onnx_import::AllOpMappings()) ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

std::vector<std::string> DocumentedOnnxOps() {
  std::vector<std::string> ops;
  for (const onnx_import::OnnxOpNote& n : onnx_import::OpNotes()) ops.push_back(n.op);
  return ops;
}

std::string SupportedOnnxOpsMarkdown() {
  std::string out = absl::StrCat("Opsets 7 to 21, and 1 to 6 for the elementwise ops, global pools, "
                                 "InstanceNormalization and TopK, whose meaning has not changed since (", SupportedOnnxOps().size(), " ops):\n\n| ONNX op | kgrad form | refused |\n|---|---|---|\n");
  for (const onnx_import::OnnxOpNote& n : onnx_import::OpNotes()) {
    absl::StrAppend(&out, "| ", n.op, " | ", n.form, " | ", n.refused, " |\n");
  }
  return out;
}

}  // namespace kgrad
