#include "tools/precision_report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "ad/grad_operation.h"
#include "backends/cpu/constant_evaluator.h"
#include "backends/executor.h"
#include "core/manager.h"
#include "core/passes/optimize.h"
#include "core/printer.h"
#include "core/status_macros.h"
#include "core/value_walk.h"
#include "proto/model_io.h"
#include "tools/float64.h"
#include "tools/grad_check.h"

namespace kgrad {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// An input whose error grows by more than this across an operation is tested
// for a crossed kink (see Attribute).
constexpr double kSuspectGrowth = 100;

bool IsFloatTensor(const Value& v) { return v.is_tensor() && IsFloating(v.tensor().dtype()); }

bool IsFloatValue(const Value& v) {
  return IsFloatTensor(v) || (v.is_scalar() && v.scalar().is_float());
}

std::vector<Value> Leaves(const Value& v) {
  std::vector<Value> out;
  (void)ForEachLeaf(v, [&](const Value& leaf, absl::Span<const size_t>) {
    out.push_back(leaf);
    return absl::OkStatus();
  });
  return out;
}

// A value the report compares: tensors, and tuples and lists of them.
bool HasTensors(const Value& v) {
  std::vector<Value> leaves = Leaves(v);
  return !leaves.empty() && std::all_of(leaves.begin(), leaves.end(),
                                        [](const Value& l) { return l.is_tensor(); });
}

// max|a - b|, max|b| and whether only one side is NaN somewhere.
struct Difference {
  double max_diff = 0, max_ref = 0;
  bool nan_mismatch = false;
};

template <typename A, typename B>
Difference Compare(const A* a, const B* b, int64_t n) {
  Difference d;
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::isnan(x) || std::isnan(y)) {
      d.nan_mismatch |= std::isnan(x) != std::isnan(y);
      continue;
    }
    d.max_diff = std::max(d.max_diff, std::abs(x - y));
    d.max_ref = std::max(d.max_ref, std::abs(y));
  }
  return d;
}

Difference Compare(const Tensor& a, const Tensor& b) {
  const int64_t n = std::min(a.NumElements(), b.NumElements());
  const bool a32 = a.dtype() == DType::kFloat32, b32 = b.dtype() == DType::kFloat32;
  const bool a64 = a.dtype() == DType::kFloat64, b64 = b.dtype() == DType::kFloat64;
  if (a32 && b64) return Compare(a.data<float>(), b.data<double>(), n);
  if (a64 && b64) return Compare(a.data<double>(), b.data<double>(), n);
  if (a32 && b32) return Compare(a.data<float>(), b.data<float>(), n);
  Difference d;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a.ElementAsDouble(i), y = b.ElementAsDouble(i);
    d.max_diff = std::max(d.max_diff, std::abs(x - y));
    d.max_ref = std::max(d.max_ref, std::abs(y));
  }
  return d;
}

int64_t CountDifferent(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < std::min(a.NumElements(), b.NumElements()); ++i) {
    n += a.ElementAsDouble(i) != b.ElementAsDouble(i);
  }
  return n;
}

// Two values of one structure, leaf by leaf: the largest NormwiseError of the
// floating leaves, and the elements that differ among the others (infinite
// error when any does).
struct Comparison {
  double error = 0;
  int64_t flipped = -1;  // -1: every leaf is floating
  int64_t elements = 0;
};

Comparison CompareValues(const Value& a, const Value& b) {
  Comparison c;
  std::vector<Value> x = Leaves(a), y = Leaves(b);
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!x[i].is_tensor() || !y[i].is_tensor()) continue;
    c.elements += x[i].tensor().NumElements();
    if (IsFloatTensor(x[i])) {
      c.error = std::max(c.error, NormwiseError(x[i].tensor(), y[i].tensor()));
    } else {
      c.flipped = std::max<int64_t>(c.flipped, 0) + CountDifferent(x[i].tensor(), y[i].tensor());
    }
  }
  if (x.size() != y.size() || c.flipped > 0) c.error = kInf;
  return c;
}

Value Widen(const Value& v) {
  return MapLeaves(v, [](const Value& leaf) -> absl::StatusOr<Value> { return WidenToFloat64(leaf); })
      .value();
}

// x64 + t (x32 - x64), for a float32 tensor and its float64 twin.
Value Between(const Tensor& x32, const Tensor& x64, double t) {
  Tensor out = x64.Clone();
  double* o = out.mutable_data<double>();
  const float* a = x32.data<float>();
  for (int64_t i = 0; i < out.NumElements(); ++i) o[i] += t * (static_cast<double>(a[i]) - o[i]);
  return Value(std::move(out));
}

absl::StatusOr<Value> Evaluate64(const CNode& at, const Primitive& prim, std::vector<Value> inputs) {
  absl::StatusOr<Value> y = CpuConstantEvaluator::Get().Evaluate(prim, std::move(inputs));
  if (!y.ok()) {
    return absl::InternalError(absl::StrCat("precision report: ", at.Location(),
                                            ": the float64 kernel failed on float32 inputs: ",
                                            y.status().message()));
  }
  return y;
}

// The applications of `entry` that the program's value depends on (the forward
// part); the others compute sensitivities.
absl::flat_hash_set<const CNode*> ForwardPart(FuncGraph* entry) {
  absl::flat_hash_set<const CNode*> forward;
  const CNode* out = entry->output() != nullptr ? entry->output()->AsCNode() : nullptr;
  if (out == nullptr || !out->IsPrim(PrimId::kMakeTuple) || out->num_args() < 1) return forward;
  std::vector<const AnfNode*> stack = {out->arg(0)};
  while (!stack.empty()) {
    const CNode* c = stack.back()->AsCNode();
    stack.pop_back();
    if (c == nullptr || c->graph() != entry || !forward.insert(c).second) continue;
    for (const AnfNode* in : c->inputs()) stack.push_back(in);
  }
  return forward;
}

// Node for node, the applications of two modules loaded from one saved copy.
absl::StatusOr<absl::flat_hash_map<const CNode*, const CNode*>> Twins(Module& from, Module& to) {
  absl::flat_hash_map<std::string, const CNode*> by_name;
  for (const auto& g : to.graphs()) {
    for (CNode* c : to.manager().Info(g.get()).order) {
      by_name[absl::StrCat(g->name(), "\n", c->name())] = c;
    }
  }
  absl::flat_hash_map<const CNode*, const CNode*> twins;
  for (const auto& g : from.graphs()) {
    for (CNode* c : from.manager().Info(g.get()).order) {
      auto it = by_name.find(absl::StrCat(g->name(), "\n", c->name()));
      if (c->name().empty() || it == by_name.end()) {
        return absl::InternalError(absl::StrCat("precision report: ", c->Location(),
                                                " has no float64 twin"));
      }
      twins[c] = it->second;
    }
  }
  return twins;
}

// One kernel application of the float32 run and what the float64 run found.
struct Record {
  const CNode* node;
  ApplicationError row;
  Value out32;
};

// Records the float32 run: each application's value, and its local error (the
// float64 twin's primitive applied to the widened float32 inputs).
class Float32Recorder final : public KernelObserver {
 public:
  explicit Float32Recorder(const absl::flat_hash_map<const CNode*, const CNode*>& twins)
      : twins_(twins) {}

  absl::Status OnKernel(const CNode& node, const Primitive& prim, absl::Span<const Value> inputs,
                        const Value& output) override {
    (void)prim;
    if (!HasTensors(output)) return absl::OkStatus();
    Record r{&node, {}, output};
    r.row.graph = node.graph()->name();
    r.row.occurrence = seen_[&node]++;
    r.row.step = static_cast<int64_t>(records_.size());
    KGRAD_ASSIGN_OR_RETURN(r.row.local_error, LocalError(node, inputs, output));
    occurrences_[&node].push_back(records_.size());
    records_.push_back(std::move(r));
    return absl::OkStatus();
  }

  std::vector<Record>& records() { return records_; }
  const std::vector<size_t>* Occurrences(const CNode* node) const {
    auto it = occurrences_.find(node);
    return it == occurrences_.end() ? nullptr : &it->second;
  }

 private:
  // -1 unless the output has floating leaves and every input is a tensor, a
  // scalar, or a tuple of them.
  absl::StatusOr<double> LocalError(const CNode& node, absl::Span<const Value> inputs,
                                    const Value& output) {
    const std::vector<Value> leaves = Leaves(output);
    if (std::none_of(leaves.begin(), leaves.end(), IsFloatTensor)) return -1.0;
    std::vector<Value> wide;
    for (const Value& v : inputs) {
      if (!HasTensors(v) && !v.is_scalar()) return -1.0;
      wide.push_back(Widen(v));
    }
    const Primitive* twin = twins_.at(&node)->primitive();
    if (twin == nullptr) return -1.0;
    KGRAD_ASSIGN_OR_RETURN(Value ref, Evaluate64(node, *twin, std::move(wide)));
    Comparison c = CompareValues(output, ref);
    return c.flipped > 0 ? kInf : c.error;
  }

  const absl::flat_hash_map<const CNode*, const CNode*>& twins_;
  absl::flat_hash_map<const CNode*, int64_t> seen_;
  absl::flat_hash_map<const CNode*, std::vector<size_t>> occurrences_;
  std::vector<Record> records_;
};

// Compares the float64 run with the recorded float32 one, application by
// application, in run order. An input's float32 value is the last one its
// application gave before this one (both runs go in the same order); inputs
// that are not applications (parameters, weights, constants) hold the same
// values in both runs.
class Float64Comparer final : public KernelObserver {
 public:
  Float64Comparer(const absl::flat_hash_map<const CNode*, const CNode*>& twins_64_to_32,
                  Float32Recorder& recorded)
      : twins_(twins_64_to_32), recorded_(recorded) {}

  absl::Status OnKernel(const CNode& node, const Primitive& prim, absl::Span<const Value> inputs,
                        const Value& output) override {
    if (!HasTensors(output) || !diverged_.empty()) return absl::OkStatus();
    const CNode* twin = twins_.at(&node);
    const std::vector<size_t>* occ = recorded_.Occurrences(twin);
    const int64_t k = seen_[twin]++;
    if (occ == nullptr || k >= static_cast<int64_t>(occ->size())) {
      diverged_ = absl::StrCat(node.Location(), " ran more often in float64 than in float32");
      return absl::OkStatus();
    }
    const size_t index = (*occ)[k];
    Record& r = recorded_.records()[index];
    Comparison c = CompareValues(r.out32, output);
    r.row.value_error = c.error;
    r.row.flipped = c.flipped;
    r.row.elements = c.elements;
    if (c.error > 0) KGRAD_RETURN_IF_ERROR(Attribute(node, prim, inputs, output, &r.row));
    latest_[twin] = index;
    ++compared_;
    return absl::OkStatus();
  }

  const std::string& diverged() const { return diverged_; }
  int64_t compared() const { return compared_; }

 private:
  // The inherited error of each input that differs between the runs: the
  // float64 kernel on the float64 inputs with that one from the float32 run.
  // Where an input's error grows by more than kSuspectGrowth, the kernel is
  // also run halfway between the two inputs: a smooth operation gives about
  // half the error there, one whose output jumps or whose derivative does
  // (a relu's mask, a max-pool's argmax) gives about none or all of it.
  absl::Status Attribute(const CNode& node, const Primitive& prim, absl::Span<const Value> inputs,
                         const Value& output, ApplicationError* row) {
    const CNode* twin = twins_.at(&node);
    for (size_t j = 0; j < inputs.size() && j + 1 < twin->size(); ++j) {
      auto it = latest_.find(twin->input(j + 1));
      if (it == latest_.end()) continue;
      const Record& in = recorded_.records()[it->second];
      if (in.row.value_error == 0) continue;
      std::vector<Value> mixed(inputs.begin(), inputs.end());
      mixed[j] = Widen(in.out32);
      KGRAD_ASSIGN_OR_RETURN(Value y, Evaluate64(node, prim, mixed));
      const double inherited = CompareValues(y, output).error;
      if (inherited <= row->inherited) continue;
      row->inherited = inherited;
      row->blamed = in.row.step;
      row->kink = false;
      if (inherited > kSuspectGrowth * std::max(in.row.value_error, 0x1p-24) &&
          in.out32.is_tensor() && in.out32.tensor().dtype() == DType::kFloat32 &&
          inputs[j].is_tensor() && inputs[j].tensor().dtype() == DType::kFloat64) {
        mixed[j] = Between(in.out32.tensor(), inputs[j].tensor(), 0.5);
        KGRAD_ASSIGN_OR_RETURN(Value half, Evaluate64(node, prim, std::move(mixed)));
        const double ratio = CompareValues(half, output).error / inherited;
        row->kink = ratio < 0.25 || ratio > 0.75;
      }
    }
    return absl::OkStatus();
  }

  const absl::flat_hash_map<const CNode*, const CNode*>& twins_;
  Float32Recorder& recorded_;
  absl::flat_hash_map<const CNode*, int64_t> seen_;
  absl::flat_hash_map<const AnfNode*, size_t> latest_;  // float32 node -> its last record
  std::string diverged_;
  int64_t compared_ = 0;
};

// Step 1: value_and_grad of fg's scalar output (or of <u, output>), optimised.
absl::StatusOr<FuncGraph*> Program(Module& m, FuncGraph* fg, const std::vector<Value>& args,
                                   const PrecisionOptions& o, std::vector<std::string>* names) {
  ValueAndGradOptions v;
  v.argnums.clear();
  for (size_t i = 0; i < args.size(); ++i) {
    if (!IsFloatValue(args[i])) continue;
    v.argnums.push_back(static_cast<int>(i));
    names->push_back(fg->parameters()[i]->name());
  }
  if (o.weights) {
    for (const auto& w : m.weights()) {
      if (!w->default_value().has_value() || !IsFloating(w->default_value()->dtype())) continue;
      v.weights.push_back(w.get());
      names->push_back(w->name());
    }
  }
  if (names->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("precision report: graph '", fg->name(),
                                                   "' has no floating input or weight"));
  }
  KGRAD_ASSIGN_OR_RETURN(Value sample, RunGraph(fg, args));
  FuncGraph* loss = fg;
  const bool scalar = (IsFloatTensor(sample) && sample.tensor().shape().empty()) ||
                      (sample.is_scalar() && sample.scalar().is_float());
  if (!scalar) {
    std::mt19937_64 rng(o.seed);
    KGRAD_ASSIGN_OR_RETURN(loss, ScalarProjection(m, fg, sample, rng, "precision_loss",
                                                  /*float64_only=*/false));
  }
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* program, ValueAndGrad(m, loss, v));
  KGRAD_RETURN_IF_ERROR(Optimize(m, program).status());
  return program;
}

absl::StatusOr<Value> RunObserved(FuncGraph* g, std::vector<Value> args, KernelObserver* observer) {
  ExecutorOptions options;
  options.fuse_elementwise = false;  // every application is a kernel of its own
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(g, options));
  return e->Run(std::move(args), {}, nullptr, observer);
}

Tensor AsTensor(const Value& v) {
  if (v.is_tensor()) return v.tensor();
  Tensor t = Tensor::Create(DType::kFloat64, {}).value();
  t.mutable_data<double>()[0] = v.scalar().AsDouble();
  return t;
}

std::vector<std::pair<std::string, double>> OutputErrors(const Value& out32, const Value& out64,
                                                         const std::vector<std::string>& names) {
  std::vector<Value> a = Leaves(out32), b = Leaves(out64);
  std::vector<std::pair<std::string, double>> rows;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    std::string name = i == 0 ? "value" : i - 1 < names.size() ? names[i - 1] : absl::StrCat("out", i);
    rows.push_back({name, ErrorAgainstOne(AsTensor(a[i]), AsTensor(b[i]))});
  }
  return rows;
}

// The applications that compute the leaves of the program's result, in order
// (null where a leaf is not an application's value).
std::vector<const CNode*> LeafProducers(FuncGraph* program, const Value& result) {
  std::vector<const CNode*> producers;
  (void)ForEachLeaf(result, [&](const Value&, absl::Span<const size_t> path) {
    const AnfNode* n = program->output();
    for (size_t i : path) {
      const CNode* c = n != nullptr ? n->AsCNode() : nullptr;
      n = c != nullptr && c->IsPrim(PrimId::kMakeTuple) && i < c->num_args() ? c->arg(i) : nullptr;
    }
    producers.push_back(n != nullptr ? n->AsCNode() : nullptr);
    return absl::OkStatus();
  });
  return producers;
}

// From the application that computes the worst gradient, the inputs that
// brought most of each error, back to where it began.
std::vector<int64_t> Trail(const PrecisionReport& r, const std::vector<int64_t>& leaf_steps) {
  size_t worst = 0;
  for (size_t i = 1; i < r.outputs.size() && i < leaf_steps.size(); ++i) {
    if (leaf_steps[i] >= 0 && (worst == 0 || r.outputs[i].second > r.outputs[worst].second)) worst = i;
  }
  std::vector<int64_t> trail;
  int64_t step = worst > 0 ? leaf_steps[worst] : -1;
  while (step >= 0) {
    trail.push_back(step);
    const ApplicationError& a = r.applications[step];
    // An input brought the error when, alone, it gives at least half of it.
    if (a.blamed < 0 || a.blamed >= step || a.inherited < 0.5 * a.value_error) break;
    step = a.blamed;
  }
  return trail;
}

}  // namespace

double NormwiseError(const Tensor& a, const Tensor& b) {
  Difference d = Compare(a, b);
  if (d.nan_mismatch) return kInf;
  return d.max_ref > 0 ? d.max_diff / d.max_ref : d.max_diff;
}

double ErrorAgainstOne(const Tensor& a, const Tensor& b) {
  Difference d = Compare(a, b);
  if (d.nan_mismatch) return kInf;
  return d.max_diff / std::max(1.0, d.max_ref);
}

absl::StatusOr<PrecisionReport> ReportPrecision(Module& module, FuncGraph* fg,
                                                const std::vector<Value>& args,
                                                const PrecisionOptions& options) {
  // Step 1. The program, in the float32 module.
  PrecisionReport report;
  std::vector<std::string> names;
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* program, Program(module, fg, args, options, &names));
  report.program = program->name();
  // Step 2. Float32 and float64 twins from one saved copy (the same node names).
  const bool was_public = program->is_public();
  program->set_public(true);
  absl::StatusOr<proto::ModelProto> saved = SaveModel(module);
  program->set_public(was_public);
  KGRAD_RETURN_IF_ERROR(saved.status());
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m32,
                         LoadModel(*saved, module.registry(), "<float32 copy>"));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m64,
                         LoadModel(ToFloat64(*saved), module.registry(), "<float64 copy>"));
  FuncGraph* p32 = m32->FindGraph(report.program);
  FuncGraph* p64 = m64->FindGraph(report.program);
  if (p32 == nullptr || p64 == nullptr) {
    return absl::InternalError(absl::StrCat("precision report: graph '", report.program, "' was not saved"));
  }
  KGRAD_ASSIGN_OR_RETURN(auto twins_32_64, Twins(*m32, *m64));
  KGRAD_ASSIGN_OR_RETURN(auto twins_64_32, Twins(*m64, *m32));
  // Step 3. The float32 run, recorded; the float64 run, compared with it.
  Float32Recorder recorder(twins_32_64);
  KGRAD_ASSIGN_OR_RETURN(Value out32, RunObserved(p32, args, &recorder));
  std::vector<Value> wide;
  for (const Value& v : args) wide.push_back(WidenToFloat64(v));
  Float64Comparer comparer(twins_64_32, recorder);
  KGRAD_ASSIGN_OR_RETURN(Value out64, RunObserved(p64, std::move(wide), &comparer));
  if (comparer.diverged().empty() &&
      comparer.compared() != static_cast<int64_t>(recorder.records().size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "precision report: the float32 run made ", recorder.records().size(),
        " kernel applications and the float64 run ", comparer.compared(),
        ": a data-dependent branch went the other way"));
  }
  if (!comparer.diverged().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "precision report: the float32 and float64 runs took different paths (", comparer.diverged(),
        "): a data-dependent branch went the other way"));
  }
  // Step 4. The rows in run order, the outputs, and the worst gradient's trail.
  const absl::flat_hash_set<const CNode*> forward = ForwardPart(p32);
  PrintOptions print;
  print.max_tensor_elements = 1;
  for (Record& r : recorder.records()) {
    r.row.text = PrintApplication(r.node, print);
    r.row.backward = r.node->graph() == p32 && !forward.contains(r.node);
    report.applications.push_back(std::move(r.row));
  }
  report.outputs = OutputErrors(out32, out64, names);
  std::vector<int64_t> leaf_steps;
  for (const CNode* c : LeafProducers(p32, out32)) {
    const std::vector<size_t>* occ = c != nullptr ? recorder.Occurrences(c) : nullptr;
    leaf_steps.push_back(occ != nullptr ? static_cast<int64_t>(occ->back()) : -1);
  }
  report.trail = Trail(report, leaf_steps);
  return report;
}

}  // namespace kgrad
