// ONNX export of the elementwise primitives, each from its row of
// ops/elementwise_table.inc: a row with an ONNX name is that op with the
// primitive's attributes copied by name (bools as INT); a row without one writes
// its functor's formula (ops/elementwise_functors.h) evaluated on symbolic
// operands (onnx_formula.h), so no formula is written here.
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "core/status_macros.h"
#include "ops/elementwise_table.h"
#include "proto/onnx/onnx_exporter.h"
#include "proto/onnx/onnx_formula.h"

namespace kgrad {
namespace onnx_export_internal {
namespace {

// The primitive's attributes as ONNX attributes of the same names and types; a
// bool is an INT 0 or 1, a dtype its ONNX element type.
void CopyAttrs(const Primitive& p, NodeProto* n) {
  for (const auto& [name, v] : p.attrs()) {
    switch (AttrValueType(v)) {
      case AttrType::kInt: SetInt(n, name, std::get<int64_t>(v)); break;
      case AttrType::kFloat: SetFloat(n, name, std::get<double>(v)); break;
      case AttrType::kBool: SetInt(n, name, std::get<bool>(v) ? 1 : 0); break;
      case AttrType::kString: SetString(n, name, std::get<std::string>(v)); break;
      case AttrType::kInts: SetInts(n, name, std::get<std::vector<int64_t>>(v)); break;
      case AttrType::kFloats: {
        AttributeProto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(AttributeProto::FLOATS);
        for (double x : std::get<std::vector<double>>(v)) a->add_floats(static_cast<float>(x));
        break;
      }
      case AttrType::kDType: SetInt(n, name, DTypeToOnnx(std::get<DType>(v))); break;
    }
  }
}

// The row's ONNX op on the same operands.
absl::StatusOr<std::string> EmitOnnxTwin(Exporter& e, const ExportCall& call) {
  NodeProto* n = e.Add(ops::ElementwiseOnnxName(call.prim.id()), call.in);
  CopyAttrs(call.prim, n);
  return n->output(0);
}

// The dtype of the value operands from `first` on (select's condition is a mask),
// which the formula's constants take.
absl::StatusOr<DType> ValueDType(const Exporter& e, const ExportCall& call, int first) {
  for (size_t i = first; i < call.node->num_args(); ++i) {
    if (const AbstractTensor* t = AsTensor(call.node->arg(i)->abstract())) return t->dtype();
  }
  return e.Error(call.node, "needs a tensor type for its operands");
}

// The functor's formula on symbolic operands: evaluating Apply writes the nodes.
template <class Functor, int kArity>
absl::StatusOr<std::string> EmitFormula(Exporter& e, const ExportCall& call) {
  KGRAD_ASSIGN_OR_RETURN(DType dtype, ValueDType(e, call, kArity == 3 ? 1 : 0));
  Formula f(e, dtype);
  const ew::Attrs at = Functor::Read(call.prim);
  absl::StatusOr<std::string> out;
  if constexpr (kArity == 1) {
    out = f.Result(Functor::Apply(at, f.Operand(call.in[0])));
  } else if constexpr (kArity == 2) {
    out = f.Result(Functor::Apply(at, f.Operand(call.in[0]), f.Operand(call.in[1])));
  } else {
    out = f.Result(Functor::Apply(at, f.Operand(call.in[0], /*mask=*/true), f.Operand(call.in[1]),
                                  f.Operand(call.in[2])));
  }
  if (!out.ok()) return e.Error(call.node, out.status().message());
  return out;
}

// A row's emitter. Only rows without an ONNX name ("" has size 1) instantiate
// their functor on OnnxExpr.
template <class Functor, int kArity, size_t kOnnxNameSize>
constexpr TensorEmitter RowEmitter() {
  if constexpr (kOnnxNameSize > 1) {
    return &EmitOnnxTwin;
  } else {
    return &EmitFormula<Functor, kArity>;
  }
}

}  // namespace

void AddElementwiseEmitters(EmitterTable* t) {
#define KGRAD_ELEMENTWISE(Name, wire, arity, dtypes, result, fusion, onnx) \
  t->Emit(PrimId::k##Name, RowEmitter<ew::Name##Op, arity, sizeof(onnx)>());
#include "ops/elementwise_table.inc"
#undef KGRAD_ELEMENTWISE
}

}  // namespace onnx_export_internal
}  // namespace kgrad
