// The ONNX export's walk: parameters become inputs, weights initializers, each
// application the nodes its family's emitter writes (onnx_exporter.h), and the
// output's tensor leaves the graph outputs.
#include "proto/onnx/onnx_export.h"

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_exporter.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_export_internal {

absl::StatusOr<Val> Exporter::ValueOf(AnfNode* n, const CNode* user) {
  auto it = values_.find(n);
  if (it != values_.end()) return it->second;
  if (n->is_parameter() && n->AsParameter()->is_weight()) {
    Val v{n->name()};
    TensorToOnnx(*n->AsParameter()->default_value(), n->name(), out_->add_initializer());
    values_[n] = v;
    return v;
  }
  const Value* k = ConstantOf(n);
  if (k != nullptr && k->is_tensor()) return Val{Const(k->tensor())};
  if (k != nullptr && k->is_scalar()) {
    // A scalar operand takes the dtype of the application's first tensor operand.
    DType t = k->scalar().dtype();
    for (size_t i = 0; user != nullptr && i < user->num_args(); ++i) {
      if (const AbstractTensor* a = AsTensor(user->arg(i)->abstract())) {
        t = a->dtype();
        break;
      }
    }
    return Val{Scalar(t, k->scalar().AsDouble())};
  }
  if (user == nullptr) return absl::InvalidArgumentError(absl::StrCat(n->Location(), ": cannot export the output"));
  return Error(user, absl::StrCat("operand ", n->DebugName(), " is ",
                                  k != nullptr ? k->TypeString() : "not a tensor, weight or parameter",
                                  " (export wants one graph of primitive applications: optimise first)"));
}

absl::StatusOr<std::string> Exporter::TensorArg(const CNode* c, int i) {
  KGRAD_ASSIGN_OR_RETURN(Val v, ValueOf(c->arg(i), c));
  if (v.is_tuple) return Error(c, absl::StrCat("operand ", i, " is a tuple"));
  return v.name;
}

const EmitterTable& AllEmitters() {
  static const EmitterTable* const table = [] {
    auto* t = new EmitterTable;
    for (auto add_family : {AddElementwiseEmitters, AddReduceEmitters, AddShapeEmitters,
                            AddNnEmitters, AddDynamicEmitters, AddStructuralEmitters}) {
      add_family(t);
    }
    return t;
  }();
  return *table;
}

namespace {

const char* RefusalOf(PrimId id) {
  for (const NotExportable& n : NotExportablePrims()) {
    if (n.id == id) return n.reason;
  }
  return nullptr;
}

// The emitter of c's primitive; null for a call or a primitive without one.
const Emitter* EmitterOf(const CNode* c) {
  const Primitive* p = c->primitive();
  if (p == nullptr) return nullptr;
  const Emitter& e = AllEmitters().Find(p->id());
  return e.tensor != nullptr || e.value != nullptr ? &e : nullptr;
}

}  // namespace

absl::Status Exporter::Refuse(const CNode* c) const {
  const Primitive* p = c->primitive();
  if (p == nullptr) {
    FuncGraph* cg = c->called_graph();
    return Error(c, cg != nullptr
                        ? absl::StrCat("it calls graph @", cg->name(), " (inline it: optimise first)")
                        : std::string("it calls a closure or a computed function (optimise first)"));
  }
  const char* why = RefusalOf(p->id());
  return Error(c, absl::StrCat(p->name(), " is ", why != nullptr ? why : "not exportable (no emitter)"));
}

absl::Status Exporter::Emit(CNode* c) {
  const Emitter* em = EmitterOf(c);
  if (em == nullptr) return Refuse(c);
  const Primitive* p = c->primitive();
  if (em->value != nullptr) {
    KGRAD_ASSIGN_OR_RETURN(Val v, em->value(*this, c, *p));
    values_[c] = std::move(v);
    return absl::OkStatus();
  }
  std::vector<std::string> args;
  for (size_t i = 0; i < c->num_args(); ++i) {
    KGRAD_ASSIGN_OR_RETURN(std::string a, TensorArg(c, static_cast<int>(i)));
    args.push_back(a);
  }
  const AbstractTensor* out = AsTensor(c->abstract());
  const ExportCall call{c, *p, args, out != nullptr ? out->dtype() : DType::kFloat32};
  KGRAD_ASSIGN_OR_RETURN(std::string y, em->tensor(*this, call));
  values_[c] = Val{y};
  return absl::OkStatus();
}

absl::Status Exporter::Run() {
  out_->set_name(g_->name());
  for (Parameter* prm : g_->parameters()) {
    const AbstractTensor* t = AsTensor(prm->declared());
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(prm->Location(), ": an ONNX input needs a declared tensor type"));
    }
    onnx::ValueInfoProto* in = out_->add_input();
    in->set_name(prm->name().empty() ? Fresh("input") : prm->name());
    TypeToOnnx(*t, in->mutable_type());
    values_[prm] = Val{in->name()};
  }
  Module& m = *g_->module();
  const GraphInfo& info = m.manager().Info(g_);
  for (AnfNode* fv : info.fvs) {
    if (!(fv->is_parameter() && fv->AsParameter()->is_weight())) {
      return absl::InvalidArgumentError(absl::StrCat(fv->Location(), ": graph @", g_->name(),
                                                     " uses a free variable; export wants a top-level graph"));
    }
  }
  std::vector<CNode*> order = info.order;  // copied: emitting reads the manager again
  // Calls and control flow first: they are why a graph is not exportable; then the
  // other primitives without an emitter, before any node is written.
  for (CNode* c : order) {
    const Primitive* p = c->primitive();
    if (p == nullptr || p->id() == PrimId::kSwitch || p->id() == PrimId::kPartial) return Refuse(c);
  }
  for (CNode* c : order) {
    if (EmitterOf(c) == nullptr) return Refuse(c);
  }
  for (CNode* c : order) KGRAD_RETURN_IF_ERROR(Emit(c));
  KGRAD_ASSIGN_OR_RETURN(Val result, ValueOf(g_->output(), nullptr));
  std::vector<std::string> leaves;
  Flatten(result, &leaves);
  for (size_t i = 0; i < leaves.size(); ++i) {
    NodeProto* n = Add("Identity", {leaves[i]});
    n->set_output(0, absl::StrCat("out_", i));
    onnx::ValueInfoProto* o = out_->add_output();
    o->set_name(n->output(0));
  }
  return absl::OkStatus();
}

// Output types, from the abstracts inference left on the output's leaves.
void SetOutputTypes(const AbstractPtr& a, onnx::GraphProto* g, int* next) {
  if (const AbstractTuple* t = AsTuple(a)) {
    for (const AbstractPtr& e : t->elements()) SetOutputTypes(e, g, next);
    return;
  }
  if (*next < g->output_size()) {
    if (const AbstractTensor* t = AsTensor(a)) TypeToOnnx(*t, g->mutable_output(*next)->mutable_type());
  }
  ++*next;
}

}  // namespace onnx_export_internal

OnnxExportSupport OnnxExportSupportOf(PrimId id) {
  OnnxExportSupport s;
  s.emitters = onnx_export_internal::AllEmitters().Find(id).registered;
  for (const onnx_export_internal::NotExportable& n : onnx_export_internal::NotExportablePrims()) {
    if (n.id != id) continue;
    ++s.refusals;
    s.reason = n.reason;
  }
  return s;
}

using onnx_export_internal::Exporter;
using onnx_export_internal::SetOutputTypes;

absl::StatusOr<onnx::ModelProto> ExportOnnx(Module& module, FuncGraph* graph) {
  absl::StatusOr<AbstractPtr> out_type = InferGraph(graph);
  if (!out_type.ok()) {
    return absl::Status(out_type.status().code(), absl::StrCat("graph @", graph->name(), ": inference before export: ",
                                                               out_type.status().message()));
  }
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kgrad");
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxExportOpset);
  Exporter e(graph, model.mutable_graph());
  KGRAD_RETURN_IF_ERROR(e.Run());
  int next = 0;
  SetOutputTypes(*out_type, model.mutable_graph(), &next);
  return model;
}

absl::Status ExportOnnxFile(Module& module, FuncGraph* graph, const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(onnx::ModelProto model, ExportOnnx(module, graph));
  std::ofstream out(path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out)) {
    return absl::InternalError(absl::StrCat(path, ": cannot write"));
  }
  return absl::OkStatus();
}

}  // namespace kgrad
