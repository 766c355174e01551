// Loading graph files: two passes (graphs, then their nodes), every reference
// checked, then the verifier.
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/value_walk.h"
#include "core/verifier.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

absl::Status Err(absl::StatusCode code, absl::string_view where, absl::string_view what) {
  return absl::Status(code, absl::StrCat(where, ": ", what));
}

// Where the entry `kind 'name'` inside `within` is, for messages ("m.pb: weight
// 'w1'" with `sep` ": "); an error at `within` when the entry has no name.
absl::StatusOr<std::string> NamedEntry(absl::string_view within, absl::string_view sep,
                                       absl::string_view kind, const std::string& name) {
  if (name.empty()) {
    return Err(absl::StatusCode::kInvalidArgument, within,
               absl::StrCat("a ", kind, " has no name"));
  }
  return absl::StrCat(within, sep, kind, " '", name, "'");
}

class Loader {
 public:
  Loader(const proto::ModelProto& model, const PrimitiveRegistry& registry,
         absl::string_view source, const LoadLimits& limits)
      : model_(model), registry_(registry), source_(source), limits_(limits) {}

  absl::StatusOr<std::unique_ptr<Module>> Load() {
    KGRAD_RETURN_IF_ERROR(CheckHeader());
    module_ = std::make_unique<Module>(registry_);
    KGRAD_RETURN_IF_ERROR(LoadWeights());
    KGRAD_RETURN_IF_ERROR(DeclareGraphs());
    for (int i = 0; i < model_.graphs_size(); ++i) {
      KGRAD_RETURN_IF_ERROR(LoadGraph(model_.graphs(i), graphs_[i]));
    }
    KGRAD_RETURN_IF_ERROR(LinkGraphs());
    absl::Status v = VerifyModule(*module_);
    if (!v.ok()) return Err(v.code(), source_, v.message());
    return std::move(module_);
  }

 private:
  absl::Status CheckHeader() {
    if (model_.format_version() == 0) {
      return Err(absl::StatusCode::kInvalidArgument, source_,
                 "format_version is missing (expected 1); is this a kgrad graph file?");
    }
    if (model_.format_version() != kFormatVersion) {
      return Err(absl::StatusCode::kUnimplemented, source_,
                 absl::StrCat("unsupported format_version ", model_.format_version(),
                              " (this kgrad reads version ", kFormatVersion, ")"));
    }
    if (model_.graphs_size() == 0) {
      return Err(absl::StatusCode::kInvalidArgument, source_, "the model has no graphs");
    }
    if (model_.graphs_size() > limits_.max_graphs) {
      return Err(absl::StatusCode::kResourceExhausted, source_,
                 absl::StrCat(model_.graphs_size(), " graphs exceed the limit LoadLimits::max_graphs = ",
                              limits_.max_graphs));
    }
    int64_t nodes = 0;
    for (const auto& g : model_.graphs()) nodes += g.nodes_size() + g.parameters_size();
    if (nodes > limits_.max_nodes) {
      return Err(absl::StatusCode::kResourceExhausted, source_,
                 absl::StrCat(nodes, " nodes exceed the limit LoadLimits::max_nodes = ", limits_.max_nodes));
    }
    return absl::OkStatus();
  }

  // Counts the tensors of a weight or constant against max_total_tensor_bytes.
  absl::Status ChargeTensorBytes(const Value& v, absl::string_view where) {
    (void)ForEachLeaf(v, [this](const Value& leaf, absl::Span<const size_t>) {
      if (leaf.is_tensor()) tensor_bytes_ += static_cast<int64_t>(leaf.tensor().nbytes());
      return absl::OkStatus();
    });
    if (tensor_bytes_ > limits_.max_total_tensor_bytes) {
      return Err(absl::StatusCode::kResourceExhausted, where,
                 absl::StrCat("weights and constants take ", tensor_bytes_,
                              " bytes, over the limit LoadLimits::max_total_tensor_bytes = ",
                              limits_.max_total_tensor_bytes));
    }
    return absl::OkStatus();
  }

  absl::Status LoadWeights() {
    for (const proto::WeightProto& w : model_.weights()) {
      KGRAD_ASSIGN_OR_RETURN(std::string where, NamedEntry(source_, ": ", "weight", w.name()));
      absl::StatusOr<Tensor> t = TensorFromProto(w.value(), limits_);
      if (!t.ok()) return Err(t.status().code(), where, t.status().message());
      KGRAD_RETURN_IF_ERROR(ChargeTensorBytes(Value(*t), where));
      absl::StatusOr<Parameter*> p = module_->AddWeight(w.name(), *std::move(t));
      if (!p.ok()) return Err(absl::StatusCode::kInvalidArgument, where, p.status().message());
    }
    return absl::OkStatus();
  }

  // Pass 1: every graph exists (constants may name graphs defined later).
  absl::Status DeclareGraphs() {
    for (const proto::GraphProto& gp : model_.graphs()) {
      KGRAD_ASSIGN_OR_RETURN(std::string where, NamedEntry(source_, ": ", "graph", gp.name()));
      if (by_name_.contains(gp.name())) {
        return Err(absl::StatusCode::kInvalidArgument, where, "duplicate graph name");
      }
      FuncGraph* parent = nullptr;
      if (!gp.parent().empty()) {
        auto it = by_name_.find(gp.parent());
        if (it == by_name_.end()) {
          return Err(absl::StatusCode::kInvalidArgument, where,
                     absl::StrCat("parent '", gp.parent(),
                                  "' is not a graph listed before it (enclosing graphs come first)"));
        }
        parent = it->second;
        if (parent->depth() + 1 >= limits_.max_nesting_depth) {
          return Err(absl::StatusCode::kResourceExhausted, where,
                     absl::StrCat("graphs nest deeper than the limit LoadLimits::max_nesting_depth = ",
                                  limits_.max_nesting_depth));
        }
      }
      FuncGraph* g = module_->NewGraph(gp.name(), parent);
      by_name_[gp.name()] = g;
      graphs_.push_back(g);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<FuncGraph*> ResolveGraph(const std::string& name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown graph '", name, "'"));
    }
    return it->second;
  }

  absl::Status LoadGraph(const proto::GraphProto& gp, FuncGraph* g) {
    std::string gwhere = absl::StrCat(source_, ": graph '", gp.name(), "'");
    auto& scope = scopes_[g];
    for (const proto::ParameterProto& pp : gp.parameters()) {
      KGRAD_ASSIGN_OR_RETURN(std::string where, NamedEntry(gwhere, ", ", "parameter", pp.name()));
      if (scope.contains(pp.name())) return Err(absl::StatusCode::kInvalidArgument, where, "duplicate name");
      AbstractPtr declared;
      if (pp.has_type()) {
        absl::StatusOr<AbstractPtr> t = TypeFromProto(pp.type());
        if (!t.ok()) return Err(absl::StatusCode::kInvalidArgument, where, t.status().message());
        declared = *t;
      }
      scope[pp.name()] = g->AddParameter(pp.name(), declared);
    }
    KGRAD_RETURN_IF_ERROR(BindFreeVariables(gp, g, gwhere));
    absl::flat_hash_map<std::string, int> later;  // for "cycle or out of order" messages
    for (int i = 0; i < gp.nodes_size(); ++i) later[gp.nodes(i).name()] = i;
    for (int i = 0; i < gp.nodes_size(); ++i) {
      KGRAD_RETURN_IF_ERROR(LoadNode(gp, i, g, gwhere, later));
    }
    if (gp.output().empty()) return Err(absl::StatusCode::kInvalidArgument, gwhere, "has no output");
    absl::StatusOr<AnfNode*> out = Resolve(gp, g, gp.output(), -1, later);
    if (!out.ok()) return Err(out.status().code(), absl::StrCat(gwhere, ", output"), out.status().message());
    g->set_output(*out);
    return absl::OkStatus();
  }

  // The capture list: each name must be a node of an enclosing graph.
  absl::Status BindFreeVariables(const proto::GraphProto& gp, FuncGraph* g, const std::string& gwhere) {
    auto& scope = scopes_[g];
    for (const std::string& name : gp.free_variables()) {
      std::string where = absl::StrCat(gwhere, ", free variable '", name, "'");
      if (scope.contains(name)) return Err(absl::StatusCode::kInvalidArgument, where, "duplicate name");
      AnfNode* found = nullptr;
      std::vector<std::string> searched;
      for (FuncGraph* p = g->parent(); p != nullptr && found == nullptr; p = p->parent()) {
        searched.push_back(p->name());
        auto it = scopes_[p].find(name);
        if (it != scopes_[p].end()) found = it->second;
      }
      if (found == nullptr) {
        return Err(absl::StatusCode::kInvalidArgument, where,
                   searched.empty()
                       ? "a top-level graph has no enclosing graph to capture from"
                       : absl::StrCat("resolves to no node of an enclosing graph (searched ",
                                      absl::StrJoin(searched, ", "), ")"));
      }
      scope[name] = found;
    }
    return absl::OkStatus();
  }

  absl::Status LoadNode(const proto::GraphProto& gp, int i, FuncGraph* g, const std::string& gwhere,
                        const absl::flat_hash_map<std::string, int>& later) {
    const proto::NodeProto& np = gp.nodes(i);
    std::string where = absl::StrCat(gwhere, ", node '", np.name(), "'");
    auto& scope = scopes_[g];
    if (np.name().empty()) {
      return Err(absl::StatusCode::kInvalidArgument, gwhere, absl::StrCat("node #", i, " has no name"));
    }
    if (scope.contains(np.name())) return Err(absl::StatusCode::kInvalidArgument, where, "duplicate name");
    AnfNode* node = nullptr;
    if (np.has_constant()) {
      absl::StatusOr<Value> v = ValueFromProto(np.constant(), registry_,
                                               [this](const std::string& n) { return ResolveGraph(n); },
                                               limits_);
      if (!v.ok()) return Err(v.status().code(), where, v.status().message());
      KGRAD_RETURN_IF_ERROR(ChargeTensorBytes(*v, where));
      node = g->NewValueNode(*std::move(v));
    } else if (np.has_apply()) {
      if (np.apply().inputs_size() == 0) {
        return Err(absl::StatusCode::kInvalidArgument, where, "an application needs a callee (inputs[0])");
      }
      std::vector<AnfNode*> inputs;
      for (const std::string& in : np.apply().inputs()) {
        absl::StatusOr<AnfNode*> r = Resolve(gp, g, in, i, later);
        if (!r.ok()) return Err(r.status().code(), where, r.status().message());
        inputs.push_back(*r);
      }
      node = g->NewCNode(std::move(inputs));
    } else {
      return Err(absl::StatusCode::kInvalidArgument, where, "is neither a constant nor an application");
    }
    node->set_name(np.name());
    scope[np.name()] = node;
    return absl::OkStatus();
  }

  absl::StatusOr<AnfNode*> Resolve(const proto::GraphProto& gp, FuncGraph* g, const std::string& name,
                                   int at, const absl::flat_hash_map<std::string, int>& later) {
    auto& scope = scopes_[g];
    auto it = scope.find(name);
    if (it != scope.end()) return it->second;
    if (Parameter* w = module_->FindWeight(name)) return w;
    auto lt = later.find(name);
    if (lt != later.end()) {
      bool cycle = at >= 0 && Reaches(gp, lt->second, gp.nodes(at).name(), later);
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", name, "' is defined later in the graph: ",
          cycle ? "the nodes form a cycle" : "nodes must be listed in topological order"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown name '", name, "' (not a parameter, earlier node, declared free variable or weight of graph '",
        gp.name(), "')"));
  }

  // Whether node `from` depends (through names of this graph) on `target`.
  bool Reaches(const proto::GraphProto& gp, int from, const std::string& target,
               const absl::flat_hash_map<std::string, int>& index) {
    std::vector<int> work{from};
    std::vector<bool> seen(gp.nodes_size(), false);
    while (!work.empty()) {
      int i = work.back();
      work.pop_back();
      if (seen[i]) continue;
      seen[i] = true;
      if (!gp.nodes(i).has_apply()) continue;
      for (const std::string& in : gp.nodes(i).apply().inputs()) {
        if (in == target) return true;
        auto it = index.find(in);
        if (it != index.end()) work.push_back(it->second);
      }
    }
    return false;
  }

  absl::Status LinkGraphs() {
    for (int i = 0; i < model_.graphs_size(); ++i) {
      const proto::GraphProto& gp = model_.graphs(i);
      if (!gp.custom_bprop().empty()) {
        absl::StatusOr<FuncGraph*> b = ResolveGraph(gp.custom_bprop());
        if (!b.ok()) {
          return Err(absl::StatusCode::kInvalidArgument, absl::StrCat(source_, ": graph '", gp.name(), "'"),
                     absl::StrCat("custom_bprop: ", b.status().message()));
        }
        graphs_[i]->set_custom_bprop(*b);
      }
      if (!gp.remat().empty()) {
        absl::StatusOr<RematPolicy> policy = ParseRematPolicy(gp.remat());
        if (!policy.ok()) {
          return Err(absl::StatusCode::kInvalidArgument, absl::StrCat(source_, ": graph '", gp.name(), "'"),
                     absl::StrCat("remat: ", policy.status().message()));
        }
        graphs_[i]->set_remat(*policy);
      }
      if (graphs_[i]->parent() == nullptr) graphs_[i]->set_public(true);
    }
    if (model_.entry().empty()) {
      for (FuncGraph* g : graphs_) {
        if (g->parent() == nullptr) {
          module_->set_entry(g);
          break;
        }
      }
      return absl::OkStatus();
    }
    absl::StatusOr<FuncGraph*> e = ResolveGraph(model_.entry());
    if (!e.ok()) return Err(absl::StatusCode::kInvalidArgument, source_, absl::StrCat("entry: ", e.status().message()));
    module_->set_entry(*e);
    return absl::OkStatus();
  }

  const proto::ModelProto& model_;
  const PrimitiveRegistry& registry_;
  std::string source_;
  const LoadLimits& limits_;
  int64_t tensor_bytes_ = 0;
  std::unique_ptr<Module> module_;
  std::vector<FuncGraph*> graphs_;
  absl::flat_hash_map<std::string, FuncGraph*> by_name_;
  absl::flat_hash_map<FuncGraph*, absl::flat_hash_map<std::string, AnfNode*>> scopes_;
};

bool ParseBinary(absl::string_view bytes, const LoadLimits& limits, proto::ModelProto* model) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetRecursionLimit(limits.max_message_depth);
  return model->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Module>> LoadModel(const proto::ModelProto& model,
                                                  const PrimitiveRegistry& registry,
                                                  absl::string_view source, const LoadLimits& limits) {
  Loader loader(model, registry, source, limits);
  return loader.Load();
}

absl::StatusOr<std::unique_ptr<Module>> ParseModel(absl::string_view bytes, bool text,
                                                   const PrimitiveRegistry& registry,
                                                   absl::string_view source, const LoadLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_file_bytes) {
    return Err(absl::StatusCode::kResourceExhausted, source,
               absl::StrCat("file of ", bytes.size(), " bytes exceeds the limit LoadLimits::max_file_bytes = ",
                            limits.max_file_bytes));
  }
  proto::ModelProto model;
  if (text) {
    google::protobuf::TextFormat::Parser parser;
    parser.AllowPartialMessage(false);
    parser.SetRecursionLimit(limits.max_message_depth);
    // Silence protobuf's own logging of parse errors; our Status carries them.
    struct Collector : google::protobuf::io::ErrorCollector {
      std::string first;
      void AddError(int line, int column, const std::string& message) override {
        if (first.empty()) first = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
      }
    } errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(std::string(bytes), &model)) {
      return Err(absl::StatusCode::kInvalidArgument, source,
                 absl::StrCat("not a valid text-format ModelProto (", errors.first, ")"));
    }
  } else if (!ParseBinary(bytes, limits, &model)) {
    return Err(absl::StatusCode::kInvalidArgument, source,
               "not a valid binary ModelProto (truncated or not a kgrad graph file)");
  }
  return LoadModel(model, registry, source, limits);
}

absl::StatusOr<std::unique_ptr<Module>> LoadModelFile(const std::string& path,
                                                      const PrimitiveRegistry& registry,
                                                      const LoadLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::ostringstream buf;
  buf << in.rdbuf();
  bool text = absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt");
  return ParseModel(buf.str(), text, registry, path, limits);
}

}  // namespace kgrad
