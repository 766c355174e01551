// ONNX op mappings: element-wise indexing and scans (GatherElements,
// ScatterElements, Scatter, CumSum) and selection by value (TopK, NonZero) onto
// their primitives, and GatherND / ScatterND as exact compositions of gather,
// scatter_elements, reshape and integer arithmetic. Each mapping states the ONNX
// form it accepts and the kgrad primitives it becomes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_dynamic_shape_ops.h"

namespace kgrad {
namespace onnx_import {
namespace {

// GatherElements(data, indices){axis=0} = gather_elements(data, indices){axis};
// negative indices count from the end, out-of-range ones are the kernel's error.
Outputs GatherElements(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue data, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue indices, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  return OneOutput(c.Emit(PrimId::kGatherElements, {data, indices}, {{"axis", axis}}));
}

// ScatterElements(data, indices, updates){axis=0, reduction=none} (reduction from
// opset 16: none, add, mul; 18: max, min) and the deprecated Scatter (opset 9-10,
// no reduction) = scatter_elements(data, indices, updates){axis, reduction}.
Outputs ScatterElements(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue data, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue indices, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue updates, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", 0));
  std::string reduction = "none";
  if (c.node().op_type() == "ScatterElements") {
    KGRAD_ASSIGN_OR_RETURN(reduction, c.String("reduction", "none"));
  }
  return OneOutput(c.Emit(PrimId::kScatterElements, {data, indices, updates},
                    {{"axis", axis}, {"reduction", reduction}}));
}

// CumSum(x, axis){exclusive=0, reverse=0} = cumsum(x){axis, exclusive, reverse}
// for an axis input (a scalar or a 1-element tensor) known at import time, else
// dynamic_cumsum(x, axis).
Outputs CumSum(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue axis_in, c.Input(1));
  if (!axis_in.constant.has_value()) return DynamicCumSum(c);
  const Tensor& a = *axis_in.constant;
  if (!IsInteger(a.dtype()) || a.NumElements() != 1 || a.rank() > 1) {
    return c.Error(absl::StrCat("the axis input must be one i32 or i64, got ", a.TypeString()));
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t exclusive, c.Int("exclusive", 0));
  KGRAD_ASSIGN_OR_RETURN(int64_t reverse, c.Int("reverse", 0));
  const int64_t axis = static_cast<int64_t>(a.ElementAsDouble(0));
  return OneOutput(c.Emit(PrimId::kCumSum, {x},
                    {{"axis", axis}, {"exclusive", exclusive != 0}, {"reverse", reverse != 0}}));
}

// TopK(X[, K]){axis=-1, largest=1, sorted=1} = topk(X, k){axis, largest, sorted}
// -> (Values, Indices). k is the attribute before opset 10, else input K (an i64
// [1]), which topk reads as a tensor: a K known at import (a constant, or a Shape
// chain that folds) gives a static dim at axis, one computed at run time an
// unknown dim. largest and sorted exist from opset 11.
Outputs TopK(NodeContext& c) {
  const bool k_input = c.opset() >= 10;
  KGRAD_RETURN_IF_ERROR(k_input ? c.ExpectInputs(2, 2) : c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(2));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  ImportedValue k;
  if (k_input) {
    KGRAD_ASSIGN_OR_RETURN(k, c.Input(1));
  } else {
    if (!c.HasAttr("k")) return c.Error("attribute 'k' is required before opset 10");
    KGRAD_ASSIGN_OR_RETURN(int64_t kv, c.Int("k", 0));
    k = c.Const(Tensor::FromScalar<int64_t>(kv));
  }
  KGRAD_ASSIGN_OR_RETURN(int64_t axis, c.Int("axis", -1));
  KGRAD_ASSIGN_OR_RETURN(int64_t largest, c.Int("largest", 1));
  KGRAD_ASSIGN_OR_RETURN(int64_t sorted, c.Int("sorted", 1));
  if ((largest != 0 && largest != 1) || (sorted != 0 && sorted != 1)) {
    return c.Error(absl::StrCat("largest and sorted must be 0 or 1, got ", largest, " and ",
                                sorted));
  }
  const AttrMap attrs = {{"axis", axis}, {"largest", largest == 1}, {"sorted", sorted == 1}};
  KGRAD_ASSIGN_OR_RETURN(ImportedValue both, c.Emit(PrimId::kTopK, {x, k}, attrs));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue values, c.Item(both, 0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue indices, c.Item(both, 1));
  return std::vector<ImportedValue>{values, indices};
}

// Unique(X){axis, sorted} = unique(X): Y, indices, inverse_indices, counts (the
// count of distinct elements or slices known at run time).
Outputs Unique(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(4));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(int64_t sorted, c.Int("sorted", 1));
  if (sorted != 0 && sorted != 1) return c.Error(absl::StrCat("sorted must be 0 or 1, got ", sorted));
  std::vector<int64_t> axis;
  if (c.HasAttr("axis")) {
    KGRAD_ASSIGN_OR_RETURN(int64_t a, c.Int("axis", 0));
    axis.push_back(a);
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue all,
                         c.Emit(PrimId::kUnique, {x}, {{"axis", axis}, {"sorted", sorted == 1}}));
  std::vector<ImportedValue> outs;
  for (int i = 0; i < c.node().output_size(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(ImportedValue v, c.Item(all, i));
    outs.push_back(v);
  }
  return outs;
}

// NonZero(X) = nonzero(X): i64 [rank, count], the count known at run time.
Outputs NonZero(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue x, c.Input(0));
  return OneOutput(c.Emit(PrimId::kNonZero, {x}));
}

// ----- GatherND / ScatterND --------------------------------------------------------------
// Both address data[b.., i_0, .., i_{k-1}, rest..] by index tuples in the last
// dim of `indices`. The composition turns each tuple into one row number of data
// reshaped to [B * M, rest..] (B: the batch dims' product, M: that of the k
// indexed dims): row = batch * M + sum_j norm(i_j) * stride_j. norm(i) =
// gather(T, i + dim), with T = [0..dim-1, 0..dim-1]: exact for i in [-dim, dim),
// and an index outside gives gather's out-of-range error (a wrong index could
// otherwise land in another row).
struct NdPlan {
  int64_t batch_dims = 0, k = 0;
  Shape data, indices;  // static shapes
  Shape rows;           // [B * M] + rest: data as rows
  Shape tuples;         // indices.shape[:-1]
};

absl::StatusOr<NdPlan> PlanNd(NodeContext& c, const ImportedValue& data,
                              const ImportedValue& indices, int64_t batch_dims) {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* td, c.TensorType(data));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, c.TensorType(indices));
  if (!td->shape_known() || !ti->shape_known()) {
    return c.Error(absl::StrCat("needs static data and indices shapes, got ", td->ToString(),
                                " and ", ti->ToString()));
  }
  if (!IsInteger(ti->dtype())) {
    return c.Error(absl::StrCat("indices must be i32 or i64, got ", ti->ToString()));
  }
  NdPlan p{batch_dims, 0, td->shape(), ti->shape(), {}, {}};
  const int64_t r = td->rank(), q = ti->rank();
  if (q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return c.Error(absl::StrCat("batch_dims ", batch_dims, " must be in [0, min(rank(data), ",
                                "rank(indices))) for ", td->ToString(), " and ", ti->ToString()));
  }
  p.k = p.indices.back();
  if (p.k < 1 || p.k > r - batch_dims) {
    return c.Error(absl::StrCat("indices' last dim ", p.k, " must be in [1, ", r - batch_dims,
                                "] for data ", td->ToString()));
  }
  int64_t rows = 1;
  for (int64_t d = 0; d < batch_dims + p.k; ++d) {
    if (d < batch_dims && p.indices[d] != p.data[d]) {
      return c.Error(absl::StrCat("the batch dims of data ", td->ToString(), " and indices ",
                                  ti->ToString(), " differ"));
    }
    rows *= p.data[d];
  }
  p.rows = {rows};
  p.rows.insert(p.rows.end(), p.data.begin() + batch_dims + p.k, p.data.end());
  p.tuples.assign(p.indices.begin(), p.indices.end() - 1);
  return p;
}

Tensor Int64Tensor(const Shape& shape, const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(shape, v);
}

// A shape as an ints attribute.
std::vector<int64_t> Ints(const Shape& s) { return {s.begin(), s.end()}; }

// Constant indices are checked here, for a message in the node's terms (the
// gathers below would fold them at import with theirs).
absl::Status CheckConstTuples(NodeContext& c, const NdPlan& p, const Tensor& indices) {
  for (int64_t i = 0; i < indices.NumElements(); ++i) {
    const int64_t j = i % p.k, dim = p.data[p.batch_dims + j];
    const int64_t v = static_cast<int64_t>(indices.ElementAsDouble(i));
    if (v < -dim || v >= dim) {
      return c.Error(absl::StrCat("index ", v, " (entry ", j, " of tuple ", i / p.k,
                                  ") is out of range [", -dim, ", ", dim, ") for dim ",
                                  p.batch_dims + j, " of data ", ShapeToString(p.data)));
    }
  }
  return absl::OkStatus();
}

// The row number of each index tuple, shaped p.tuples (i64).
absl::StatusOr<ImportedValue> RowNumbers(NodeContext& c, const NdPlan& p, ImportedValue indices) {
  if (indices.constant.has_value()) {
    KGRAD_RETURN_IF_ERROR(CheckConstTuples(c, p, *indices.constant));
  }
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* ti, c.TensorType(indices));
  if (ti->dtype() != DType::kInt64) {
    KGRAD_ASSIGN_OR_RETURN(indices, c.Emit(PrimId::kCast, {indices}, {{"dtype", DType::kInt64}}));
  }
  // The tables and offsets below are constants: bounded like folded values.
  const int64_t limit = c.importer().options().max_folded_elements;
  for (int64_t d = p.batch_dims; d < p.batch_dims + p.k; ++d) {
    if (2 * p.data[d] > limit) {
      return c.Error(absl::StrCat("dim ", d, " of data (", p.data[d], ") is too large for the ",
                                  "index tables (2 * dim must be <= max_folded_elements, ", limit,
                                  ")"));
    }
  }
  const int64_t last = static_cast<int64_t>(p.indices.size()) - 1;
  ImportedValue row;
  for (int64_t j = 0; j < p.k; ++j) {
    const int64_t dim = p.data[p.batch_dims + j];
    std::vector<int64_t> begin(last + 1, 0), end(p.indices.begin(), p.indices.end());
    begin[last] = j;
    end[last] = j + 1;
    KGRAD_ASSIGN_OR_RETURN(ImportedValue comp,
                           c.Emit(PrimId::kSlice, {indices}, {{"begin", begin}, {"end", end}}));
    KGRAD_ASSIGN_OR_RETURN(comp, c.Emit(PrimId::kReshape, {comp}, {{"shape", Ints(p.tuples)}}));
    std::vector<int64_t> table(2 * dim);
    for (int64_t i = 0; i < 2 * dim; ++i) table[i] = i % dim;
    KGRAD_ASSIGN_OR_RETURN(comp, c.Emit(PrimId::kAdd, {comp, c.Const(Int64Tensor({}, {dim}))}));
    KGRAD_ASSIGN_OR_RETURN(comp,
                           c.Emit(PrimId::kGather, {c.Const(Int64Tensor({2 * dim}, table)), comp}));
    if (j == 0) {
      row = comp;
      continue;
    }
    KGRAD_ASSIGN_OR_RETURN(row, c.Emit(PrimId::kMul, {row, c.Const(Int64Tensor({}, {dim}))}));
    KGRAD_ASSIGN_OR_RETURN(row, c.Emit(PrimId::kAdd, {row, comp}));
  }
  if (p.batch_dims == 0) return row;
  // + batch * M, M = the indexed dims' product: a constant over the batch dims,
  // broadcast over the others.
  int64_t batches = 1, m = 1;
  for (int64_t d = 0; d < p.batch_dims; ++d) batches *= p.data[d];
  for (int64_t j = 0; j < p.k; ++j) m *= p.data[p.batch_dims + j];
  if (batches > limit) {
    return c.Error(absl::StrCat("the batch dims of data ", ShapeToString(p.data), " hold ", batches,
                                " batches, more than max_folded_elements (", limit,
                                ") for the offsets table"));
  }
  Shape offset_shape(p.data.begin(), p.data.begin() + p.batch_dims);
  offset_shape.resize(p.tuples.size(), 1);
  std::vector<int64_t> offsets(batches);
  for (int64_t b = 0; b < batches; ++b) offsets[b] = b * m;
  return c.Emit(PrimId::kAdd, {row, c.Const(Int64Tensor(offset_shape, offsets))});
}

// GatherND(data, indices){batch_dims=0}: out[b.., t..] = data[b.., indices[b.., t..]]
// = gather(reshape(data, rows), row numbers){axis 0}, shaped tuples + rest.
Outputs GatherND(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue data, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue indices, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(int64_t batch_dims, c.Int("batch_dims", 0));
  KGRAD_ASSIGN_OR_RETURN(NdPlan p, PlanNd(c, data, indices, batch_dims));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue rows, RowNumbers(c, p, indices));
  KGRAD_ASSIGN_OR_RETURN(data, c.Emit(PrimId::kReshape, {data}, {{"shape", Ints(p.rows)}}));
  return OneOutput(c.Emit(PrimId::kGather, {data, rows}, {{"axis", int64_t{0}}}));
}

// ScatterND(data, indices, updates){reduction=none}: data with updates[t..] (of
// shape tuples + rest) written to (or combined with) data[indices[t..]], in the
// tuples' row-major order =
// reshape(scatter_elements(reshape(data, rows), broadcast(row numbers), reshape(updates)){axis 0}).
Outputs ScatterND(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue data, c.Input(0));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue indices, c.Input(1));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue updates, c.Input(2));
  KGRAD_ASSIGN_OR_RETURN(std::string reduction, c.String("reduction", "none"));
  KGRAD_ASSIGN_OR_RETURN(NdPlan p, PlanNd(c, data, indices, 0));
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* tu, c.TensorType(updates));
  Shape want = p.tuples;
  want.insert(want.end(), p.rows.begin() + 1, p.rows.end());
  if (!tu->shape_known() || tu->shape() != want) {
    return c.Error(
        absl::StrCat("updates must be shaped ", ShapeToString(want), ", got ", tu->ToString()));
  }
  KGRAD_ASSIGN_OR_RETURN(ImportedValue rows, RowNumbers(c, p, indices));
  const int64_t n = NumElementsOf(p.tuples);
  Shape upd_shape = p.rows, col_shape(p.rows.size(), 1);
  upd_shape[0] = col_shape[0] = n;
  KGRAD_ASSIGN_OR_RETURN(rows, c.Emit(PrimId::kReshape, {rows}, {{"shape", Ints(col_shape)}}));
  KGRAD_ASSIGN_OR_RETURN(rows, c.Emit(PrimId::kBroadcastTo, {rows}, {{"shape", Ints(upd_shape)}}));
  KGRAD_ASSIGN_OR_RETURN(updates,
                         c.Emit(PrimId::kReshape, {updates}, {{"shape", Ints(upd_shape)}}));
  KGRAD_ASSIGN_OR_RETURN(ImportedValue flat,
                         c.Emit(PrimId::kReshape, {data}, {{"shape", Ints(p.rows)}}));
  KGRAD_ASSIGN_OR_RETURN(flat, c.Emit(PrimId::kScatterElements, {flat, rows, updates},
                                      {{"axis", int64_t{0}}, {"reduction", reduction}}));
  return OneOutput(c.Emit(PrimId::kReshape, {flat}, {{"shape", Ints(p.data)}}));
}

}  // namespace

void AddIndexOps(OpTable* t) {
  AddMappings(t, {{"GatherElements", GatherElements}, {"ScatterElements", ScatterElements},
                  {"Scatter", ScatterElements}, {"CumSum", CumSum}, {"GatherND", GatherND},
                  {"ScatterND", ScatterND}, {"TopK", TopK}, {"NonZero", NonZero},
                  {"Unique", Unique}});
}

}  // namespace onnx_import
}  // namespace kgrad
