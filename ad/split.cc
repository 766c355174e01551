#include "ad/split.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ad/typing.h"
#include "core/builder.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

using NodeMap = absl::flat_hash_map<const AnfNode*, AnfNode*>;

// The applications of `order` that read `dout`, directly or through others.
absl::flat_hash_set<const AnfNode*> DependOn(const std::vector<CNode*>& order, const AnfNode* dout) {
  absl::flat_hash_set<const AnfNode*> set = {dout};
  for (const CNode* c : order) {
    for (const AnfNode* in : c->inputs()) {
      if (set.contains(in)) {
        set.insert(c);
        break;
      }
    }
  }
  return set;
}

class Splitter {
 public:
  Splitter(Module& m, FuncGraph* g, std::string name) : m_(m), g_(g), name_(std::move(name)) {}

  // The cut of g: its order, what depends on the sensitivity, the residuals.
  absl::StatusOr<GradientCut> Cut() {
    Manager manager(&m_);
    GradientCut cut;
    cut.whole = g_;
    cut.order = manager.Info(g_).order;
    KGRAD_RETURN_IF_ERROR(CheckFlat(cut.order));
    const CNode* out = g_->output()->AsCNode();
    if (out == nullptr || out->primitive() == nullptr ||
        out->primitive()->id() != PrimId::kMakeTuple || out->num_args() != 2) {
      return absl::InternalError(absl::StrCat("split: graph '", g_->name(),
                                              "' does not return (value, gradients)"));
    }
    dout_ = g_->parameters().back();
    backward_ = DependOn(cut.order, dout_);
    if (backward_.contains(out->arg(0))) {
      return absl::InternalError("split: the value depends on the output sensitivity");
    }
    KGRAD_RETURN_IF_ERROR(FindResiduals(cut.order, out->arg(1)));
    cut.backward = backward_;
    cut.residuals = residuals_;
    cut.value = out->arg(0);
    cut.grads = out->arg(1);
    return cut;
  }

  absl::StatusOr<SplitGradient> Run() {
    KGRAD_ASSIGN_OR_RETURN(GradientCut cut, Cut());
    SplitGradient s;
    KGRAD_ASSIGN_OR_RETURN(s.fwd, BuildForward(cut.value));
    KGRAD_ASSIGN_OR_RETURN(s.bwd, BuildBackward(cut.grads, &s));
    return s;
  }

 private:
  // Every application calls a primitive and no constant is a graph: loops and
  // closures the optimiser could not remove are not split.
  absl::Status CheckFlat(const std::vector<CNode*>& order) const {
    for (const CNode* c : order) {
      bool graph_value = false;
      for (const AnfNode* in : c->inputs()) {
        const ValueNode* v = in->AsValue();
        graph_value = graph_value || (v != nullptr && v->value().is_callable() &&
                                      !v->value().is_primitive());
      }
      if (c->primitive() == nullptr || graph_value) {
        return absl::UnimplementedError(absl::StrCat(
            c->Location(), ": the optimised gradient still calls or passes a graph; --split "
            "cuts flat gradients only (a loop or closure stays)"));
      }
    }
    return absl::OkStatus();
  }

  // The residuals: what the backward applications that the gradients need read
  // from the forward pass (its applications and f's inputs), in order of first
  // read; the gradients themselves where no backward application makes them.
  absl::Status FindResiduals(const std::vector<CNode*>& order, AnfNode* grads) {
    absl::flat_hash_set<const AnfNode*> needed = {grads};
    for (auto it = order.rbegin(); it != order.rend(); ++it) {  // users before inputs
      if (needed.contains(*it) && backward_.contains(*it)) {
        for (AnfNode* in : (*it)->inputs()) needed.insert(in);
      }
    }
    auto add = [&](AnfNode* n) -> absl::Status {
      if (backward_.contains(n) || n->is_value() || (n->is_parameter() && n->AsParameter()->is_weight())) {
        return absl::OkStatus();
      }
      if (!residual_set_.insert(n).second) return absl::OkStatus();
      if (AsTensor(n->abstract()) == nullptr && AsScalar(n->abstract()) == nullptr) {
        return absl::UnimplementedError(absl::StrCat(
            n->Location(), ": the residual is ",
            n->abstract() == nullptr ? std::string("untyped") : n->abstract()->ToString(),
            ", not a tensor or scalar"));
      }
      residuals_.push_back(n);
      return absl::OkStatus();
    };
    for (CNode* c : order) {
      if (!needed.contains(c) || !backward_.contains(c)) continue;
      for (AnfNode* in : c->inputs()) KGRAD_RETURN_IF_ERROR(add(in));
    }
    return add(grads);
  }

  // `root` and the applications it reads, copied into `b` through `map` (f's
  // constants copied, weights shared, mapped nodes kept). Iterative.
  absl::StatusOr<AnfNode*> Copy(GraphBuilder& b, AnfNode* root, NodeMap& map) {
    std::vector<std::pair<AnfNode*, bool>> stack = {{root, false}};
    while (!stack.empty()) {
      auto [n, expanded] = stack.back();
      stack.pop_back();
      if (map.contains(n)) continue;
      if (n->is_value()) {
        map[n] = b.Const(n->AsValue()->value());
        continue;
      }
      if (n->is_parameter()) {
        if (!n->AsParameter()->is_weight()) {
          return absl::InternalError(absl::StrCat("split: input ", n->DebugName(), " not mapped"));
        }
        map[n] = n;
        continue;
      }
      CNode* c = n->AsCNode();
      if (!expanded) {
        stack.push_back({n, true});
        for (AnfNode* in : c->inputs()) {
          if (!map.contains(in)) stack.push_back({in, false});
        }
        continue;
      }
      std::vector<AnfNode*> ins;
      for (AnfNode* in : c->inputs()) ins.push_back(map.at(in));
      CNode* copy = b.Call(ins[0], std::vector<AnfNode*>(ins.begin() + 1, ins.end()));
      copy->set_abstract(c->abstract());
      if (!c->name().empty()) copy->set_name(c->name());
      map[n] = copy;
    }
    KGRAD_RETURN_IF_ERROR(b.status());
    return map.at(root);
  }

  // fwd(x...) = (value, residuals...).
  absl::StatusOr<FuncGraph*> BuildForward(AnfNode* value) {
    GraphBuilder b(&m_, absl::StrCat("fwd_", name_));
    NodeMap map;
    const auto& params = g_->parameters();
    for (size_t i = 0; i + 1 < params.size(); ++i) {
      Parameter* p = b.Param(params[i]->name(), params[i]->declared());
      p->set_abstract(params[i]->abstract());
      map[params[i]] = p;
    }
    std::vector<AnfNode*> outs;
    KGRAD_ASSIGN_OR_RETURN(AnfNode* v, Copy(b, value, map));
    outs.push_back(v);
    for (AnfNode* r : residuals_) {
      KGRAD_ASSIGN_OR_RETURN(AnfNode* rc, Copy(b, r, map));
      outs.push_back(rc);
    }
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* fwd, b.Return(b.Tuple(outs)));
    TypeFromInputs(fwd);
    return fwd;
  }

  // bwd(residuals..., dout) = gradients.
  absl::StatusOr<FuncGraph*> BuildBackward(AnfNode* grads, SplitGradient* s) {
    GraphBuilder b(&m_, absl::StrCat("bwd_", name_));
    NodeMap map;
    absl::flat_hash_map<std::string, int> uses;
    for (AnfNode* r : residuals_) ++uses[r->name()];
    for (size_t i = 0; i < residuals_.size(); ++i) {
      AnfNode* r = residuals_[i];
      const bool unique = !r->name().empty() && uses[r->name()] == 1 && r->name() != "dout";
      std::string name = unique ? r->name() : absl::StrCat("r", i + 1);
      Parameter* p = b.Param(name, r->abstract());
      p->set_abstract(r->abstract());
      map[r] = p;
      s->residuals.push_back(name);
      const int64_t bytes = StaticBytes(r->abstract());
      s->residual_bytes = bytes < 0 || s->residual_bytes < 0 ? -1 : s->residual_bytes + bytes;
    }
    Parameter* dout = b.Param("dout", dout_->declared() != nullptr ? dout_->declared()
                                                                   : dout_->abstract());
    dout->set_abstract(dout_->abstract());
    map[dout_] = dout;
    KGRAD_ASSIGN_OR_RETURN(AnfNode* g, Copy(b, grads, map));
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* bwd, b.Return(g));
    TypeFromInputs(bwd);
    return bwd;
  }

  Module& m_;
  FuncGraph* g_;
  std::string name_;
  Parameter* dout_ = nullptr;
  absl::flat_hash_set<const AnfNode*> backward_;
  absl::flat_hash_set<const AnfNode*> residual_set_;
  std::vector<AnfNode*> residuals_;
};

}  // namespace

int64_t StaticBytes(const AbstractPtr& a) {
  if (const AbstractTensor* t = AsTensor(a); t != nullptr && t->shape_known()) {
    int64_t n = 1;
    for (int64_t d : t->shape()) n *= d;
    return n * static_cast<int64_t>(DTypeSize(t->dtype()));
  }
  if (const AbstractScalar* s = AsScalar(a); s != nullptr) return DTypeSize(s->dtype());
  return -1;
}

namespace {

// The optimised value-and-gradient with the sensitivity as an input.
absl::StatusOr<FuncGraph*> WholeGradient(Module& module, FuncGraph* f,
                                         const ValueAndGradOptions& options) {
  if (f == nullptr) return absl::InvalidArgumentError("no graph to differentiate");
  if (options.has_aux || options.as_operator || options.sens_param) {
    return absl::InvalidArgumentError(
        "split: has_aux, as_operator and sens_param are not split (bwd takes the sensitivity)");
  }
  ValueAndGradOptions o = options;
  o.sens_param = true;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* whole, ValueAndGrad(module, f, o));
  KGRAD_RETURN_IF_ERROR(Optimize(module, whole).status());
  return whole;
}

}  // namespace

absl::StatusOr<GradientCut> CutGradient(Module& module, FuncGraph* f,
                                        const ValueAndGradOptions& options) {
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* whole, WholeGradient(module, f, options));
  return Splitter(module, whole, f->name()).Cut();
}

absl::StatusOr<SplitGradient> SplitGrad(Module& module, FuncGraph* f,
                                        const ValueAndGradOptions& options) {
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* whole, WholeGradient(module, f, options));
  KGRAD_ASSIGN_OR_RETURN(SplitGradient s, Splitter(module, whole, f->name()).Run());
  whole->set_public(false);  // the two halves replace it
  return s;
}

}  // namespace kgrad
