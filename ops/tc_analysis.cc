#include "ops/tc_analysis.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "ops/tc_division.h"

namespace kgrad {
namespace tc {
namespace {

bool Known(int64_t v) { return v != kUnknownDim; }

// [lo, hi] of an affine numerator over the box of ranges (hi exclusive in
// `ranges`); false when a range it needs is unknown.
bool Interval(const Affine& a, const Domain& d, int64_t* lo, int64_t* hi, int skip = -1) {
  *lo = *hi = a.constant;
  for (const auto& [id, coef] : a.terms) {
    if (id == skip) continue;
    int p = d.position[id];
    if (!Known(d.lo[p]) || !Known(d.hi[p])) return false;
    int64_t x0 = coef * d.lo[p], x1 = coef * (d.hi[p] - 1);
    *lo += std::min(x0, x1);
    *hi += std::max(x0, x1);
  }
  return true;
}

class Analyzer {
 public:
  Analyzer(const Block& b, absl::Span<const ops::TensorType> inputs) : b_(b), inputs_(inputs) {}

  absl::StatusOr<Analysis> Run() {
    KGRAD_RETURN_IF_ERROR(Inputs());
    written_.assign(b_.tensors.size(), false);
    for (size_t t = 0; t < b_.tensors.size(); ++t) written_[t] = b_.tensors[t].input;
    for (const Statement& s : b_.statements) {
      KGRAD_ASSIGN_OR_RETURN(Domain d, StatementDomain(s));
      a_.domains.push_back(std::move(d));
      written_[s.lhs] = true;
    }
    for (int t = b_.num_inputs; t < static_cast<int>(b_.tensors.size()); ++t) {
      if (!written_[t]) return BlockError(b_, absl::StrCat("output '", b_.tensors[t].name, "' is never written"));
    }
    return std::move(a_);
  }

 private:
  absl::Status Inputs() {
    if (static_cast<int>(inputs_.size()) != b_.num_inputs) {
      return BlockError(b_, absl::StrCat("takes ", b_.num_inputs, " inputs, got ", inputs_.size()));
    }
    a_.size.assign(b_.sizes.size(), kUnknownDim);
    a_.shapes.assign(b_.tensors.size(), Shape());
    a_.dim_bounds.assign(b_.tensors.size(), {});
    for (int i = 0; i < b_.num_inputs; ++i) {
      const TensorDecl& t = b_.tensors[i];
      const ops::TensorType& in = inputs_[i];
      std::string declared = absl::StrCat(t.dtype == DType::kFloat64 ? "double" : "float", " ", t.name);
      if (in.dtype != t.dtype) {
        return BlockError(b_, absl::StrCat("input ", i, " (", declared, ") must be ", DTypeName(t.dtype),
                                           ", got ", in.ToString()));
      }
      if (in.dtype != inputs_[0].dtype) {
        return BlockError(b_, absl::StrCat("inputs must share one dtype: input ", i, " is ", in.ToString(),
                                           ", input 0 ", inputs_[0].ToString()));
      }
      if (in.rank() != static_cast<int>(t.dims.size())) {
        return BlockError(b_, absl::StrCat("input ", i, " (", declared, ") has rank ", t.dims.size(),
                                           ", got ", in.ToString()));
      }
      for (int k = 0; k < in.rank(); ++k) {
        int64_t& size = a_.size[t.dims[k]];
        int64_t dim = in.shape[k];
        if (!Known(dim)) continue;
        if (dim > kMaxTcDim) {
          return BlockError(b_, absl::StrCat("dim ", k, " of input ", i, " (", in.ToString(), ") is beyond 2^31"));
        }
        if (Known(size) && size != dim) {
          return BlockError(b_, absl::StrCat("size ", b_.sizes[t.dims[k]], " is ", size, " elsewhere but ", dim,
                                             " in dim ", k, " of input ", i, " (", t.name, ": ", in.ToString(), ")"));
        }
        size = dim;
      }
      a_.shapes[i] = Shape(in.shape.begin(), in.shape.end());
      for (int dim : t.dims) a_.dim_bounds[i].push_back(Bound{dim, 0});
    }
    a_.dtype = inputs_.empty() ? DType::kFloat32 : inputs_[0].dtype;
    if (inputs_.empty()) {
      for (const Statement& s : b_.statements) {
        return StatementError(b_, s, "a block needs at least one input (its dtype is the block's)");
      }
    }
    return absl::OkStatus();
  }

  int64_t Resolve(const Bound& bound) const {
    if (bound.size < 0) return bound.offset;
    int64_t v = a_.size[bound.size];
    return Known(v) ? v + bound.offset : kUnknownDim;
  }

  void Use(Domain& d, int id) {
    if (d.position[id] >= 0) return;
    d.position[id] = static_cast<int>(d.indices.size());
    d.indices.push_back(id);
  }

  // The reads of the right side: rank and order checks.
  absl::Status CheckReads(const Statement& s) {
    for (const Expr& e : s.rhs.nodes) {
      if (e.op != Op::kRead) continue;
      const TensorDecl& t = b_.tensors[e.tensor];
      if (e.tensor == s.lhs) {
        return StatementError(b_, s, absl::StrCat("reads its own output '", t.name,
                                                  "' (write the new value to another output)"));
      }
      if (!written_[e.tensor]) {
        return StatementError(b_, s, absl::StrCat("reads output '", t.name, "' before any statement writes it"));
      }
      int rank = static_cast<int>(a_.shapes[e.tensor].size());
      if (static_cast<int>(e.args.size()) != rank) {
        return StatementError(b_, s, absl::StrCat("reads '", t.name, "' with ", e.args.size(), " indices; it has rank ",
                                                  rank));
      }
    }
    return absl::OkStatus();
  }

  // Index arithmetic within int64 over any dims (blocks derived by the adjoint
  // are checked here too; the parser checks what users write).
  absl::Status CheckIndexLimits(const Statement& s) {
    bool ok = true;
    for (const Expr& e : s.rhs.nodes) {
      for (const Affine& a : e.args) ok &= WithinIndexLimits(a);
    }
    for (const Condition& c : s.where) {
      ok &= WithinIndexLimits(c.expr);
      for (const Bound* b : {&c.lo, &c.hi}) ok &= b->offset <= kMaxTcDim && b->offset >= -kMaxTcDim;
    }
    if (ok) return absl::OkStatus();
    return StatementError(b_, s, absl::StrCat("index arithmetic beyond ", kMaxIndexTerms, " terms or constants of ",
                                              "magnitude ", kMaxIndexConstant));
  }

  // One bound an index's range can be inferred from: lo <= expr < hi.
  struct Limit {
    const Affine* expr;
    int64_t lo, hi;
    Bound bound;  // hi's symbolic form
  };

  absl::StatusOr<Domain> StatementDomain(const Statement& s) {
    Domain d;
    d.position.assign(b_.indices.size(), -1);
    if (s.init && written_[s.lhs]) {
      return StatementError(b_, s, absl::StrCat("initialises '", b_.tensors[s.lhs].name,
                                                "' again; an earlier statement wrote it (update it with +=, *=, "
                                                "max= or min=)"));
    }
    if (!s.init && !written_[s.lhs]) {
      return StatementError(b_, s, absl::StrCat("updates '", b_.tensors[s.lhs].name,
                                                "' before any statement writes it (initialise it with =, +=!, *=!, "
                                                "max=! or min=!)"));
    }
    if (written_[s.lhs] && a_.shapes[s.lhs].size() != s.lhs_indices.size()) {
      return StatementError(b_, s, absl::StrCat("writes '", b_.tensors[s.lhs].name, "' with ", s.lhs_indices.size(),
                                                " indices; it has rank ", a_.shapes[s.lhs].size()));
    }
    KGRAD_RETURN_IF_ERROR(CheckReads(s));
    KGRAD_RETURN_IF_ERROR(CheckIndexLimits(s));
    for (int id : s.lhs_indices) Use(d, id);
    d.num_lhs = static_cast<int>(d.indices.size());
    for (const Expr& e : s.rhs.nodes) {
      if (e.op == Op::kIndex) Use(d, e.id);
      for (const Affine& a : e.args) {
        for (const auto& term : a.terms) Use(d, term.first);
      }
    }
    for (const Condition& c : s.where) {
      for (const auto& term : c.expr.terms) Use(d, term.first);
    }
    if (s.reducer == Reducer::kAssign && static_cast<int>(d.indices.size()) > d.num_lhs) {
      return StatementError(b_, s, absl::StrCat("index '", b_.indices[d.indices[d.num_lhs]],
                                                "' is not on the left side; '=' does not reduce (use +=!, *=!, "
                                                "max=! or min=!)"));
    }
    const int n = static_cast<int>(d.indices.size());
    d.lo.assign(n, 0);
    d.hi.assign(n, kUnknownDim);
    d.lo_bound.assign(n, Bound{-1, 0});
    d.hi_bound.assign(n, Bound{kNotSymbolic, 0});
    std::vector<bool> resolved(n, false);
    KGRAD_RETURN_IF_ERROR(ExplicitRanges(s, d, resolved));
    KGRAD_RETURN_IF_ERROR(InferRanges(s, d, resolved));
    KGRAD_RETURN_IF_ERROR(LeftSide(s, d));
    KGRAD_RETURN_IF_ERROR(Bounds(s, d));
    return d;
  }

  absl::Status ExplicitRanges(const Statement& s, Domain& d, std::vector<bool>& resolved) {
    for (const Condition& c : s.where) {
      if (!c.expr.IsPlainIndex()) continue;
      int p = d.position[c.expr.terms[0].first];
      if (resolved[p]) continue;  // a second range restricts the domain (a guard)
      resolved[p] = true;
      d.lo[p] = Resolve(c.lo);
      d.hi[p] = Resolve(c.hi);
      d.lo_bound[p] = c.lo;
      d.hi_bound[p] = c.hi;
      if (!Known(d.lo[p])) d.hi[p] = kUnknownDim;
    }
    if (written_[s.lhs]) {
      const Shape& shape = a_.shapes[s.lhs];
      for (int p = 0; p < d.num_lhs; ++p) {
        if (resolved[p]) continue;
        resolved[p] = true;
        d.lo[p] = 0;
        d.hi[p] = shape[p];
        d.hi_bound[p] = a_.dim_bounds[s.lhs][p];
      }
    }
    return absl::OkStatus();
  }

  // TC's rule: an index takes the largest range keeping every unguarded read
  // that names it in bounds, whatever its other indices are; repeated until no
  // range is added.
  absl::Status InferRanges(const Statement& s, Domain& d, std::vector<bool>& resolved) {
    std::vector<Limit> limits;
    for (const Expr& e : s.rhs.nodes) {
      for (size_t k = 0; k < e.args.size(); ++k) {
        if (Guarded(s, e.args[k])) continue;
        limits.push_back({&e.args[k], 0, a_.shapes[e.tensor][k], a_.dim_bounds[e.tensor][k]});
      }
    }
    const int n = static_cast<int>(d.indices.size());
    // One index from the reads naming it (with `strict`, only when every one of
    // them is ready: its other indices have ranges).
    auto infer = [&](int p, bool strict) {
      int id = d.indices[p];
      bool any = false, unknown = false, plain = true, ready = true;
      std::optional<Bound> symbol;
      int64_t lo = INT64_MIN, hi = INT64_MAX;
      for (const Limit& l : limits) {
        int64_t coef = l.expr->Coefficient(id);
        if (coef == 0) continue;
        bool this_ready = true;
        for (const auto& term : l.expr->terms) {
          if (term.first != id && !resolved[d.position[term.first]]) this_ready = false;
        }
        if (!this_ready) {
          ready = false;
          continue;
        }
        any = true;
        if (l.expr->IsPlainIndex() && l.bound.size != kNotSymbolic &&
            (!symbol || (symbol->size == l.bound.size && symbol->offset == l.bound.offset))) {
          symbol = l.bound;
        } else {
          plain = false;
        }
        int64_t rlo, rhi;
        if (!Known(l.hi) || !Interval(*l.expr, d, &rlo, &rhi, id)) {
          unknown = true;
          continue;
        }
        int64_t div = l.expr->divisor;
        int64_t top = l.hi * div - 1, bottom = l.lo * div;
        int64_t ilo = coef > 0 ? CeilDiv(bottom - rlo, coef) : CeilDiv(rhi - top, -coef);
        int64_t ihi = coef > 0 ? FloorDiv(top - rhi, coef) : FloorDiv(rlo - bottom, -coef);
        lo = std::max(lo, ilo);
        hi = std::min(hi, ihi + 1);
      }
      if ((strict && !ready) || !any) return false;
      resolved[p] = true;
      if (plain && symbol) {
        d.hi_bound[p] = *symbol;
      } else {
        d.lo_bound[p] = Bound{kNotSymbolic, 0};
      }
      d.lo[p] = unknown ? 0 : lo;
      d.hi[p] = unknown ? kUnknownDim : std::max(hi, lo);
      return true;
    };
    // Strict passes first; when they stall, one index from its ready reads.
    while (true) {
      bool progress = false;
      for (int p = 0; p < n; ++p) {
        if (!resolved[p]) progress |= infer(p, true);
      }
      if (progress) continue;
      for (int p = 0; p < n && !progress; ++p) {
        if (!resolved[p]) progress = infer(p, false);
      }
      if (!progress) break;
    }
    for (int p = 0; p < n; ++p) {
      if (!resolved[p]) {
        const std::string& name = b_.indices[d.indices[p]];
        return StatementError(b_, s, absl::StrCat("index ", name, " has no range: add `where ", name, " in a:b`"));
      }
    }
    return absl::OkStatus();
  }

  static bool Guarded(const Statement& s, const Affine& a) {
    for (const Condition& c : s.where) {
      if (!c.expr.IsPlainIndex() && c.expr == a) return true;
    }
    return false;
  }

  absl::Status LeftSide(const Statement& s, Domain& d) {
    Shape shape;
    std::vector<Bound> bounds;
    for (int p = 0; p < d.num_lhs; ++p) {
      const std::string& name = b_.indices[d.indices[p]];
      if (Known(d.lo[p]) && d.lo[p] < 0) {
        return StatementError(b_, s, absl::StrCat("index ", name, " of the left side starts at ", d.lo[p],
                                                  "; an output's indices start at 0 or above"));
      }
      if (written_[s.lhs]) {
        int64_t dim = a_.shapes[s.lhs][p];
        if (Known(dim) && Known(d.hi[p]) && d.hi[p] > dim) {
          return StatementError(b_, s, absl::StrCat("index ", name, " runs to ", d.hi[p] - 1, " but '",
                                                    b_.tensors[s.lhs].name, "' has ", dim, " in dim ", p));
        }
      }
      shape.push_back(d.hi[p]);
      bounds.push_back(d.hi_bound[p]);
    }
    if (!written_[s.lhs]) {
      a_.shapes[s.lhs] = std::move(shape);
      a_.dim_bounds[s.lhs] = std::move(bounds);
    }
    return absl::OkStatus();
  }

  // Every read in bounds over the domain; the guards the kernels apply.
  absl::Status Bounds(const Statement& s, Domain& d) {
    std::vector<bool> ranged(d.indices.size(), false);
    for (const Condition& c : s.where) {
      if (c.expr.IsPlainIndex()) {
        int p = d.position[c.expr.terms[0].first];
        bool first = !ranged[p];
        ranged[p] = true;
        if (first) continue;
      }
      Guard g;
      g.numerator = c.expr;
      g.numerator.divisor = 1;
      g.divisor = c.expr.divisor;
      g.lo = Resolve(c.lo);
      g.hi = Resolve(c.hi);
      d.guards.push_back(std::move(g));
    }
    for (const Expr& e : s.rhs.nodes) {
      for (size_t k = 0; k < e.args.size(); ++k) {
        const Affine& a = e.args[k];
        int64_t dim = a_.shapes[e.tensor][k];
        const Condition* guard = nullptr;
        for (const Condition& c : s.where) {
          if (!c.expr.IsPlainIndex() && c.expr == a) guard = &c;
        }
        if (guard == nullptr && a.divisor != 1) {
          Guard g;
          g.numerator = a;
          g.numerator.divisor = 1;
          g.divisor = a.divisor;
          g.lo = g.hi = kNoBound;
          d.guards.push_back(std::move(g));
        }
        int64_t lo, hi;
        if (guard != nullptr) {
          lo = Resolve(guard->lo);
          hi = Resolve(guard->hi);
          if (!Known(lo) || !Known(hi)) continue;
          hi -= 1;
        } else {
          if (!Interval(a, d, &lo, &hi)) continue;
          lo = CeilDiv(lo, a.divisor);
          hi = FloorDiv(hi, a.divisor);
        }
        if (!Known(dim) || lo > hi) continue;
        if (lo < 0 || hi >= dim) {
          return StatementError(
              b_, s,
              absl::StrCat("the read ", b_.tensors[e.tensor].name, "(... ", PrintAffine(b_, a), " ...) reaches ",
                           lo < 0 ? lo : hi, " in dim ", k, ", of size ", dim,
                           "; out-of-range reads are errors (bound it with `where ", PrintAffine(b_, a), " in 0:",
                           dim, "` to skip those points)"));
        }
      }
    }
    return absl::OkStatus();
  }

  const Block& b_;
  absl::Span<const ops::TensorType> inputs_;
  Analysis a_;
  std::vector<bool> written_;
};

}  // namespace

bool Analysis::known() const {
  for (int64_t s : size) {
    if (!Known(s)) return false;
  }
  for (const Domain& d : domains) {
    for (size_t p = 0; p < d.indices.size(); ++p) {
      if (!Known(d.lo[p]) || !Known(d.hi[p])) return false;
    }
    for (const Guard& g : d.guards) {
      if (!Known(g.lo) || !Known(g.hi)) return false;
    }
  }
  return true;
}

absl::StatusOr<Analysis> Analyze(const Block& b, absl::Span<const ops::TensorType> inputs) {
  return Analyzer(b, inputs).Run();
}

}  // namespace tc
}  // namespace kgrad
