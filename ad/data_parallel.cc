#include "ad/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/builder.h"
#include "core/infer.h"
#include "core/manager.h"
#include "core/status_macros.h"
#include "ops/differentiation.h"

namespace kgrad {
namespace {

std::string ParamWhere(const FuncGraph* g, const Parameter* p) {
  return absl::StrCat("graph '", g->name(), "', parameter '", p->name(), "'");
}

// Declares `p` with `rows` rows (its leading dim).
void SetRows(Parameter* p, const AbstractTensor& t, int64_t rows) {
  Shape s = t.shape();
  s[0] = rows;
  p->set_declared(MakeAbstractTensor(t.dtype(), std::move(s)));
}

// Splits the entry's batch inputs among the ranks; returns the batch (rows of
// the full batch; -1 when no batch input has a known leading dim) and fills
// `batches` with the batch parameters.
absl::StatusOr<int64_t> ShardEntry(FuncGraph* step, const DataParallelOptions& o,
                                   absl::flat_hash_set<const AnfNode*>* batches) {
  int64_t batch = -1;
  const Parameter* first = nullptr;
  for (Parameter* p : step->parameters()) {
    if (std::find(o.replicated.begin(), o.replicated.end(), p->name()) != o.replicated.end()) continue;
    const AbstractTensor* t = AsTensor(p->declared());
    if (t == nullptr || t->shape().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          ParamWhere(step, p), ": a batch input must be declared as a tensor with a leading batch "
          "dim, it is ", p->declared() == nullptr ? "undeclared" : p->declared()->ToString(),
          " (name it as replicated if every rank should receive it whole)"));
    }
    batches->insert(p);
    const int64_t rows = t->shape()[0];
    if (rows < 0) continue;  // unknown or symbolic: each rank's own rows
    if (rows % o.ranks != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          ParamWhere(step, p), ": its batch of ", rows, " rows does not divide among ", o.ranks,
          " ranks"));
    }
    if (batch >= 0 && rows != batch) {
      return absl::InvalidArgumentError(absl::StrCat(
          ParamWhere(step, p), " has ", rows, " rows but parameter '", first->name(), "' has ",
          batch, ": the batch inputs must agree"));
    }
    batch = rows;
    first = p;
    SetRows(p, *t, rows / o.ranks);
  }
  return batch;
}

// The graph a call's arguments go to, positionally: a graph constant called
// directly, or the operand of grad / value_and_grad (which call it with the
// same arguments); nullptr otherwise.
FuncGraph* ArgumentsGoTo(const CNode* c) {
  const AnfNode* callee = c->input(0);
  if (FuncGraph* g = GraphOf(callee); g != nullptr) return g;
  const CNode* op = callee->is_cnode() ? callee->AsCNode() : nullptr;
  if (op == nullptr || op->primitive() == nullptr || op->size() < 2) return nullptr;
  const PrimId id = op->primitive()->id();
  if (id != PrimId::kGrad && id != PrimId::kValueAndGrad) return nullptr;
  return GraphOf(op->input(1));
}

// Parameters of other reachable graphs that receive a batch (followed through
// calls until nothing changes) and are declared with the full batch: 1/N of it.
void ShardInner(Module& m, const std::vector<FuncGraph*>& graphs, int64_t batch, int ranks,
                absl::flat_hash_set<const AnfNode*>* batches) {
  for (bool changed = true; changed;) {
    changed = false;
    for (FuncGraph* g : graphs) {
      for (CNode* c : m.manager().Info(g).order) {
        FuncGraph* callee = ArgumentsGoTo(c);
        if (callee == nullptr) continue;
        const auto& params = callee->parameters();
        for (size_t i = 0; i < c->num_args() && i < params.size(); ++i) {
          if (!batches->contains(c->arg(i)) || batches->contains(params[i])) continue;
          batches->insert(params[i]);
          changed = true;
          const AbstractTensor* t = AsTensor(params[i]->declared());
          if (batch >= 0 && t != nullptr && !t->shape().empty() && t->shape()[0] == batch) {
            SetRows(params[i], *t, batch / ranks);
          }
        }
      }
    }
  }
}

struct Call {
  CNode* call;      // op(f)(args...)
  CNode* op;        // grad / value_and_grad applied to f
};

absl::StatusOr<std::vector<Call>> FindDifferentiations(Module& m, const std::vector<FuncGraph*>& graphs) {
  std::vector<Call> out;
  for (FuncGraph* g : graphs) {
    for (CNode* c : m.manager().Info(g).order) {
      const Primitive* p = c->primitive();
      if (p == nullptr || p->def().derived_args == nullptr) continue;
      if (p->id() != PrimId::kGrad && p->id() != PrimId::kValueAndGrad) {
        return absl::UnimplementedError(absl::StrCat(
            c->Location(), ": data-parallel training combines the results of grad and "
            "value_and_grad across ranks; '", p->name(), "' is not supported"));
      }
      for (const Use& u : c->uses()) {
        if (u.user == nullptr || u.index != 0) {
          return absl::UnimplementedError(absl::StrCat(
              c->Location(), ": the derivative is passed on as a value; data-parallel training "
              "needs it called where it is made"));
        }
        out.push_back(Call{u.user, c});
      }
    }
  }
  return out;
}

// One value to combine across ranks: where it is and what it is.
struct Leaf {
  AnfNode* node;
  const AbstractTensor* type;
  std::string what;
};

class Rewriter {
 public:
  Rewriter(Module& m, const DataParallelOptions& o, const absl::flat_hash_set<const AnfNode*>& batches,
           DataParallelReport* report)
      : m_(m), o_(o), batches_(batches), report_(report) {}

  absl::Status Rewrite(const Call& d) {
    GraphBuilder b(d.call->graph());
    std::vector<AnfNode*> args(d.call->inputs().begin() + 1, d.call->inputs().end());
    CNode* fresh = b.Call(d.op, args);  // the call the new result reads
    const Primitive& p = *d.op->primitive();
    const bool aux = p.GetBool("has_aux");
    const bool with_value = p.id() == PrimId::kValueAndGrad;
    AnfNode* grads = with_value ? b.GetItem(fresh, 1) : aux ? b.GetItem(fresh, 0) : fresh;
    KGRAD_ASSIGN_OR_RETURN(AnfNode* new_grads, Gradients(b, d, grads, args));
    AnfNode* result = new_grads;
    if (with_value) {
      AnfNode* value = b.GetItem(fresh, 0);
      AnfNode* loss = aux ? b.GetItem(value, 0) : value;
      KGRAD_ASSIGN_OR_RETURN(AnfNode* reduced, Combine(b, {Leaf{loss, ValueType(d), "the value"}}, d));
      if (aux) reduced = b.Tuple({reduced, b.GetItem(value, 1)});
      result = b.Tuple({reduced, new_grads});
    } else if (aux) {
      result = b.Tuple({new_grads, b.GetItem(fresh, 1)});
    }
    KGRAD_RETURN_IF_ERROR(b.status());
    Transaction tx(&m_);
    tx.Replace(d.call, result);
    tx.Commit();
    ++report_->differentiations;
    return absl::OkStatus();
  }

 private:
  const AbstractTensor* ValueType(const Call& d) {
    const AbstractTuple* r = AsTuple(d.call->abstract());
    if (r == nullptr || r->size() != 2) return nullptr;
    AbstractPtr v = r->elements()[0];
    if (d.op->primitive()->GetBool("has_aux")) {
      const AbstractTuple* pair = AsTuple(v);
      if (pair == nullptr || pair->size() != 2) return nullptr;
      v = pair->elements()[0];
    }
    return AsTensor(v);
  }

  // The gradient part, rebuilt with the ranks' combined gradients.
  absl::StatusOr<AnfNode*> Gradients(GraphBuilder& b, const Call& d, AnfNode* grads,
                                     const std::vector<AnfNode*>& args) {
    const Primitive& p = *d.op->primitive();
    KGRAD_ASSIGN_OR_RETURN(std::vector<int> wrt, ops::DifferentiatedInputs(p, static_cast<int>(args.size())));
    KGRAD_ASSIGN_OR_RETURN(std::vector<Parameter*> ws, ops::DifferentiatedWeights(p, m_));
    AnfNode* input_part = ws.empty() ? grads : wrt.empty() ? nullptr : b.GetItem(grads, 0);
    AnfNode* weight_part = ws.empty() ? nullptr : wrt.empty() ? grads : b.GetItem(grads, 1);
    std::vector<AnfNode*> inputs, weights;
    for (size_t k = 0; k < wrt.size(); ++k) {
      inputs.push_back(wrt.size() == 1 ? input_part : b.GetItem(input_part, static_cast<int64_t>(k)));
    }
    for (size_t k = 0; k < ws.size(); ++k) weights.push_back(b.GetItem(weight_part, static_cast<int64_t>(k)));
    std::vector<AbstractPtr> in_types, w_types;
    GradTypes(d, wrt.size(), ws.size(), &in_types, &w_types);
    // Latest first: a backward pass yields the last layer's gradients first.
    std::vector<std::pair<AnfNode**, Leaf>> todo;
    for (size_t k = ws.size(); k-- > 0;) {
      todo.push_back({&weights[k], Leaf{weights[k], AsTensor(w_types[k]),
                                        absl::StrCat("the gradient of weight '", ws[k]->name(), "'")}});
    }
    for (size_t k = wrt.size(); k-- > 0;) {
      if (batches_.contains(args[wrt[k]])) continue;  // per example: stays on its rank
      todo.push_back({&inputs[k], Leaf{inputs[k], AsTensor(in_types[k]),
                                       absl::StrCat("the gradient of input ", wrt[k])}});
    }
    for (const auto& [slot, leaf] : todo) {
      if (leaf.type == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            d.call->Location(), ": ", leaf.what, " is not a tensor of known type; data-parallel "
            "training all-reduces tensors"));
      }
    }
    KGRAD_RETURN_IF_ERROR(Buckets(b, d, &todo));
    AnfNode* new_inputs = wrt.empty() ? nullptr : wrt.size() == 1 ? inputs[0] : b.Tuple(inputs);
    AnfNode* new_weights = ws.empty() ? nullptr : b.Tuple(weights);
    if (ws.empty()) return new_inputs;
    if (wrt.empty()) return new_weights;
    return b.Tuple({new_inputs, new_weights});
  }

  // The inferred types of the gradients with respect to the inputs and the
  // weights, from the call's result type (null entries where unknown).
  static void GradTypes(const Call& d, size_t num_inputs, size_t num_weights,
                        std::vector<AbstractPtr>* in, std::vector<AbstractPtr>* w) {
    in->assign(num_inputs, nullptr);
    w->assign(num_weights, nullptr);
    AbstractPtr r = d.call->abstract();
    const Primitive& p = *d.op->primitive();
    if (p.id() == PrimId::kValueAndGrad || p.GetBool("has_aux")) {
      const AbstractTuple* t = AsTuple(r);
      r = t != nullptr && t->size() == 2 ? t->elements()[p.id() == PrimId::kValueAndGrad ? 1 : 0]
                                         : nullptr;
    }
    AbstractPtr in_part = r, w_part = r;
    if (num_inputs > 0 && num_weights > 0) {
      const AbstractTuple* both = AsTuple(r);
      in_part = both != nullptr && both->size() == 2 ? both->elements()[0] : nullptr;
      w_part = both != nullptr && both->size() == 2 ? both->elements()[1] : nullptr;
    }
    auto element = [](const AbstractPtr& t, size_t k) -> AbstractPtr {
      const AbstractTuple* tuple = AsTuple(t);
      return tuple != nullptr && k < tuple->size() ? tuple->elements()[k] : nullptr;
    };
    for (size_t k = 0; k < num_inputs; ++k) (*in)[k] = num_inputs == 1 ? in_part : element(in_part, k);
    for (size_t k = 0; k < num_weights; ++k) (*w)[k] = element(w_part, k);
  }

  // all_reduce over the buckets; each leaf's slot gets its combined value.
  absl::Status Buckets(GraphBuilder& b, const Call& d, std::vector<std::pair<AnfNode**, Leaf>>* todo) {
    size_t i = 0;
    while (i < todo->size()) {
      const DType dtype = (*todo)[i].second.type->dtype();
      int64_t bytes = 0;
      size_t j = i;
      while (j < todo->size() && (*todo)[j].second.type->dtype() == dtype &&
             IsStatic((*todo)[j].second.type) && (j == i || bytes + Bytes((*todo)[j].second.type) <= o_.bucket_bytes)) {
        bytes += Bytes((*todo)[j].second.type);
        ++j;
      }
      if (j == i) ++j;  // a gradient of unknown shape: its own all_reduce
      std::vector<Leaf> leaves;
      for (size_t k = i; k < j; ++k) leaves.push_back((*todo)[k].second);
      KGRAD_ASSIGN_OR_RETURN(std::vector<AnfNode*> combined, CombineMany(b, leaves, d));
      for (size_t k = i; k < j; ++k) *(*todo)[k].first = combined[k - i];
      report_->gradients += static_cast<int>(j - i);
      i = j;
    }
    return absl::OkStatus();
  }

  static bool IsStatic(const AbstractTensor* t) {
    return std::all_of(t->shape().begin(), t->shape().end(), [](int64_t d) { return d >= 0; });
  }
  static int64_t Elements(const AbstractTensor* t) {
    int64_t n = 1;
    for (int64_t d : t->shape()) n *= d;
    return n;
  }
  static int64_t Bytes(const AbstractTensor* t) {
    return Elements(t) * static_cast<int64_t>(DTypeSize(t->dtype()));
  }

  AttrMap ReduceAttrs() const {
    return {{"op", std::string(o_.reduction == GradientReduction::kMean ? "mean" : "sum")},
            {"ranks", static_cast<int64_t>(o_.ranks)}};
  }

  absl::StatusOr<AnfNode*> Combine(GraphBuilder& b, const std::vector<Leaf>& one, const Call& d) {
    KGRAD_ASSIGN_OR_RETURN(std::vector<AnfNode*> r, CombineMany(b, one, d));
    return r[0];
  }

  // One all_reduce for `leaves` (flattened and concatenated when several).
  absl::StatusOr<std::vector<AnfNode*>> CombineMany(GraphBuilder& b, const std::vector<Leaf>& leaves,
                                                    const Call& d) {
    for (const Leaf& l : leaves) {
      if (l.type == nullptr || !IsFloating(l.type->dtype())) {
        return absl::InvalidArgumentError(absl::StrCat(
            d.call->Location(), ": ", l.what, " must be a f32 or f64 tensor to be averaged across ranks, it is ",
            l.type == nullptr ? "not a tensor" : l.type->ToString()));
      }
      if (IsStatic(l.type)) report_->bytes += Bytes(l.type);
    }
    ++report_->buckets;
    if (leaves.size() == 1) return std::vector<AnfNode*>{b.Op(PrimId::kAllReduce, {leaves[0].node}, ReduceAttrs())};
    std::vector<AnfNode*> flat;
    std::vector<int64_t> sizes;
    for (const Leaf& l : leaves) {
      sizes.push_back(Elements(l.type));
      flat.push_back(b.Op(PrimId::kReshape, {l.node}, {{"shape", std::vector<int64_t>{sizes.back()}}}));
    }
    AnfNode* reduced = b.Op(PrimId::kAllReduce, {b.Op(PrimId::kConcat, flat, {{"axis", int64_t{0}}})},
                            ReduceAttrs());
    AnfNode* parts = b.Op(PrimId::kSplit, {reduced}, {{"axis", int64_t{0}}, {"sizes", sizes}});
    std::vector<AnfNode*> out;
    for (size_t k = 0; k < leaves.size(); ++k) {
      const Shape& s = leaves[k].type->shape();
      out.push_back(b.Op(PrimId::kReshape, {b.GetItem(parts, static_cast<int64_t>(k))},
                         {{"shape", std::vector<int64_t>(s.begin(), s.end())}}));
    }
    return out;
  }

  Module& m_;
  const DataParallelOptions& o_;
  const absl::flat_hash_set<const AnfNode*>& batches_;
  DataParallelReport* report_;
};

}  // namespace

absl::StatusOr<DataParallelReport> MakeDataParallel(Module& module, FuncGraph* step,
                                                    const DataParallelOptions& options) {
  if (options.ranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("data parallelism over ", options.ranks, " ranks"));
  }
  if (options.bucket_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("bucket_bytes must be > 0, got ", options.bucket_bytes));
  }
  absl::flat_hash_set<const AnfNode*> batches;
  KGRAD_ASSIGN_OR_RETURN(int64_t batch, ShardEntry(step, options, &batches));
  std::vector<FuncGraph*> graphs = module.manager().Reachable({step});
  ShardInner(module, graphs, batch, options.ranks, &batches);
  KGRAD_ASSIGN_OR_RETURN(std::vector<Call> calls, FindDifferentiations(module, graphs));
  if (calls.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph '", step->name(), "' applies no grad or value_and_grad: there is no gradient to "
        "combine across ranks"));
  }
  // The types of the results (for the gradients' shapes) on one rank's shard.
  if (absl::Status s = InferGraph(step).status(); !s.ok()) {
    if (batch < 0) return s;
    return absl::Status(s.code(), absl::StrCat(
        "with the batch of ", batch, " rows split among ", options.ranks, " ranks (", batch / options.ranks,
        " each), ", s.message(), " (a model exported for a fixed batch size keeps that size in its "
        "shapes; export it with a dynamic batch axis, e.g. torch.onnx.export(..., dynamic_axes="
        "{'input': {0: 'batch'}}))"));
  }
  DataParallelReport report;
  Rewriter rw(module, options, batches, &report);
  for (const Call& c : calls) KGRAD_RETURN_IF_ERROR(rw.Rewrite(c));
  return report;
}

absl::StatusOr<Tensor> BatchRows(const Tensor& batch, int64_t begin, int64_t end) {
  if (batch.rank() == 0 || begin < 0 || end < begin || end > batch.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", begin, ", ", end, ") of ",
                                                   batch.TypeString(), " are not rows of it"));
  }
  Shape s = batch.shape();
  s[0] = end - begin;
  KGRAD_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(batch.dtype(), s));
  const size_t row = batch.dim(0) == 0 ? 0 : batch.nbytes() / static_cast<size_t>(batch.dim(0));
  if (out.nbytes() > 0) {
    std::memcpy(out.raw_data(), static_cast<const char*>(batch.raw_data()) + begin * row, out.nbytes());
  }
  return out;
}

}  // namespace kgrad
