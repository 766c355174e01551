#include "tools/train/artifacts.h"

#include <regex.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/manager.h"
#include "ad/grad_operation.h"
#include "core/infer.h"
#include "core/passes/optimize.h"
#include "core/status_macros.h"
#include "proto/model_io.h"
#include "tools/train/atomic_file.h"

namespace kgrad {
namespace train {
namespace {

struct WeightSplit {
  std::vector<Parameter*> trainable;
  std::vector<Parameter*> frozen;
  std::vector<Parameter*> unused;
};

// The weights the graphs `g` reaches read. Others (an export's BatchNorm running
// statistics in training mode) have no gradient: they are not trained.
absl::flat_hash_set<const Parameter*> WeightsReadBy(Module& m, FuncGraph* g) {
  absl::flat_hash_set<const Parameter*> read;
  for (FuncGraph* f : m.manager().Reachable({g})) {
    if (f->output() != nullptr && f->output()->is_parameter() && f->output()->AsParameter()->is_weight()) {
      read.insert(f->output()->AsParameter());
    }
    for (const auto& n : f->owned_nodes()) {
      if (!n->is_cnode()) continue;
      for (AnfNode* in : n->AsCNode()->inputs()) {
        if (in->is_parameter() && in->AsParameter()->is_weight()) read.insert(in->AsParameter());
      }
    }
  }
  return read;
}

// Weights whose names match `pattern` (POSIX ERE, searched) are frozen.
absl::StatusOr<WeightSplit> SplitWeights(Module& m, const std::string& pattern,
                                         const std::string& source) {
  WeightSplit split;
  const absl::flat_hash_set<const Parameter*> read = WeightsReadBy(m, m.entry());
  regex_t re;
  if (!pattern.empty()) {
    const int rc = regcomp(&re, pattern.c_str(), REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
      char why[256];
      regerror(rc, &re, why, sizeof(why));
      return absl::InvalidArgumentError(absl::StrCat("--freeze '", pattern, "': ", why));
    }
  }
  for (const auto& w : m.weights()) {
    const bool freeze = !pattern.empty() && regexec(&re, w->name().c_str(), 0, nullptr, 0) == 0;
    if (!read.contains(w.get())) {
      split.unused.push_back(w.get());
    } else {
      (freeze ? split.frozen : split.trainable).push_back(w.get());
    }
  }
  if (!pattern.empty()) regfree(&re);
  if (split.trainable.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": no weight left to train (", m.weights().size(), " weights, ",
        split.frozen.size(), " frozen by '", pattern, "', ", split.unused.size(),
        " not read by the model)"));
  }
  for (Parameter* w : split.trainable) {
    const DType d = w->default_value()->dtype();
    if (d != DType::kFloat32 && d != DType::kFloat64) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": weight '", w->name(), "' is ",
                                                     DTypeName(d), "; only float weights train"));
    }
  }
  return split;
}

// What the model's entry graph takes and gives.
struct ModelSignature {
  FuncGraph* graph = nullptr;
  std::vector<AbstractPtr> inputs;
  AbstractPtr loss_input;   // the output the loss reads
  bool tuple_output = false;
  AbstractPtr target;       // nullptr: no target input
  CrossEntropyOptions ce;
};

absl::StatusOr<ModelSignature> Signature(Module& m, LossKind loss, const CrossEntropyOptions& ce,
                                         const std::string& source) {
  ModelSignature s;
  s.ce = ce;
  s.graph = m.entry();
  if (s.graph == nullptr) return absl::InvalidArgumentError(absl::StrCat(source, ": no entry graph"));
  absl::StatusOr<std::vector<AbstractPtr>> args = DeclaredArgs(s.graph);
  if (!args.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the inputs of graph '", s.graph->name(),
                                                   "' must have declared types: ", args.status().message()));
  }
  s.inputs = *args;
  for (const Parameter* p : s.graph->parameters()) {
    if (p->name() == kTargetInput || p->name() == kStepsInput) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": the model has an input named '", p->name(),
                                                     "', a name the training step gives its own input"));
    }
  }
  KGRAD_ASSIGN_OR_RETURN(AbstractPtr out, InferGraph(s.graph));
  s.loss_input = out;
  if (const AbstractTuple* t = AsTuple(out)) {
    if (t->elements().empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": the model has no output"));
    s.tuple_output = true;
    s.loss_input = t->elements()[0];
  }
  KGRAD_ASSIGN_OR_RETURN(s.target, LossTargetType(loss, s.loss_input,
                                                  absl::StrCat("output 0 of graph '", s.graph->name(),
                                                               "' in ", source), ce));
  return s;
}

// The model's inputs and the target as parameters of b's graph.
std::vector<AnfNode*> DataParams(GraphBuilder& b, const ModelSignature& s, AnfNode** target) {
  std::vector<AnfNode*> in;
  for (size_t i = 0; i < s.inputs.size(); ++i) in.push_back(b.Param(s.graph->parameters()[i]->name(), s.inputs[i]));
  *target = s.target ? b.Param(kTargetInput, s.target) : nullptr;
  return in;
}

// (loss, model output) of the inputs and target, in b's graph.
std::pair<AnfNode*, AnfNode*> LossOf(GraphBuilder& b, const ModelSignature& s, LossKind kind,
                                     std::vector<AnfNode*> in, AnfNode* target) {
  AnfNode* y = b.Call(s.graph, std::move(in));
  AnfNode* first = s.tuple_output ? b.GetItem(y, 0) : y;
  return {BuildLoss(b, kind, first, target, *AsTensor(s.loss_input), s.ce), y};
}

absl::StatusOr<FuncGraph*> BuildEvalStep(Module& m, const ModelSignature& s, LossKind kind) {
  GraphBuilder b(&m, kEvalStepGraph);
  AnfNode* target = nullptr;
  std::vector<AnfNode*> in = DataParams(b, s, &target);
  auto [loss, y] = LossOf(b, s, kind, in, target);
  return b.Return(b.Tuple({loss, y}));
}

// The loss as a function of the data (and target), the graph both train steps
// differentiate with respect to the trainable weights.
absl::StatusOr<FuncGraph*> BuildTrainingLoss(Module& m, const ModelSignature& s, LossKind kind) {
  GraphBuilder b(&m, "training_loss");
  AnfNode* target = nullptr;
  std::vector<AnfNode*> in = DataParams(b, s, &target);
  return b.Return(LossOf(b, s, kind, in, target).first);
}

// The weights attribute of value_and_grad naming `ws`; empty when a name holds
// the attribute's separator (then no unexpanded step is written).
std::string WeightsAttribute(const std::vector<Parameter*>& ws) {
  std::string names;
  for (const Parameter* w : ws) {
    if (w->name().find(',') != std::string::npos) return "";
    absl::StrAppend(&names, names.empty() ? "" : ",", w->name());
  }
  return names;
}

// train_step (or, with `unexpanded`, train_step_unexpanded): value_and_grad of
// the training loss, expanded now by the C++ API or left as the operator for a
// data-parallel session to rewrite (ad/data_parallel.h) before expanding it;
// then the optimizer's update. Both have the same parameters and results.
absl::StatusOr<FuncGraph*> BuildTrainStep(Module& m, const ModelSignature& s, const ArtifactOptions& o,
                                          const WeightSplit& split, FuncGraph* loss_fn, bool unexpanded) {
  GraphBuilder b(&m, unexpanded ? kTrainStepUnexpandedGraph : kTrainStepGraph);
  AnfNode* target = nullptr;
  std::vector<AnfNode*> args = DataParams(b, s, &target);
  if (target != nullptr) args.push_back(target);
  AnfNode* steps = b.Param(kStepsInput, MakeAbstractTensor(DType::kInt64, {}));
  std::vector<AnfNode*> weights, grads, state;
  std::vector<DType> dtypes;
  const std::vector<std::string> slots = OptimizerSlots(o.optimizer);
  for (Parameter* w : split.trainable) {
    const Tensor& init = *w->default_value();
    for (const std::string& slot : slots) {
      state.push_back(b.Param(absl::StrCat(w->name(), ".", slot), MakeAbstractTensor(init.dtype(), init.shape())));
    }
    weights.push_back(w);
    dtypes.push_back(init.dtype());
  }
  AnfNode* vg_out = nullptr;
  if (unexpanded) {
    AnfNode* vg = b.Op(PrimId::kValueAndGrad, {b.GraphRef(loss_fn)},
                       {{"wrt", std::vector<int64_t>{}}, {"weights", WeightsAttribute(split.trainable)}});
    vg_out = b.Call(vg, args);
  } else {
    ValueAndGradOptions v;
    v.argnums = {};
    v.weights = split.trainable;
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* vg, ValueAndGrad(m, loss_fn, v));
    vg_out = b.Call(vg, args);
  }
  AnfNode* dws = b.GetItem(vg_out, 1);
  for (size_t i = 0; i < weights.size(); ++i) grads.push_back(b.GetItem(dws, static_cast<int64_t>(i)));
  KGRAD_ASSIGN_OR_RETURN(WeightUpdate u, BuildOptimizerUpdate(b, o.optimizer, steps, weights, grads, state, dtypes));
  AnfNode* next = b.Op(PrimId::kAdd, {steps, b.Const(Value(Tensor::FromScalar<int64_t>(1)))});
  return b.Return(b.Tuple({b.GetItem(vg_out, 0), b.Tuple(u.weights), b.Tuple(u.state), next}));
}

std::vector<std::string> Names(const std::vector<Parameter*>& ws) {
  std::vector<std::string> names;
  for (const Parameter* w : ws) names.push_back(w->name());
  return names;
}

Checkpoint InitialCheckpoint(const Module& m, const WeightSplit& split, const OptimizerOptions& o) {
  Checkpoint c;
  c.optimizer = OptimizerName(o);
  c.trainable = Names(split.trainable);
  for (const auto& w : m.weights()) c.weights.emplace_back(w->name(), *w->default_value());
  for (Parameter* w : split.trainable) {
    const Tensor& init = *w->default_value();
    for (const std::string& slot : OptimizerSlots(o)) {
      c.state.emplace_back(absl::StrCat(w->name(), ".", slot), *Tensor::Zeros(init.dtype(), init.shape()));
    }
  }
  return c;
}

}  // namespace

absl::StatusOr<TrainingArtifacts> MakeTrainingArtifacts(std::unique_ptr<Module> model,
                                                        const ArtifactOptions& options,
                                                        const std::string& source) {
  absl::Status valid = ValidateOptimizerOptions(options.optimizer);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(source, ": ", valid.message()));
  Module& m = *model;
  KGRAD_ASSIGN_OR_RETURN(ModelSignature sig, Signature(m, options.loss, options.cross_entropy, source));
  KGRAD_ASSIGN_OR_RETURN(WeightSplit split, SplitWeights(m, options.freeze, source));
  TrainingArtifacts a;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* loss_fn, BuildTrainingLoss(m, sig, options.loss));
  if (!WeightsAttribute(split.trainable).empty()) {
    KGRAD_ASSIGN_OR_RETURN(a.train_step_unexpanded, BuildTrainStep(m, sig, options, split, loss_fn, true));
  }
  KGRAD_ASSIGN_OR_RETURN(a.train_step, BuildTrainStep(m, sig, options, split, loss_fn, false));
  KGRAD_ASSIGN_OR_RETURN(a.eval_step, BuildEvalStep(m, sig, options.loss));
  KGRAD_RETURN_IF_ERROR(Optimize(m, a.train_step).status());
  KGRAD_RETURN_IF_ERROR(Optimize(m, a.eval_step).status());
  for (const auto& g : m.graphs()) g->set_public(false);
  m.set_entry(a.train_step);
  a.eval_step->set_public(true);
  if (a.train_step_unexpanded != nullptr) a.train_step_unexpanded->set_public(true);
  m.CollectGarbage();
  a.trainable = Names(split.trainable);
  a.frozen = Names(split.frozen);
  a.unused = Names(split.unused);
  a.initial = InitialCheckpoint(m, split, options.optimizer);
  a.module = std::move(model);
  return a;
}

absl::Status WriteTrainingArtifacts(TrainingArtifacts& a, const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create: ", std::strerror(errno)));
  }
  KGRAD_ASSIGN_OR_RETURN(proto::ModelProto p, SaveModel(*a.module));
  std::string bytes;
  if (!p.SerializeToString(&bytes)) return absl::InternalError(absl::StrCat(dir, ": serialisation failed"));
  KGRAD_RETURN_IF_ERROR(WriteFileAtomically(absl::StrCat(dir, "/", kArtifactModelFile), bytes));
  return SaveCheckpoint(a.initial, absl::StrCat(dir, "/", kInitialCheckpointFile));
}

}  // namespace train
}  // namespace kgrad
