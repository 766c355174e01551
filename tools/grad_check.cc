#include "tools/grad_check.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ad/grad_operation.h"
#include "ad/jvp.h"
#include "backends/executor.h"
#include "core/builder.h"
#include "core/status_macros.h"
#include "core/value_walk.h"

namespace kgrad {
namespace {

bool IsFloatValue(const Value& v) {
  return (v.is_tensor() && IsFloating(v.tensor().dtype())) || (v.is_scalar() && v.scalar().is_float());
}

absl::Status RequireF64(const Value& v, const std::string& what) {
  bool ok = (v.is_tensor() && v.tensor().dtype() == DType::kFloat64) ||
            (v.is_scalar() && v.scalar().dtype() == DType::kFloat64);
  if (IsFloatValue(v) && !ok) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", v.TypeString(),
                                                   "; gradient checks run in float64"));
  }
  return absl::OkStatus();
}

// Uniform in [-1, 1), of v's shape and float dtype (float32 draws are the
// float64 draws rounded).
Value RandomLike(const Value& v, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  if (v.is_scalar()) return Value(Scalar::FromDouble(v.scalar().dtype(), u(rng)));
  Tensor t = Tensor::Create(v.tensor().dtype(), v.tensor().shape()).value();
  if (t.dtype() == DType::kFloat32) {
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = static_cast<float>(u(rng));
  } else {
    double* p = t.mutable_data<double>();
    for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = u(rng);
  }
  return Value(std::move(t));
}

// x + s * d for float64 tensors or scalars of one shape.
Value Axpy(const Value& x, double s, const Value& d) {
  if (x.is_scalar()) return Value(Scalar::Float(x.scalar().AsDouble() + s * d.scalar().AsDouble()));
  Tensor out = x.tensor().Clone();
  double* o = out.mutable_data<double>();
  const double* dd = d.tensor().data<double>();
  for (int64_t i = 0; i < out.NumElements(); ++i) o[i] += s * dd[i];
  return Value(std::move(out));
}

double Dot(const Value& a, const Value& b) {
  if (a.is_scalar()) return a.scalar().AsDouble() * b.scalar().AsDouble();
  double s = 0;
  for (int64_t i = 0; i < a.tensor().NumElements(); ++i) {
    s += a.tensor().ElementAsDouble(i) * b.tensor().ElementAsDouble(i);
  }
  return s;
}

double ScalarOf(const Value& v) {
  return v.is_scalar() ? v.scalar().AsDouble() : v.tensor().ElementAsDouble(0);
}

// One term <leaf, random weight> per float leaf of `sample` (the output's value,
// through tuples and lists), as rank-0 float64 tensor nodes. The getitem chain to each leaf shares its
// prefix with the previous leaf's (a deep output costs linear work, no recursion).
absl::Status Contract(GraphBuilder& b, AnfNode* node, const Value& sample, std::mt19937_64& rng,
                      bool float64_only, std::vector<AnfNode*>* terms) {
  std::vector<size_t> built_path;      // path of the chain in `chain`
  std::vector<AnfNode*> chain{node};   // chain[k]: the node at built_path[0..k)
  std::vector<const Value*> values{&sample};  // values[k]: the value there
  return ForEachLeaf(sample, [&](const Value& leaf, absl::Span<const size_t> path) -> absl::Status {
    if (!IsFloatValue(leaf)) return absl::OkStatus();
    size_t common = 0;
    while (common < built_path.size() && common < path.size() && built_path[common] == path[common]) {
      ++common;
    }
    built_path.assign(path.begin(), path.end());
    chain.resize(common + 1);
    values.resize(common + 1);
    for (size_t k = common; k < path.size(); ++k) {
      const Value& parent = *values.back();
      const int64_t i = static_cast<int64_t>(path[k]);
      chain.push_back(parent.is_list() ? b.Op(PrimId::kListGetItem, {chain.back(), b.Int(i)})
                                       : b.GetItem(chain.back(), i));
      values.push_back(&parent.elements()[path[k]]);
    }
    AnfNode* at = chain.back();
    if (float64_only) KGRAD_RETURN_IF_ERROR(RequireF64(leaf, "an output"));
    Value w = RandomLike(leaf, rng);
    if (leaf.is_scalar()) {
      AnfNode* p = b.Op(PrimId::kScalarMul, {at, b.Const(w)});
      terms->push_back(b.Op(PrimId::kScalarToTensor, {p}, {{"dtype", leaf.scalar().dtype()}}));
    } else {
      terms->push_back(b.Op(PrimId::kReduceSum, {b.Op(PrimId::kMul, {at, b.Const(w)})}));
    }
    return absl::OkStatus();
  });
}

}  // namespace

absl::StatusOr<FuncGraph*> ScalarProjection(Module& m, FuncGraph* g, const Value& sample_out,
                                            std::mt19937_64& rng, const std::string& name,
                                            bool float64_only) {
  GraphBuilder b(&m, name, g->parent());
  std::vector<AnfNode*> xs;
  for (Parameter* p : g->parameters()) xs.push_back(b.Param(p->name(), p->declared()));
  AnfNode* out = b.Call(g, xs);
  std::vector<AnfNode*> terms;
  KGRAD_RETURN_IF_ERROR(Contract(b, out, sample_out, rng, float64_only, &terms));
  if (terms.empty()) return absl::InvalidArgumentError("the graph has no floating-point output to check");
  AnfNode* sum = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) sum = b.Op(PrimId::kAdd, {sum, terms[i]});
  return b.Return(sum);
}

namespace {

struct Subject {
  std::string name;
  int arg = -1;               // an input, or
  Parameter* weight = nullptr;  // a weight
};

class Checker {
 public:
  Checker(Module& m, FuncGraph* fg, std::vector<Value> args, const GradCheckOptions& o)
      : m_(m), fg_(fg), args_(std::move(args)), o_(o), rng_(o.seed) {}

  absl::StatusOr<GradCheckReport> Run() {
    KGRAD_RETURN_IF_ERROR(Setup());
    GradCheckReport report;
    report.seed = o_.seed;
    KGRAD_ASSIGN_OR_RETURN(Value out, RunGraph(fg_, args_));
    KGRAD_ASSIGN_OR_RETURN(FuncGraph* level, ScalarProjection(m_, fg_, out, rng_, "gradcheck_L1"));
    for (int order = 1; order <= o_.order; ++order) {
      // Integer and bool inputs are passed through, not differentiated.
      GradOptions go;
      go.residuals = o_.residuals;
      go.argnums.clear();
      for (const Subject& s : subjects_) {
        if (s.weight != nullptr) go.weights.push_back(s.weight);
        if (s.weight == nullptr) go.argnums.push_back(s.arg);
      }
      KGRAD_ASSIGN_OR_RETURN(FuncGraph* grad, Grad(m_, level, go));

      KGRAD_ASSIGN_OR_RETURN(Value grads, RunGraph(grad, args_));
      // Every graph transform of this order (Jvp included) happens before the
      // executors are made, so that none runs a graph that changed under it.
      FuncGraph* jvp = nullptr;
      if (order == 1 && o_.check_jvp) {
        KGRAD_ASSIGN_OR_RETURN(jvp, Jvp(m_, level));
      }
      KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(level));
      for (const Subject& s : subjects_) {
        const Value& analytic = Pick(grads, s, go);
        KGRAD_ASSIGN_OR_RETURN(GradCheckEntry e, CheckSubject(*exec, s, analytic, nullptr));
        e.order = order;
        report.entries.push_back(e);
      }
      if (jvp != nullptr) {
        KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> jexec, Executor::Create(jvp));
        for (const Subject& s : subjects_) {
          if (s.weight != nullptr) continue;
          KGRAD_ASSIGN_OR_RETURN(GradCheckEntry e, CheckSubject(*exec, s, Value(), jexec.get()));
          e.order = 1;
          e.forward = true;
          report.entries.push_back(e);
        }
      }
      if (order < o_.order) {
        KGRAD_ASSIGN_OR_RETURN(level, ScalarProjection(m_, grad, grads, rng_,
                                                       absl::StrCat("gradcheck_L", order + 1)));
      }
    }
    return report;
  }

 private:
  absl::Status Setup() {
    if (args_.size() != fg_->parameters().size()) {
      return absl::InvalidArgumentError(absl::StrCat("graph '", fg_->name(), "' takes ",
                                                     fg_->parameters().size(), " inputs, got ", args_.size()));
    }
    for (size_t i = 0; i < args_.size(); ++i) {
      std::string name = fg_->parameters()[i]->name();
      KGRAD_RETURN_IF_ERROR(RequireF64(args_[i], absl::StrCat("input '", name, "'")));
      if (IsFloatValue(args_[i])) subjects_.push_back(Subject{name, static_cast<int>(i), nullptr});
    }
    if (!o_.check_weights) return absl::OkStatus();
    for (const auto& w : m_.weights()) {
      Value v(*w->default_value());
      KGRAD_RETURN_IF_ERROR(RequireF64(v, absl::StrCat("weight '", w->name(), "'")));
      if (IsFloatValue(v)) subjects_.push_back(Subject{w->name(), -1, w.get()});
      weights_[w->name()] = *w->default_value();
    }
    return absl::OkStatus();
  }

  // The subject's gradient in what Grad returned: dx, (dx...), (dw...), or
  // (input grads, (dw...)).
  const Value& Pick(const Value& grads, const Subject& s, const GradOptions& go) {
    bool weights = !go.weights.empty(), inputs = !go.argnums.empty();
    if (s.weight != nullptr) {
      const Value& dws = inputs ? grads.tuple()[1] : grads;
      int k = static_cast<int>(std::find(go.weights.begin(), go.weights.end(), s.weight) - go.weights.begin());
      return dws.tuple()[k];
    }
    const Value& dxs = weights ? grads.tuple()[0] : grads;
    if (go.argnums.size() == 1) return dxs;
    int k = static_cast<int>(std::find(go.argnums.begin(), go.argnums.end(), s.arg) - go.argnums.begin());
    return dxs.tuple()[k];
  }

  Value Current(const Subject& s) const {
    return s.weight == nullptr ? args_[s.arg] : Value(weights_.at(s.name));
  }

  absl::StatusOr<double> Evaluate(const Executor& e, const Subject& s, const Value& x) {
    std::vector<Value> args = args_;
    absl::flat_hash_map<std::string, Tensor> weights;
    if (s.weight == nullptr) {
      args[s.arg] = x;
    } else {
      weights[s.name] = x.tensor();
    }
    KGRAD_ASSIGN_OR_RETURN(Value r, e.Run(std::move(args), weights));
    return ScalarOf(r);
  }

  std::vector<Value> Directions(const Value& x) {
    std::vector<Value> dirs;
    for (int i = 0; i < o_.directions; ++i) dirs.push_back(RandomLike(x, rng_));
    int64_t n = x.is_scalar() ? 1 : x.tensor().NumElements();
    if (n <= o_.max_coordinates) {
      for (int64_t k = 0; k < n; ++k) {
        Value d = x.is_scalar() ? Value(Scalar::Float(1.0)) : Value(Tensor::Zeros(DType::kFloat64, x.tensor().shape()).value());
        if (d.is_tensor()) d.tensor().mutable_data<double>()[k] = 1.0;
        dirs.push_back(std::move(d));
      }
    }
    return dirs;
  }

  // <dL/dx, v> from the jvp graph: tangent v for this input, zero for the others.
  absl::StatusOr<double> ForwardDerivative(const Executor& jvp, const Subject& s, const Value& v) {
    std::vector<Value> args = args_;
    for (size_t i = 0; i < args_.size(); ++i) {
      const Value& a = args_[i];
      if (static_cast<int>(i) == s.arg) {
        args.push_back(v);
      } else if (a.is_tensor()) {
        KGRAD_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros(a.tensor().dtype(), a.tensor().shape()));
        args.push_back(Value(std::move(z)));
      } else if (a.is_scalar()) {
        args.push_back(Value(Scalar::FromDouble(a.scalar().dtype(), 0.0)));
      } else {
        args.push_back(a);
      }
    }
    KGRAD_ASSIGN_OR_RETURN(Value r, jvp.Run(std::move(args)));
    return ScalarOf(r.tuple()[1]);
  }

  bool Close(double a, double b, double factor = 1) const {
    return std::abs(a - b) <= factor * (o_.atol + o_.rtol * std::max(std::abs(a), std::abs(b)));
  }

  // A second look at a direction whose central difference missed: a kink of the
  // function (relu at 0, a max over ties) within the step mixes two slopes into
  // it, and a deep network has so many relus that even steps of 1e-8 can cross
  // one (resnet18's first convolution feeds 800k of them). At steps 10x to 10^4x
  // smaller, the central difference and the one-sided ones are compared in turn
  // (`matched`; `central`: the one that matched, else the last central one): a
  // one-sided difference matches where kinks lie on the other side only, and
  // the smallest steps see fewer kinks but more rounding, so no single step
  // decides. A kink at the point itself shows as one-sided differences whose gap
  // does not shrink with the step (a smooth function's gap is the step times its
  // curvature: 10x smaller at a 10x smaller step): `kink`, no derivative along v
  // there.
  struct Refined {
    bool matched = false;
    double central = 0;
    bool kink = false;
  };
  absl::StatusOr<Refined> Refine(const Executor& e, const Subject& s, const Value& x, const Value& v,
                                 double exact) {
    KGRAD_ASSIGN_OR_RETURN(double at, Evaluate(e, s, x));
    Refined r;
    double gap = 0, last_gap = 0;
    for (double h = o_.eps / 10; h >= o_.eps / 1e4 * 0.99; h /= 10) {
      KGRAD_ASSIGN_OR_RETURN(double plus, Evaluate(e, s, Axpy(x, h, v)));
      KGRAD_ASSIGN_OR_RETURN(double minus, Evaluate(e, s, Axpy(x, -h, v)));
      const double forward = (plus - at) / h, backward = (at - minus) / h;
      r.central = (plus - minus) / (2 * h);
      for (double d : {r.central, forward, backward}) {
        if (Close(d, exact)) {
          r.matched = true;
          r.central = d;
          return r;
        }
      }
      last_gap = gap;
      gap = Close(forward, backward, 10) ? 0 : std::abs(forward - backward);
    }
    r.kink = gap > 0 && gap > 0.5 * last_gap;
    return r;
  }

  // Reverse mode (analytic = dL/dx) or, with `jvp`, forward mode, against central
  // differences along random and coordinate directions.
  absl::StatusOr<GradCheckEntry> CheckSubject(const Executor& e, const Subject& s, const Value& analytic,
                                              const Executor* jvp) {
    GradCheckEntry entry;
    entry.input = s.name;
    Value x = Current(s);
    for (const Value& v : Directions(x)) {
      KGRAD_ASSIGN_OR_RETURN(double plus, Evaluate(e, s, Axpy(x, o_.eps, v)));
      KGRAD_ASSIGN_OR_RETURN(double minus, Evaluate(e, s, Axpy(x, -o_.eps, v)));
      double numeric = (plus - minus) / (2 * o_.eps);
      double exact;
      if (jvp != nullptr) {
        KGRAD_ASSIGN_OR_RETURN(exact, ForwardDerivative(*jvp, s, v));
      } else {
        exact = Dot(analytic, v);
      }
      ++entry.directions;
      if (std::isnan(numeric) || std::isnan(exact)) {
        entry.nan_numeric += std::isnan(numeric);
        entry.nan_derivative += std::isnan(exact);
        entry.passed = false;
        continue;
      }
      if (!Close(numeric, exact)) {
        KGRAD_ASSIGN_OR_RETURN(Refined r, Refine(e, s, x, v, exact));
        if (r.matched) {
          ++entry.refined;
          numeric = r.central;
        } else if (r.kink) {
          ++entry.non_smooth;
          if (o_.skip_kinks) continue;
        }
      }
      double scale = std::max(std::abs(numeric), std::abs(exact));
      double err = std::abs(numeric - exact);
      entry.max_abs_error = std::max(entry.max_abs_error, err);
      entry.max_rel_error = std::max(entry.max_rel_error, scale > 0 ? err / scale : 0.0);
      entry.max_magnitude = std::max(entry.max_magnitude, std::abs(exact));
      if (!(err <= o_.atol + o_.rtol * scale)) entry.passed = false;
    }
    return entry;
  }

  Module& m_;
  FuncGraph* fg_;
  std::vector<Value> args_;
  GradCheckOptions o_;
  std::mt19937_64 rng_;
  std::vector<Subject> subjects_;
  absl::flat_hash_map<std::string, Tensor> weights_;
};

}  // namespace

bool GradCheckReport::passed() const {
  for (const GradCheckEntry& e : entries) {
    if (!e.passed) return false;
  }
  return true;
}

std::string GradCheckReport::ToString() const {
  std::string s = absl::StrCat("gradient check, seed ", seed, "\n");
  for (const GradCheckEntry& e : entries) {
    absl::StrAppend(&s, absl::StrFormat("  %s order %d  %-20s ", e.forward ? "jvp" : "vjp", e.order,
                                        e.input));
    if (e.nan_numeric > 0 || e.nan_derivative > 0) {
      // Errors computed from NaN say nothing: say where the NaN came from instead.
      std::vector<std::string> what;
      if (e.nan_numeric > 0) {
        what.push_back(absl::StrFormat("the function is NaN near the input (%d of %d directions)",
                                       e.nan_numeric, e.directions));
      }
      if (e.nan_derivative > 0) {
        what.push_back(absl::StrFormat("the derivative is NaN (%d of %d directions)",
                                       e.nan_derivative, e.directions));
      }
      absl::StrAppend(&s, absl::StrJoin(what, "; "), "  FAILED\n");
      continue;
    }
    if (e.non_smooth == e.directions && e.passed) {
      absl::StrAppend(&s, absl::StrFormat("not differentiable at this point along any of the %d "
                                          "directions (kinks): nothing compared; try another seed  ok\n",
                                          e.directions));
      continue;
    }
    std::string notes;
    if (e.refined > 0) {
      absl::StrAppend(&notes, absl::StrFormat("; %d of %d directions compared at a smaller step",
                                              e.refined, e.directions));
    }
    if (e.non_smooth > 0) {
      absl::StrAppend(&notes, absl::StrFormat("; %d of %d directions cross a kink at the point%s", e.non_smooth,
                                              e.directions, e.passed ? ": not compared" : ""));
    }
    absl::StrAppend(&s, absl::StrFormat("max abs err %.3g  max rel err %.3g  (|grad| up to %.3g)%s  %s\n",
                                        e.max_abs_error, e.max_rel_error, e.max_magnitude, notes,
                                        e.passed ? "ok" : "FAILED"));
  }
  return s;
}

absl::StatusOr<GradCheckReport> CheckGradients(Module& module, FuncGraph* fg,
                                               const std::vector<Value>& args,
                                               const GradCheckOptions& options) {
  if (options.order < 1 || options.order > 3) {
    return absl::InvalidArgumentError(absl::StrCat("order must be 1, 2 or 3, got ", options.order));
  }
  Checker checker(module, fg, args, options);
  return checker.Run();
}

absl::StatusOr<std::vector<Value>> RandomArguments(FuncGraph* fg, uint64_t seed, bool declared_floats,
                                                   const std::vector<bool>& given) {
  std::mt19937_64 rng(seed);
  std::vector<Value> out;
  for (size_t i = 0; i < fg->parameters().size(); ++i) {
    Parameter* p = fg->parameters()[i];
    const AbstractPtr& d = p->declared();
    if (i < given.size() && given[i]) {
      out.push_back(Value());
      continue;
    }
    if (const AbstractTensor* t = AsTensor(d); t != nullptr && t->shape_known()) {
      const DType dtype = IsFloating(t->dtype()) && !declared_floats ? DType::kFloat64 : t->dtype();
      Tensor x = Tensor::Create(dtype, t->shape()).value();
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      DispatchDType(x.dtype(), [&](auto zero) {
        using V = decltype(zero);
        V* q = x.mutable_data<V>();
        for (int64_t i = 0; i < x.NumElements(); ++i) {
          double r = u(rng);
          q[i] = std::is_floating_point_v<V> ? static_cast<V>(r) : static_cast<V>(std::floor((r + 1) * 1.5));
        }
      });
      out.push_back(Value(std::move(x)));
    } else if (const AbstractScalar* s = AsScalar(d)) {
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      const DType dtype = declared_floats ? s->dtype() : DType::kFloat64;
      out.push_back(IsFloating(s->dtype()) ? Value(Scalar::FromDouble(dtype, u(rng)))
                                           : Value(Scalar::Int(3, s->dtype())));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", p->name(), "' of graph '", fg->name(),
          "' needs a declared tensor type with known dims (or a scalar) to draw random arguments"));
    }
  }
  return out;
}

}  // namespace kgrad
