// The importer's op table: every ONNX op type it maps, by name. One-to-one
// mappings come from ops/elementwise_table.inc (a row with an ONNX name is that
// op: same operands, attributes of the same names); the family files then add
// their mappings, and a family's mapping for a name replaces the generated one
// (Pow, Max, Min need more than the one-to-one form).
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_import {
namespace {

// The ONNX attribute of the primitive's attribute `spec`, converted: an INT for
// a bool (0 or 1) or a dtype (an ONNX element type), otherwise the type of the
// same name. Absent: nullopt (the spec's default applies).
absl::StatusOr<std::optional<AttrValue>> TableAttr(const NodeContext& c, const AttrSpec& spec) {
  if (!c.HasAttr(spec.name)) return std::optional<AttrValue>();
  switch (spec.type) {
    case AttrType::kInt: {
      KGRAD_ASSIGN_OR_RETURN(int64_t v, c.Int(spec.name, 0));
      return std::optional<AttrValue>(v);
    }
    case AttrType::kBool: {
      KGRAD_ASSIGN_OR_RETURN(int64_t v, c.Int(spec.name, 0));
      if (v != 0 && v != 1) return c.Error(absl::StrCat("attribute '", spec.name, "' must be 0 or 1, got ", v));
      return std::optional<AttrValue>(v != 0);
    }
    case AttrType::kFloat: {
      KGRAD_ASSIGN_OR_RETURN(double v, c.Float(spec.name, 0));
      return std::optional<AttrValue>(v);
    }
    case AttrType::kString: {
      KGRAD_ASSIGN_OR_RETURN(std::string v, c.String(spec.name, ""));
      return std::optional<AttrValue>(std::move(v));
    }
    case AttrType::kInts: {
      KGRAD_ASSIGN_OR_RETURN(std::vector<int64_t> v, c.Ints(spec.name, {}));
      return std::optional<AttrValue>(std::move(v));
    }
    case AttrType::kDType: {
      KGRAD_ASSIGN_OR_RETURN(int64_t v, c.Int(spec.name, 0));
      absl::StatusOr<DType> t = DTypeFromOnnx(static_cast<int32_t>(v));
      if (!t.ok()) return c.Error(absl::StrCat("attribute '", spec.name, "': ", t.status().message()));
      return std::optional<AttrValue>(*t);
    }
    case AttrType::kFloats: break;
  }
  return c.Error(absl::StrCat("attribute '", spec.name, "' of type ", AttrTypeName(spec.type),
                              " has no ONNX form"));
}

// The attributes primitive `id` declares, read from the node by name; the ones
// absent take the spec's default (a required one absent is an error).
absl::StatusOr<AttrMap> TableAttrs(const NodeContext& c, PrimId id) {
  const PrimitiveDef* def = c.importer().module().registry().Find(id);
  if (def == nullptr) return c.Error(absl::StrCat("primitive ", PrimIdName(id), " is not registered"));
  AttrMap attrs;
  for (const AttrSpec& spec : def->attrs) {
    KGRAD_ASSIGN_OR_RETURN(std::optional<AttrValue> v, TableAttr(c, spec));
    if (v.has_value()) {
      attrs.emplace(spec.name, *std::move(v));
    } else if (!spec.default_value.has_value()) {
      return c.Error(absl::StrCat("attribute '", spec.name, "' is required"));
    }
  }
  return attrs;
}

// The one-to-one mapping of a table row: `arity` inputs (a constant operand takes
// the dtype of the other value operand: y's or x's, select's b's or a's), one
// output, the attributes the primitive declares.
template <PrimId id, int arity>
Outputs TableMapping(NodeContext& c) {
  KGRAD_RETURN_IF_ERROR(c.ExpectInputs(arity, arity));
  KGRAD_RETURN_IF_ERROR(c.ExpectOutputs(1));
  std::vector<ImportedValue> in(arity);
  for (int i = 0; i < arity; ++i) {
    KGRAD_ASSIGN_OR_RETURN(in[i], c.Input(i));
  }
  if constexpr (arity >= 2) {
    KGRAD_RETURN_IF_ERROR(AlignConstantDType(c, in[arity - 2], in[arity - 1]));
  }
  KGRAD_ASSIGN_OR_RETURN(AttrMap attrs, TableAttrs(c, id));
  return OneOutput(c.Emit(id, in, std::move(attrs)));
}

#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  {onnx, wire, &TableMapping<PrimId::k##Name, arity>},
constexpr TableOp kRows[] = {
#include "ops/elementwise_table.inc"
};
#undef KGRAD_ELEMENTWISE

}  // namespace

std::vector<TableOp> TableOps() {
  std::vector<TableOp> ops;
  for (const TableOp& row : kRows) {
    if (row.onnx[0] != '\0') ops.push_back(row);
  }
  return ops;
}

void AddMappings(OpTable* t, std::initializer_list<NamedMapping> mappings) {
  for (const NamedMapping& m : mappings) (*t)[m.op] = m.mapping;
}

const OpTable& AllOpMappings() {
  static const OpTable* const table = [] {
    auto* t = new OpTable;
    for (const TableOp& op : TableOps()) (*t)[op.onnx] = op.mapping;
    for (auto add_family : {AddElementwiseOps, AddReduceOps, AddShapeOps, AddNnOps, AddWindowOps,
                            AddResizeOps, AddControlFlowOps, AddActivationOps, AddLossOps,
                            AddNormOps, AddRnnOps, AddIndexOps, AddGridSampleOps,
                            AddQuantizeOps, AddRandomOps, AddSequenceOps}) {
      add_family(t);
    }
    return t;
  }();
  return *table;
}

OpMapping FindOpMapping(const std::string& op_type) {
  const OpTable& table = AllOpMappings();
  auto it = table.find(op_type);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace onnx_import
}  // namespace kgrad
