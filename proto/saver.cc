// Saving modules as ModelProtos: enclosing graphs first, nodes in evaluation
// order, constants next to their first reader, every node named.
#include <algorithm>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "google/protobuf/text_format.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

class Saver {
 public:
  explicit Saver(Module& m) : module_(m), manager_(m.manager()) {}

  absl::StatusOr<proto::ModelProto> Save() {
    proto::ModelProto out;
    out.set_format_version(kFormatVersion);
    out.set_producer("kgrad");
    for (const auto& w : module_.weights()) {
      proto::WeightProto* wp = out.add_weights();
      wp->set_name(w->name());
      TensorToProto(*w->default_value(), wp->mutable_value());
    }
    for (FuncGraph* g : GraphsInOrder()) KGRAD_RETURN_IF_ERROR(SaveGraph(g, out.add_graphs()));
    if (module_.entry() != nullptr) out.set_entry(module_.entry()->name());
    return out;
  }

 private:
  // Graphs a public graph reaches, each after its enclosing graph (stable by
  // creation order otherwise).
  std::vector<FuncGraph*> GraphsInOrder() {
    std::vector<FuncGraph*> reach = manager_.ReachableFromPublic();
    absl::flat_hash_set<FuncGraph*> keep(reach.begin(), reach.end());
    std::vector<FuncGraph*> out;
    for (const auto& g : module_.graphs()) {
      if (keep.contains(g.get())) out.push_back(g.get());
    }
    std::stable_sort(out.begin(), out.end(),
                     [](FuncGraph* a, FuncGraph* b) { return a->depth() < b->depth(); });
    return out;
  }

  // Names unique along each graph's chain of enclosing graphs, so that a free
  // variable's name is unambiguous where it is used; separate top-level graphs
  // keep their own names (the parameters of a gradient graph keep the primal's).
  // Constants are named per graph that lists them.
  const std::string& NameOf(const AnfNode* n, const FuncGraph* in) {
    const FuncGraph* owner = n->is_value() ? in : n->graph();
    auto key = std::make_pair(owner, n);
    auto it = names_.find(key);
    if (it != names_.end()) return it->second;
    std::string base = n->name().empty() ? absl::StrCat(n->is_value() ? "c" : "n", n->id()) : n->name();
    std::string name = base;
    for (int k = 1; Taken(owner, name); ++k) name = absl::StrCat(base, "_", k);
    used_[owner].insert(name);
    return names_[key] = name;
  }

  bool Taken(const FuncGraph* g, const std::string& name) {
    for (const FuncGraph* p = g; p != nullptr; p = p->parent()) {
      auto it = used_.find(p);
      if (it != used_.end() && it->second.contains(name)) return true;
    }
    return false;
  }

  absl::Status SaveGraph(FuncGraph* g, proto::GraphProto* gp) {
    gp->set_name(g->name());
    if (g->parent() != nullptr) gp->set_parent(g->parent()->name());
    for (Parameter* p : g->parameters()) {
      proto::ParameterProto* pp = gp->add_parameters();
      pp->set_name(NameOf(p, g));
      if (p->declared() != nullptr) KGRAD_RETURN_IF_ERROR(TypeToProto(p->declared(), pp->mutable_type()));
    }
    const GraphInfo& info = manager_.Info(g);
    for (AnfNode* fv : info.direct_fvs) {
      if (fv->graph() != nullptr) gp->add_free_variables(NameOf(fv, g));
    }
    absl::flat_hash_set<const AnfNode*> emitted;
    for (CNode* c : info.order) {
      proto::ApplyProto apply;
      for (AnfNode* in : c->inputs()) {
        KGRAD_RETURN_IF_ERROR(EmitConstant(in, g, gp, &emitted));
        apply.add_inputs(Ref(in, g));
      }
      proto::NodeProto* np = gp->add_nodes();
      np->set_name(NameOf(c, g));
      *np->mutable_apply() = std::move(apply);
    }
    if (g->output() == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("graph '", g->name(), "' has no output"));
    }
    KGRAD_RETURN_IF_ERROR(EmitConstant(g->output(), g, gp, &emitted));
    gp->set_output(Ref(g->output(), g));
    if (g->custom_bprop() != nullptr) gp->set_custom_bprop(g->custom_bprop()->name());
    if (g->remat() != RematPolicy::kEverythingSaveable) {
      gp->set_remat(std::string(RematPolicyName(g->remat())));
    }
    return absl::OkStatus();
  }

  std::string Ref(const AnfNode* n, const FuncGraph* g) {
    if (const Parameter* p = n->AsParameter(); p != nullptr && p->is_weight()) return p->name();
    return NameOf(n, g);
  }

  absl::Status EmitConstant(const AnfNode* n, const FuncGraph* g, proto::GraphProto* gp,
                            absl::flat_hash_set<const AnfNode*>* emitted) {
    const ValueNode* v = n->AsValue();
    if (v == nullptr || !emitted->insert(n).second) return absl::OkStatus();
    proto::NodeProto* np = gp->add_nodes();
    np->set_name(NameOf(n, g));
    absl::Status s = ValueToProto(v->value(), np->mutable_constant());
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("graph '", gp->name(), "', constant '", NameOf(n, g),
                                                 "': ", s.message()));
    }
    return absl::OkStatus();
  }

  Module& module_;
  Manager& manager_;
  absl::flat_hash_map<std::pair<const FuncGraph*, const AnfNode*>, std::string> names_;
  absl::flat_hash_map<const FuncGraph*, absl::flat_hash_set<std::string>> used_;
};

}  // namespace

absl::StatusOr<proto::ModelProto> SaveModel(Module& module) {
  Saver saver(module);
  return saver.Save();
}

absl::StatusOr<std::string> ModelToText(Module& module) {
  KGRAD_ASSIGN_OR_RETURN(proto::ModelProto p, SaveModel(module));
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(p, &text)) {
    return absl::InternalError("text-format printing failed");
  }
  return text;
}

absl::Status SaveModelFile(Module& module, const std::string& path) {
  KGRAD_ASSIGN_OR_RETURN(proto::ModelProto p, SaveModel(module));
  std::string bytes;
  if (absl::EndsWith(path, ".pbtxt")) {
    if (!google::protobuf::TextFormat::PrintToString(p, &bytes)) {
      return absl::InternalError("text-format printing failed");
    }
  } else if (!p.SerializeToString(&bytes)) {
    return absl::InternalError("serialisation failed");
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace kgrad
