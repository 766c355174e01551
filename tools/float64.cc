#include "tools/float64.h"

#include <cstring>
#include <utility>

#include "core/status_macros.h"
#include "ops/tc_block.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

void Widen(proto::TensorProto* t) {
  if (t->dtype() != proto::DT_FLOAT32) return;
  t->set_dtype(proto::DT_FLOAT64);
  if (t->raw_data().empty()) return;  // values given as double_data (or none)
  const std::string& raw = t->raw_data();
  std::string wide(raw.size() * 2, '\0');
  for (size_t i = 0; i < raw.size() / 4; ++i) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    double d = f;
    std::memcpy(&wide[8 * i], &d, 8);
  }
  t->set_raw_data(wide);
}

void Widen(proto::TypeProto* t) {
  if (t->has_tensor() && t->tensor().dtype() == proto::DT_FLOAT32) {
    t->mutable_tensor()->set_dtype(proto::DT_FLOAT64);
  }
  if (t->has_scalar() && t->scalar().dtype() == proto::DT_FLOAT32) {
    t->mutable_scalar()->set_dtype(proto::DT_FLOAT64);
  }
  if (t->has_tuple()) {
    for (auto& e : *t->mutable_tuple()->mutable_elements()) Widen(&e);
  }
}

// A tc block's `float` parameters as `double` (a block that does not parse is
// left for inference to report).
void WidenTcDef(proto::PrimitiveProto* p) {
  auto it = p->mutable_attrs()->find("def");
  if (it == p->mutable_attrs()->end() || it->second.value_case() != proto::AttrProto::kS) return;
  absl::StatusOr<tc::Block> block = tc::ParseBlock(it->second.s());
  if (!block.ok()) return;
  for (tc::TensorDecl& t : block->tensors) {
    if (t.input) t.dtype = DType::kFloat64;
  }
  it->second.set_s(tc::PrintBlock(*block));
}

void Widen(proto::ValueProto* v) {
  if (v->has_tensor()) Widen(v->mutable_tensor());
  if (v->has_scalar() && v->scalar().dtype() == proto::DT_FLOAT32) {
    v->mutable_scalar()->set_dtype(proto::DT_FLOAT64);
  }
  if (v->has_tuple()) {
    for (auto& e : *v->mutable_tuple()->mutable_elements()) Widen(&e);
  }
  if (v->has_primitive()) {
    for (auto& [name, attr] : *v->mutable_primitive()->mutable_attrs()) {
      if (attr.value_case() == proto::AttrProto::kDtype && attr.dtype() == proto::DT_FLOAT32) {
        attr.set_dtype(proto::DT_FLOAT64);
      }
    }
    if (v->primitive().name() == "tc") WidenTcDef(v->mutable_primitive());
  }
}

}  // namespace

proto::ModelProto ToFloat64(proto::ModelProto p) {
  for (auto& w : *p.mutable_weights()) Widen(w.mutable_value());
  for (auto& g : *p.mutable_graphs()) {
    for (auto& param : *g.mutable_parameters()) {
      if (param.has_type()) Widen(param.mutable_type());
    }
    for (auto& n : *g.mutable_nodes()) {
      if (n.has_constant()) Widen(n.mutable_constant());
    }
  }
  return p;
}

absl::StatusOr<std::unique_ptr<Module>> ToFloat64(Module& module) {
  KGRAD_ASSIGN_OR_RETURN(proto::ModelProto p, SaveModel(module));
  return LoadModel(ToFloat64(std::move(p)), module.registry(), "<float64 copy>");
}

Value WidenToFloat64(const Value& v) {
  if (v.is_scalar() && v.scalar().dtype() == DType::kFloat32) {
    return Value(Scalar::Float(v.scalar().AsDouble()));
  }
  if (!v.is_tensor() || v.tensor().dtype() != DType::kFloat32) return v;
  Tensor t = Tensor::Create(DType::kFloat64, v.tensor().shape()).value();
  const float* src = v.tensor().data<float>();
  double* dst = t.mutable_data<double>();
  for (int64_t k = 0; k < t.NumElements(); ++k) dst[k] = src[k];
  return Value(std::move(t));
}

}  // namespace kgrad
