#include "proto/onnx/onnx_import.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/constant_evaluator.h"
#include "core/passes/outline_residual_blocks.h"
#include "core/infer.h"
#include "core/status_macros.h"
#include "proto/onnx/onnx_context.h"
#include "proto/onnx/onnx_tensor.h"

namespace kgrad {
namespace onnx_import {

// ----- Scope --------------------------------------------------------------------
const ImportedValue* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_) {
    auto it = s->values_.find(name);
    if (it != s->values_.end()) return &it->second;
  }
  return nullptr;
}

absl::Status Scope::Define(const std::string& name, ImportedValue v) {
  if (!values_.emplace(name, std::move(v)).second) {
    return absl::InvalidArgumentError(absl::StrCat("value '", name, "' is defined twice"));
  }
  return absl::OkStatus();
}

// ----- NodeContext ----------------------------------------------------------------
int64_t NodeContext::opset() const { return importer_.opset(); }

std::string NodeContext::Where() const {
  return absl::StrCat("node '", node_.name(), "' (", node_.op_type(), ")");
}

absl::Status NodeContext::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(), ": ", message));
}

absl::StatusOr<ImportedValue> NodeContext::Input(int i) const {
  if (!HasInput(i)) return Error(absl::StrCat("input ", i, " is missing"));
  const ImportedValue* v = scope_.Find(node_.input(i));
  if (v == nullptr) {
    return Error(absl::StrCat("input ", i, " '", node_.input(i),
                              "' is not defined (no graph input, initializer or earlier output)"));
  }
  return *v;
}

absl::StatusOr<Tensor> NodeContext::ConstInput(int i) const {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, Input(i));
  if (!v.constant.has_value()) {
    return Error(absl::StrCat("input ", i, " '", node_.input(i),
                              "' must be known at import time (a constant or a static shape)"));
  }
  return *v.constant;
}

absl::StatusOr<std::vector<int64_t>> NodeContext::ConstInts(int i) const {
  KGRAD_ASSIGN_OR_RETURN(Tensor t, ConstInput(i));
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) {
    return Error(absl::StrCat("input ", i, " must be an integer tensor, got ", t.TypeString()));
  }
  if (t.rank() > 1) return Error(absl::StrCat("input ", i, " must be 1-D, got ", t.TypeString()));
  std::vector<int64_t> out;
  for (int64_t k = 0; k < t.NumElements(); ++k) {
    out.push_back(t.dtype() == DType::kInt64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k]);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> NodeContext::KnownInts(int i) const {
  KGRAD_ASSIGN_OR_RETURN(ImportedValue v, Input(i));
  if (v.constant.has_value()) return ConstInts(i);
  const AbstractTensor* t = AsTensor(v.type);
  if (t == nullptr || t->rank() != 1 || !t->value().has_value()) return ConstInts(i);  // its error
  return std::vector<int64_t>(t->value()->begin(), t->value()->end());
}

absl::StatusOr<const AbstractTensor*> NodeContext::TensorType(const ImportedValue& v) const {
  const AbstractTensor* t = AsTensor(v.type);
  if (t == nullptr) return Error(absl::StrCat("expected a tensor, got ", v.type->ToString()));
  return t;
}

absl::Status NodeContext::ExpectInputs(int min, int max) const {
  if (node_.input_size() < min || node_.input_size() > max) {
    return Error(absl::StrCat("has ", node_.input_size(), " inputs, expected ", min,
                              min == max ? "" : absl::StrCat(" to ", max)));
  }
  for (int i = 0; i < min; ++i) {
    if (node_.input(i).empty()) return Error(absl::StrCat("required input ", i, " is empty"));
  }
  return absl::OkStatus();
}

absl::Status NodeContext::ExpectOutputs(int max) const {
  for (int i = max; i < node_.output_size(); ++i) {
    if (!node_.output(i).empty()) {
      return Error(absl::StrCat("output ", i, " '", node_.output(i), "' is not supported (at most ",
                                max, " output", max == 1 ? "" : "s", ")"));
    }
  }
  return absl::OkStatus();
}

const onnx::AttributeProto* NodeContext::Attr(const std::string& name) const {
  for (const onnx::AttributeProto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

namespace {
absl::Status AttrTypeError(const NodeContext& c, const onnx::AttributeProto& a, const char* want) {
  return c.Error(absl::StrCat("attribute '", a.name(), "' must be ", want, ", got type ",
                              onnx::AttributeProto::AttributeType_Name(a.type())));
}
}  // namespace

absl::StatusOr<int64_t> NodeContext::Int(const std::string& name, int64_t dflt) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::INT) return AttrTypeError(*this, *a, "an int");
  return a->i();
}

absl::StatusOr<double> NodeContext::Float(const std::string& name, double dflt) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::FLOAT) return AttrTypeError(*this, *a, "a float");
  return a->f();
}

absl::StatusOr<std::string> NodeContext::String(const std::string& name,
                                                const std::string& dflt) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::STRING) return AttrTypeError(*this, *a, "a string");
  return a->s();
}

absl::StatusOr<std::vector<int64_t>> NodeContext::Ints(const std::string& name,
                                                       std::vector<int64_t> dflt) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return dflt;
  if (a->type() != onnx::AttributeProto::INTS) return AttrTypeError(*this, *a, "a list of ints");
  if (a->ints_size() > 4 * kMaxRank) return Error(absl::StrCat("attribute '", name, "' is too long"));
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

absl::StatusOr<const onnx::GraphProto*> NodeContext::Graph(const std::string& name) const {
  const onnx::AttributeProto* a = Attr(name);
  if (a == nullptr) return Error(absl::StrCat("attribute '", name, "' is missing"));
  if (a->type() != onnx::AttributeProto::GRAPH) return AttrTypeError(*this, *a, "a graph");
  return &a->g();
}

ImportedValue NodeContext::Const(Tensor t) const {
  ImportedValue v;
  v.type = AbstractOfValue(Value(t));
  v.constant = std::move(t);
  return v;
}

absl::StatusOr<ImportedValue> NodeContext::Scalar(DType t, double v) const {
  KGRAD_ASSIGN_OR_RETURN(Tensor k, Tensor::Full(t, {}, v));
  return Const(std::move(k));
}

absl::StatusOr<ImportedValue> NodeContext::ScalarLike(const ImportedValue& like, double v) const {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorType(like));
  return Scalar(t->dtype(), v);
}

absl::StatusOr<int64_t> NodeContext::StaticDim(const ImportedValue& v, int64_t axis,
                                               const char* what) const {
  KGRAD_ASSIGN_OR_RETURN(const AbstractTensor* t, TensorType(v));
  absl::StatusOr<int> a = NormalizeAxis(axis, t->rank());
  if (!a.ok() || t->shape()[*a] < 0) {
    return Error(absl::StrCat("needs a static ", what, " (dim ", axis, ") of ", t->ToString()));
  }
  return t->shape()[*a];
}

Outputs OneOutput(absl::StatusOr<ImportedValue> v) {
  if (!v.ok()) return v.status();
  return std::vector<ImportedValue>{*std::move(v)};
}

AnfNode* NodeContext::NodeOf(const ImportedValue& v) const {
  if (v.node != nullptr) return v.node;
  return b().Const(Value(*v.constant));
}

namespace {

// The tensor a shape value stands for, when every element is a number.
std::optional<Tensor> KnownShapeValue(const AbstractTensor* t) {
  if (t == nullptr || !t->value().has_value()) return std::nullopt;
  const Shape& v = *t->value();
  if (std::any_of(v.begin(), v.end(), [](int64_t e) { return e == kUnknownValue || IsSymbolDim(e); })) {
    return std::nullopt;
  }
  Tensor out = Tensor::Create(t->dtype(), t->shape()).value();
  for (size_t i = 0; i < v.size(); ++i) {
    if (t->dtype() == DType::kInt64) {
      out.mutable_data<int64_t>()[i] = v[i];
    } else {
      out.mutable_data<int32_t>()[i] = static_cast<int32_t>(v[i]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ImportedValue> NodeContext::Emit(PrimId id, const std::vector<ImportedValue>& args,
                                                AttrMap attrs) const {
  absl::StatusOr<PrimitivePtr> prim = importer_.module().registry().Make(id, std::move(attrs));
  if (!prim.ok()) return Error(prim.status().message());
  std::vector<AbstractPtr> types;
  bool known = true;
  for (const ImportedValue& a : args) {
    types.push_back(a.type);
    known = known && a.constant.has_value();
  }
  absl::StatusOr<AbstractPtr> type = InferPrimitiveCall(**prim, types);
  if (!type.ok()) return Error(type.status().message());
  if (*type == nullptr) return Error(absl::StrCat("cannot infer the type of ", (*prim)->ToString()));
  const AbstractTensor* t = AsTensor(*type);
  const ConstantEvaluator* eval = importer_.options().evaluator;
  if (known && eval != nullptr && t != nullptr && t->shape_known() &&
      NumElementsOf(t->shape()) <= importer_.options().max_folded_elements) {
    std::vector<Value> values;
    for (const ImportedValue& a : args) values.push_back(Value(*a.constant));
    absl::StatusOr<Value> r = eval->Evaluate(**prim, std::move(values));
    if (!r.ok()) return Error(r.status().message());
    if (r->is_tensor()) return Const(r->tensor());
  }
  // A run-time shape computation whose every element inference knows (Gather of a
  // static dim of shape_of(x) on [batch,512]) is a constant from here on.
  if (std::optional<Tensor> v = KnownShapeValue(t)) return Const(*std::move(v));
  std::vector<AnfNode*> nodes;
  for (const ImportedValue& a : args) nodes.push_back(NodeOf(a));
  ImportedValue out;
  out.node = b().Op(*prim, std::move(nodes));
  out.type = *type;
  return out;
}

absl::StatusOr<ImportedValue> NodeContext::Item(const ImportedValue& tuple, int64_t i) const {
  const AbstractTuple* t = AsTuple(tuple.type);
  if (t == nullptr || i < 0 || i >= static_cast<int64_t>(t->size())) {
    return Error(absl::StrCat("no element ", i, " in ", tuple.type->ToString()));
  }
  ImportedValue out;
  out.node = b().GetItem(NodeOf(tuple), i);
  out.type = t->elements()[i];
  return out;
}

// ----- Importer -------------------------------------------------------------------
namespace {

// Ops whose opset 1-6 forms mean what their opset 7 forms mean (the later versions
// only widened types or dropped the unused consumed_inputs attribute): the
// elementwise ops, the global pools, InstanceNormalization and TopK (its k
// attribute form lasts to opset 9).
bool SameBeforeOpset7(const std::string& op) {
  static const absl::flat_hash_set<std::string>* const ops = new absl::flat_hash_set<std::string>{
      "Abs", "Add", "And", "Ceil", "Clip", "Div", "Elu", "Equal", "Exp", "Floor",
      "GlobalAveragePool", "GlobalMaxPool", "Greater", "HardSigmoid", "Identity",
      "InstanceNormalization", "LeakyRelu", "Less", "Log", "LogSoftmax", "Max", "Mean", "Min",
      "Mul", "Neg", "Not", "Or", "Reciprocal", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus",
      "Softsign", "Sqrt", "Sub", "Sum", "Tanh", "ThresholdedRelu", "TopK", "Xor"};
  return ops->contains(op);
}

}  // namespace

// Opsets 1-6: only the ops listed above, and NumPy-style broadcasting only (the
// legacy `broadcast` attribute with an `axis` aligns dims differently).
absl::Status CheckLegacyForm(const NodeContext& c) {
  if (c.opset() >= 7) return absl::OkStatus();
  if (!SameBeforeOpset7(c.node().op_type())) {
    return c.Error(absl::StrCat("is not supported at opset ", c.opset(), " (its form before opset 7)"));
  }
  if (c.HasAttr("broadcast") && c.HasAttr("axis")) {
    return c.Error("legacy broadcasting with 'axis' (before opset 7) is not supported");
  }
  return absl::OkStatus();
}

namespace {
absl::Status DefineInitializers(const onnx::GraphProto& graph, Module& module, Scope& scope,
                                const LoadLimits& limits, bool weights);
}  // namespace

absl::StatusOr<std::vector<ImportedValue>> Importer::ImportNodes(const onnx::GraphProto& graph,
                                                                 Scope& scope, int depth) {
  if (depth > options_.limits.max_nesting_depth) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' is nested more than ",
                                                   options_.limits.max_nesting_depth, " deep"));
  }
  // A subgraph's own initializers (If branches, Loop bodies) are constants of
  // that subgraph: weights live in the main graph only.
  if (depth > 0) KGRAD_RETURN_IF_ERROR(DefineInitializers(graph, module_, scope, options_.limits, false));
  int saved_depth = depth_;
  depth_ = depth;
  for (const onnx::NodeProto& node : graph.node()) {
    NodeContext c(*this, scope, node);
    OpMapping mapping = FindOpMapping(node.op_type());
    if (mapping == nullptr) return c.Error("unsupported op");  // the pre-scan lists them all
    KGRAD_RETURN_IF_ERROR(CheckLegacyForm(c));
    KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> outs, mapping(c));
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      if (i >= static_cast<int>(outs.size())) {
        return c.Error(absl::StrCat("output ", i, " '", node.output(i), "' is not supported"));
      }
      absl::Status s = scope.Define(node.output(i), outs[i]);
      if (!s.ok()) return c.Error(s.message());
    }
    KGRAD_RETURN_IF_ERROR(scope.builder().status());
  }
  depth_ = saved_depth;
  std::vector<ImportedValue> outputs;
  for (const onnx::ValueInfoProto& o : graph.output()) {
    const ImportedValue* v = scope.Find(o.name());
    if (v == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph '", graph.name(), "': output '", o.name(), "' is not defined"));
    }
    outputs.push_back(*v);
  }
  if (outputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' has no outputs"));
  }
  return outputs;
}

namespace {

// Floating-point initializers are weights; the others (shapes, indices) constants.
absl::Status DefineInitializers(const onnx::GraphProto& graph, Module& module, Scope& scope,
                                const LoadLimits& limits, bool weights) {
  if (graph.sparse_initializer_size() > 0) {
    return absl::UnimplementedError(absl::StrCat("graph '", graph.name(), "': sparse initializers are not supported"));
  }
  for (const onnx::TensorProto& init : graph.initializer()) {
    absl::StatusOr<Tensor> t = TensorFromOnnx(init, limits);
    if (!t.ok()) {
      return absl::Status(t.status().code(), absl::StrCat("graph '", graph.name(), "': initializer: ",
                                                          t.status().message()));
    }
    ImportedValue v;
    v.type = AbstractOfValue(Value(*t));
    if (weights && IsDifferentiable(t->dtype())) {
      absl::StatusOr<Parameter*> w = module.AddWeight(init.name(), *t);
      if (!w.ok()) return absl::InvalidArgumentError(absl::StrCat("initializer '", init.name(), "': ", w.status().message()));
      v.node = *w;
    } else {
      v.constant = *std::move(t);
    }
    absl::Status s = scope.Define(init.name(), std::move(v));
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "': ", s.message()));
  }
  return absl::OkStatus();
}

// Every unsupported op type (with its node names) in the graph and its subgraphs,
// and the node count, bounded before any work.
void ScanOps(const onnx::GraphProto& g, int depth, int max_depth,
             absl::btree_set<std::string>* unsupported, int64_t* nodes, bool* too_deep) {
  if (depth > max_depth) {
    *too_deep = true;
    return;
  }
  for (const onnx::NodeProto& n : g.node()) {
    ++*nodes;
    bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (!std_domain || FindOpMapping(n.op_type()) == nullptr) {
      unsupported->insert(absl::StrCat(std_domain ? "" : n.domain() + ".", n.op_type(), " (node '",
                                       n.name(), "')"));
    }
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) ScanOps(a.g(), depth + 1, max_depth, unsupported, nodes, too_deep);
      for (const onnx::GraphProto& sub : a.graphs()) {
        ScanOps(sub, depth + 1, max_depth, unsupported, nodes, too_deep);
      }
    }
  }
}

absl::StatusOr<int64_t> DefaultOpset(const onnx::ModelProto& model) {
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      if (o.version() < 1 || o.version() > 21) {
        return absl::UnimplementedError(absl::StrCat("opset ", o.version(), " is not supported (1 to 21 are; "
                                                     "13 to 17 are tested)"));
      }
      return o.version();
    }
  }
  return absl::InvalidArgumentError("the model imports no default-domain opset");
}

absl::Status DefineInputs(const onnx::GraphProto& graph, const OnnxImportOptions& options, Scope& scope) {
  for (const onnx::ValueInfoProto& in : graph.input()) {
    if (scope.Find(in.name()) != nullptr) continue;  // an initializer listed as input
    auto given = options.input_types.find(in.name());
    absl::StatusOr<AbstractPtr> type =
        given != options.input_types.end() ? absl::StatusOr<AbstractPtr>(given->second)
                                          : TypeFromOnnx(in.type());
    if (!type.ok()) {
      return absl::Status(type.status().code(), absl::StrCat("graph input '", in.name(), "': ",
                                                             type.status().message()));
    }
    ImportedValue v;
    v.node = scope.builder().Param(in.name(), *type);
    v.type = *type;
    v.optional = in.type().has_optional_type();
    KGRAD_RETURN_IF_ERROR(scope.Define(in.name(), std::move(v)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FuncGraph*> ImportGraph(Importer& importer, const onnx::GraphProto& graph,
                                       GraphBuilder& b) {
  Scope scope(&b, nullptr);
  const LoadLimits& limits = importer.options().limits;
  KGRAD_RETURN_IF_ERROR(DefineInitializers(graph, importer.module(), scope, limits, true));
  KGRAD_RETURN_IF_ERROR(DefineInputs(graph, importer.options(), scope));
  KGRAD_ASSIGN_OR_RETURN(std::vector<ImportedValue> outs, importer.ImportNodes(graph, scope, 0));
  NodeContext c(importer, scope, onnx::NodeProto::default_instance());
  std::vector<AnfNode*> nodes;
  for (const ImportedValue& v : outs) nodes.push_back(c.NodeOf(v));
  return b.Return(nodes.size() == 1 ? nodes[0] : b.Tuple(nodes));
}

}  // namespace onnx_import

absl::StatusOr<std::unique_ptr<Module>> ImportOnnx(const onnx::ModelProto& model,
                                                   const PrimitiveRegistry& registry,
                                                   const OnnxImportOptions& options,
                                                   absl::string_view source) {
  auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
  };
  absl::StatusOr<int64_t> opset = onnx_import::DefaultOpset(model);
  if (!opset.ok()) return fail(opset.status());
  const onnx::GraphProto& graph = model.graph();
  absl::btree_set<std::string> unsupported;
  int64_t nodes = 0;
  bool too_deep = false;
  onnx_import::ScanOps(graph, 0, options.limits.max_nesting_depth, &unsupported, &nodes, &too_deep);
  if (too_deep) return fail(absl::InvalidArgumentError("subgraphs are nested too deep"));
  if (nodes > options.limits.max_nodes) {
    return fail(absl::ResourceExhaustedError(absl::StrCat(nodes, " nodes exceed the limit of ",
                                                          options.limits.max_nodes)));
  }
  if (!unsupported.empty()) {
    return fail(absl::UnimplementedError(absl::StrCat(unsupported.size(), " unsupported ONNX op",
                                                      unsupported.size() == 1 ? "" : "s", ": ",
                                                      absl::StrJoin(unsupported, ", "))));
  }
  auto module = std::make_unique<Module>(registry);
  OnnxImportOptions resolved = options;
  if (resolved.evaluator == nullptr) resolved.evaluator = &CpuConstantEvaluator::Get();
  module->set_constant_evaluator(resolved.evaluator);
  onnx_import::Importer importer(*module, resolved, *opset);
  GraphBuilder b(module.get(), graph.name().empty() ? "main" : graph.name());
  absl::StatusOr<FuncGraph*> entry = onnx_import::ImportGraph(importer, graph, b);
  if (!entry.ok()) return fail(entry.status());
  module->set_entry(*entry);
  module->CollectGarbage();
  if (options.remat_residual_blocks.has_value()) {
    absl::Status s = OutlineResidualBlocks(*module, *entry, *options.remat_residual_blocks).status();
    if (!s.ok()) return fail(s);
    module->CollectGarbage();
  }
  return module;
}

absl::StatusOr<std::unique_ptr<Module>> ParseOnnx(absl::string_view bytes,
                                                  const PrimitiveRegistry& registry,
                                                  const OnnxImportOptions& options,
                                                  absl::string_view source) {
  if (static_cast<int64_t>(bytes.size()) > options.limits.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(source, ": ", bytes.size(), " bytes exceed the limit of ",
                                                     options.limits.max_file_bytes));
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a valid ONNX model (protobuf parse failed)"));
  }
  return ImportOnnx(model, registry, options, source);
}

absl::StatusOr<std::unique_ptr<Module>> ImportOnnxFile(const std::string& path,
                                                       const PrimitiveRegistry& registry,
                                                       const OnnxImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read"));
  if (size > options.limits.max_file_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": ", size, " bytes exceed the limit of ",
                                                     options.limits.max_file_bytes));
  }
  in.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read"));
  return ParseOnnx(bytes, registry, options, path);
}

}  // namespace kgrad
