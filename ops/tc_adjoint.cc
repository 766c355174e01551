#include "ops/tc_adjoint.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/shape.h"
#include "core/status_macros.h"

namespace kgrad {
namespace tc {
namespace {

// ----- Index algebra -------------------------------------------------------------------------
// Canonical form: terms by id without zeros, divisor > 0, no common factor.
void Normalize(Affine& a) {
  std::sort(a.terms.begin(), a.terms.end());
  std::vector<std::pair<int, int64_t>> merged;
  for (const auto& t : a.terms) {
    if (!merged.empty() && merged.back().first == t.first) {
      merged.back().second += t.second;
    } else {
      merged.push_back(t);
    }
  }
  a.terms.clear();
  for (const auto& t : merged) {
    if (t.second != 0) a.terms.push_back(t);
  }
  if (a.divisor < 0) {
    a.divisor = -a.divisor;
    a.constant = -a.constant;
    for (auto& t : a.terms) t.second = -t.second;
  }
  if (a.divisor == 1) return;
  int64_t g = std::gcd(a.divisor, a.constant < 0 ? -a.constant : a.constant);
  for (const auto& t : a.terms) g = std::gcd(g, t.second < 0 ? -t.second : t.second);
  if (g > 1) {
    a.divisor /= g;
    a.constant /= g;
    for (auto& t : a.terms) t.second /= g;
  }
}

// a with index v replaced by p (p's divisor is the solution's exact division).
Affine Substitute(const Affine& a, int v, const Affine& p) {
  int64_t av = a.Coefficient(v);
  if (av == 0) return a;
  Affine r;
  int64_t c = p.divisor;
  for (const auto& [id, coef] : a.terms) {
    if (id != v) r.terms.push_back({id, coef * c});
  }
  for (const auto& [id, coef] : p.terms) r.terms.push_back({id, coef * av});
  r.constant = a.constant * c + av * p.constant;
  r.divisor = a.divisor * c;
  Normalize(r);
  return r;
}

Affine Plain(int id) {
  Affine a;
  a.terms.push_back({id, 1});
  return a;
}

// ----- Expressions ---------------------------------------------------------------------------
int Leaf(ExprList& l, Op op, int id = -1, double number = 0) {
  Expr e;
  e.op = op;
  e.id = id;
  e.number = number;
  return l.Add(std::move(e));
}
int Number(ExprList& l, double v);
// Arithmetic of two numbers folds ("2 * 2" is "4").
int Node(ExprList& l, Op op, int a, int b = -1, int c = -1) {
  if (b >= 0 && c < 0 && l.nodes[a].op == Op::kNumber && l.nodes[b].op == Op::kNumber &&
      (op == Op::kAdd || op == Op::kSub || op == Op::kMul)) {
    double x = l.nodes[a].number, y = l.nodes[b].number;
    return Number(l, op == Op::kAdd ? x + y : op == Op::kSub ? x - y : x * y);
  }
  Expr e;
  e.op = op;
  e.a = a;
  e.b = b;
  e.c = c;
  return l.Add(std::move(e));
}
int Read(ExprList& l, int tensor, std::vector<Affine> args) {
  Expr e;
  e.op = Op::kRead;
  e.tensor = tensor;
  e.args = std::move(args);
  return l.Add(std::move(e));
}
int Number(ExprList& l, double v) { return Leaf(l, Op::kNumber, -1, v); }
bool IsNumber(const ExprList& l, int n, double v) {
  return l.nodes[n].op == Op::kNumber && l.nodes[n].number == v;
}
int Mul(ExprList& l, int a, int b) {
  if (IsNumber(l, a, 1)) return b;
  if (IsNumber(l, b, 1)) return a;
  return Node(l, Op::kMul, a, b);
}
int Plus(ExprList& l, int a, int b) { return Node(l, Op::kAdd, a, b); }

// The nodes of `e` reachable from its root, in order.
ExprList Prune(const ExprList& e, int root = -1) {
  if (root < 0) root = e.root();
  const std::vector<bool> live = e.Reaches(root);
  ExprList out;
  std::vector<int> at(e.nodes.size(), -1);
  for (size_t k = 0; k < e.nodes.size(); ++k) {
    if (!live[k]) continue;
    Expr n = e.nodes[k];
    for (int* c : {&n.a, &n.b, &n.c}) {
      if (*c >= 0) *c = at[*c];
    }
    at[k] = out.Add(std::move(n));
  }
  return out;
}

// d(root of e)/d(the reads equal to `key`), appended to e; nullopt when zero.
std::optional<int> Derivative(ExprList& e, const Expr& key) {
  const int n = static_cast<int>(e.nodes.size());
  std::vector<int> d(n, -1);  // -1: zero
  auto neg = [&](int x) { return Node(e, Op::kNeg, x); };
  for (int k = 0; k < n; ++k) {
    const Expr x = e.nodes[k];
    int da = x.a >= 0 ? d[x.a] : -1, db = x.b >= 0 ? d[x.b] : -1, dc = x.c >= 0 ? d[x.c] : -1;
    switch (x.op) {
      case Op::kRead:
        if (x.tensor == key.tensor && x.args == key.args) d[k] = Number(e, 1);
        break;
      case Op::kNeg:
        if (da >= 0) d[k] = neg(da);
        break;
      case Op::kAdd:
      case Op::kSub:
        if (da >= 0 && db >= 0) {
          d[k] = Node(e, x.op, da, db);
        } else if (da >= 0) {
          d[k] = da;
        } else if (db >= 0) {
          d[k] = x.op == Op::kAdd ? db : neg(db);
        }
        break;
      case Op::kMul: {  // d(ab) = da b + a db
        int l = da >= 0 ? Mul(e, da, x.b) : -1, r = db >= 0 ? Mul(e, x.a, db) : -1;
        d[k] = l >= 0 && r >= 0 ? Plus(e, l, r) : (l >= 0 ? l : r);
        break;
      }
      case Op::kDiv: {  // d(a/b) = da/b - (a/b) db/b
        int l = da >= 0 ? Node(e, Op::kDiv, da, x.b) : -1;
        int r = db >= 0 ? Node(e, Op::kDiv, Mul(e, k, db), x.b) : -1;
        d[k] = l >= 0 && r >= 0 ? Node(e, Op::kSub, l, r) : (l >= 0 ? l : (r >= 0 ? neg(r) : -1));
        break;
      }
      case Op::kExp:  // d exp(a) = exp(a) da
        if (da >= 0) d[k] = Mul(e, da, k);
        break;
      case Op::kLog:  // d log(a) = da / a
        if (da >= 0) d[k] = Node(e, Op::kDiv, da, x.a);
        break;
      case Op::kTanh:  // d tanh(a) = (1 - tanh(a)^2) da
        if (da >= 0) d[k] = Mul(e, da, Node(e, Op::kSub, Number(e, 1), Node(e, Op::kMul, k, k)));
        break;
      case Op::kSqrt:  // d sqrt(a) = da / (2 sqrt(a))
        if (da >= 0) d[k] = Node(e, Op::kDiv, da, Node(e, Op::kMul, Number(e, 2), k));
        break;
      case Op::kSigmoid:  // d s(a) = s(a) (1 - s(a)) da
        if (da >= 0) d[k] = Mul(e, da, Node(e, Op::kMul, k, Node(e, Op::kSub, Number(e, 1), k)));
        break;
      case Op::kAbs: {  // d |a| = sign(a) da (0 at 0, as PyTorch)
        if (da < 0) break;
        int zero = Number(e, 0);
        d[k] = Node(e, Op::kSelect, Node(e, Op::kGt, x.a, zero), da,
                    Node(e, Op::kSelect, Node(e, Op::kLt, x.a, zero), neg(da), Number(e, 0)));
        break;
      }
      case Op::kMax2:  // fmax(a, b): the first operand's on ties
      case Op::kMin2:
        if (da < 0 && db < 0) break;
        d[k] = Node(e, Op::kSelect, Node(e, x.op == Op::kMax2 ? Op::kGe : Op::kLe, x.a, x.b),
                    da >= 0 ? da : Number(e, 0), db >= 0 ? db : Number(e, 0));
        break;
      case Op::kSelect:  // the mask is piecewise constant
        if (db < 0 && dc < 0) break;
        d[k] = Node(e, Op::kSelect, x.a, db >= 0 ? db : Number(e, 0), dc >= 0 ? dc : Number(e, 0));
        break;
      default:  // numbers, indices, sizes, comparisons and logic: zero
        break;
    }
  }
  if (d[n - 1] < 0) return std::nullopt;
  return d[n - 1];
}

// ----- The adjoint block ---------------------------------------------------------------------
class Adjoint {
 public:
  Adjoint(const Block& f, const Analysis& a) : f_(f), a_(a) {}

  absl::StatusOr<AdjointBlock> Run() {
    g_.name = f_.name + "_grad";
    g_.indices = f_.indices;
    g_.sizes = f_.sizes;
    const int nt = static_cast<int>(f_.tensors.size());
    value_.assign(nt, -1);
    cotangent_.assign(nt, -1);
    adjoint_.assign(nt, -1);
    dim_symbol_.assign(nt, {});
    arg_of_.assign(nt, -1);
    KGRAD_RETURN_IF_ERROR(CheckUpdates());
    for (int t = 0; t < f_.num_inputs; ++t) Value(t);  // inputs bind the sizes
    for (int s = static_cast<int>(f_.statements.size()) - 1; s >= 0; --s) {
      KGRAD_RETURN_IF_ERROR(StatementAdjoint(s));
    }
    return Assemble();
  }

 private:
  struct Tensor {
    TensorDecl decl;
    AdjointSource source;  // inputs
  };

  // Updates are += of an output initialised by = or +=!, with no read between
  // its writes: every version of it then has the same adjoint.
  absl::Status CheckUpdates() {
    for (size_t s = 0; s < f_.statements.size(); ++s) {
      const Statement& st = f_.statements[s];
      if (st.init) continue;
      if (st.reducer != Reducer::kSum) {
        return StatementError(f_, st, absl::StrCat("differentiating the update ", ReducerSpelling(st.reducer, false),
                                                   " is not supported: reduce into a new output and combine "
                                                   "with fmax/fmin or *"));
      }
      size_t first = 0;
      for (size_t k = 0; k < s; ++k) {
        if (f_.statements[k].lhs == st.lhs && f_.statements[k].init) first = k;
      }
      const Statement& init = f_.statements[first];
      if (init.reducer != Reducer::kAssign && init.reducer != Reducer::kSum) {
        return StatementError(f_, st, absl::StrCat("differentiating += after ", ReducerSpelling(init.reducer, true),
                                                   " is not supported: reduce into a new output and add"));
      }
      for (size_t k = first + 1; k < s; ++k) {
        for (const Expr& e : f_.statements[k].rhs.nodes) {
          if (e.op == Op::kRead && e.tensor == st.lhs) {
            return StatementError(f_, f_.statements[k],
                                  absl::StrCat("reads '", f_.tensors[st.lhs].name,
                                               "' between its writes; differentiating that is not supported"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  std::string Fresh(std::string base) {
    auto taken = [&](const std::string& n) {
      for (const Tensor& t : g_tensors_) {
        if (t.decl.name == n) return true;
      }
      for (const TensorDecl& t : f_.tensors) {
        if (t.name == n) return true;
      }
      return std::find(g_.sizes.begin(), g_.sizes.end(), n) != g_.sizes.end() ||
             std::find(g_.indices.begin(), g_.indices.end(), n) != g_.indices.end();
    };
    if (!taken(base)) return base;
    for (int k = 2;; ++k) {
      std::string n = absl::StrCat(base, k);
      if (!taken(n)) return n;
    }
  }

  int NewIndex(const std::string& hint) {
    g_.indices.push_back(Fresh(hint));
    return static_cast<int>(g_.indices.size()) - 1;
  }

  // The adjoint block's size for dim p of forward tensor t.
  int DimSymbol(int t, int p) {
    if (t < f_.num_inputs) return f_.tensors[t].dims[p];
    std::vector<int>& syms = dim_symbol_[t];
    if (syms.empty()) {
      for (size_t q = 0; q < a_.dim_bounds[t].size(); ++q) {
        const Bound& b = a_.dim_bounds[t][q];
        if (b.size >= 0 && b.offset == 0) {
          syms.push_back(b.size);
          continue;
        }
        std::string hint = absl::StrCat(f_.tensors[t].name, "_", q);
        for (const Statement& s : f_.statements) {
          if (s.lhs == t) {
            hint = f_.indices[s.lhs_indices[q]];
            for (char& ch : hint) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
            break;
          }
        }
        g_.sizes.push_back(Fresh(hint));
        syms.push_back(static_cast<int>(g_.sizes.size()) - 1);
      }
    }
    return syms[p];
  }

  TensorDecl Declared(int t, std::string name) {
    TensorDecl d;
    d.name = std::move(name);
    d.input = true;
    d.dtype = a_.dtype;
    for (size_t p = 0; p < a_.shapes[t].size(); ++p) d.dims.push_back(DimSymbol(t, static_cast<int>(p)));
    return d;
  }
  int AddTensor(TensorDecl d, AdjointSource src) {
    g_tensors_.push_back(Tensor{std::move(d), src});
    return static_cast<int>(g_tensors_.size()) - 1;
  }
  // The forward value of t, an input of the adjoint block.
  int Value(int t) {
    if (value_[t] >= 0) return value_[t];
    bool in = t < f_.num_inputs;
    TensorDecl d = in ? f_.tensors[t] : Declared(t, f_.tensors[t].name);
    return value_[t] = AddTensor(std::move(d), AdjointSource{in ? AdjointSource::kInput : AdjointSource::kOutput,
                                                            in ? t : t - f_.num_inputs});
  }
  int Cotangent(int t) {
    if (cotangent_[t] >= 0) return cotangent_[t];
    return cotangent_[t] = AddTensor(Declared(t, Fresh(f_.tensors[t].name + "x")),
                                     AdjointSource{AdjointSource::kCotangent, t - f_.num_inputs});
  }
  // `like`: the forward tensor it is shaped as (its dims are kept for
  // StatedByReads; outputs print without them).
  int NewOutput(const std::string& name, int like) {
    TensorDecl d;
    d.name = Fresh(name);
    for (size_t p = 0; p < a_.shapes[like].size(); ++p) d.dims.push_back(DimSymbol(like, static_cast<int>(p)));
    return AddTensor(std::move(d), AdjointSource{AdjointSource::kInput, -1});
  }
  // The complete adjoint of forward output t (its cotangent, plus what later
  // statements added).
  int AdjointOf(int t) { return adjoint_[t] >= 0 ? adjoint_[t] : Cotangent(t); }

  // A forward expression with its reads pointing at the adjoint block's values.
  ExprList Remap(const ExprList& e) {
    ExprList out = e;
    for (Expr& x : out.nodes) {
      if (x.op == Op::kRead) x.tensor = Value(x.tensor);
    }
    return out;
  }

  // Statement s's range [lo, hi) of its domain position p, symbolically.
  absl::StatusOr<std::pair<Bound, Bound>> Range(int s, int p) {
    const Domain& d = a_.domains[s];
    const Statement& st = f_.statements[s];
    Bound lo = d.lo_bound[p], hi = d.hi_bound[p];
    if (p < d.num_lhs && (hi.size == kNotSymbolic || lo.size == kNotSymbolic)) {
      bool explicit_range = false;
      for (const Condition& c : st.where) explicit_range |= c.expr == Plain(d.indices[p]);
      if (!explicit_range) return std::make_pair(Bound{-1, 0}, Bound{DimSymbol(st.lhs, p), 0});
    }
    if (hi.size == kNotSymbolic || lo.size == kNotSymbolic) {
      const std::string& n = f_.indices[d.indices[p]];
      return StatementError(f_, st, absl::StrCat("the adjoint needs the range of index ", n,
                                                 " in the block's sizes; add `where ", n, " in a:b`"));
    }
    return std::make_pair(lo, hi);
  }

  int BoundExpr(ExprList& l, const Bound& b) {
    if (b.size < 0) return Number(l, static_cast<double>(b.offset));
    int s = Leaf(l, Op::kSize, b.size);
    if (b.offset == 0) return s;
    return Node(l, b.offset > 0 ? Op::kAdd : Op::kSub, s, Number(l, static_cast<double>(std::abs(b.offset))));
  }

  // lin(r): the reduction point's row-major number; `count` gets R.
  absl::StatusOr<int> Linear(ExprList& l, int s, int* count) {
    const Domain& d = a_.domains[s];
    int lin = -1, total = -1;
    for (int p = d.num_lhs; p < static_cast<int>(d.indices.size()); ++p) {
      KGRAD_ASSIGN_OR_RETURN(auto range, Range(s, p));
      bool from_zero = range.first.size == -1 && range.first.offset == 0;
      int size = BoundExpr(l, range.second), at = Leaf(l, Op::kIndex, d.indices[p]);
      if (!from_zero) {
        size = Node(l, Op::kSub, size, BoundExpr(l, range.first));
        at = Node(l, Op::kSub, at, BoundExpr(l, range.first));
      }
      lin = lin < 0 ? at : Plus(l, Node(l, Op::kMul, lin, size), at);
      total = total < 0 ? size : Node(l, Op::kMul, total, size);
    }
    *count = total;
    return lin;
  }

  std::vector<Affine> LhsArgs(const Statement& st) {
    std::vector<Affine> args;
    for (int id : st.lhs_indices) args.push_back(Plain(id));
    return args;
  }

  // F(l, r), the seed of statement s's reducer, in `l`.
  absl::StatusOr<int> Seed(ExprList& l, int s, const ExprList& rhs) {
    const Statement& st = f_.statements[s];
    const Domain& d = a_.domains[s];
    int lx = Read(l, AdjointOf(st.lhs), LhsArgs(st));
    bool reduces = static_cast<int>(d.indices.size()) > d.num_lhs;
    if (st.reducer == Reducer::kAssign || st.reducer == Reducer::kSum || !reduces) return lx;
    if (st.reducer == Reducer::kProd) {  // Lx * L / E
      int e = Append(l, rhs);
      return Node(l, Op::kDiv, Node(l, Op::kMul, lx, Read(l, Value(st.lhs), LhsArgs(st))), e);
    }
    KGRAD_ASSIGN_OR_RETURN(int arg, ArgStatement(s, rhs));
    int count;
    KGRAD_ASSIGN_OR_RETURN(int lin, Linear(l, s, &count));
    return Node(l, Op::kSelect, Node(l, Op::kEq, lin, Read(l, arg, LhsArgs(st))), lx, Number(l, 0));
  }

  // L_arg(l) min=! (E == L(l)) ? lin(r) : R, with the forward statement's domain.
  absl::StatusOr<int> ArgStatement(int s, const ExprList& rhs) {
    const Statement& st = f_.statements[s];
    int arg = NewOutput(f_.tensors[st.lhs].name + "_arg", st.lhs);
    arg_of_[st.lhs] = arg;
    Statement out;
    out.lhs = arg;
    out.lhs_indices = st.lhs_indices;
    out.reducer = Reducer::kMin;
    out.init = true;
    ExprList& l = out.rhs;
    int e = Append(l, rhs);
    int count;
    KGRAD_ASSIGN_OR_RETURN(int lin, Linear(l, s, &count));
    Node(l, Op::kSelect, Node(l, Op::kEq, e, Read(l, Value(st.lhs), LhsArgs(st))), lin, count);
    KGRAD_RETURN_IF_ERROR(ForwardRanges(s, {}, out));
    for (const Condition& c : st.where) {
      if (!c.expr.IsPlainIndex()) out.where.push_back(c);
    }
    out.rhs = Prune(out.rhs);
    DropUnused(out);
    g_statements_.push_back(std::move(out));
    return arg;
  }

  static int Append(ExprList& l, const ExprList& e) {
    const int base = static_cast<int>(l.nodes.size());
    for (Expr x : e.nodes) {
      for (int* c : {&x.a, &x.b, &x.c}) {
        if (*c >= 0) *c += base;
      }
      l.Add(std::move(x));
    }
    return l.root();
  }

  // `where` ranges for the forward domain's indices that `out` uses and that are
  // not in `skip`.
  absl::Status ForwardRanges(int s, const std::vector<bool>& skip, Statement& out) {
    const Domain& d = a_.domains[s];
    for (size_t p = 0; p < d.indices.size(); ++p) {
      int id = d.indices[p];
      if (!skip.empty() && skip[id]) continue;
      KGRAD_ASSIGN_OR_RETURN(auto range, Range(s, static_cast<int>(p)));
      out.where.push_back(Condition{Plain(id), range.first, range.second});
    }
    return absl::OkStatus();
  }

  absl::Status StatementAdjoint(int s) {
    const Statement& st = f_.statements[s];
    ExprList rhs = Remap(st.rhs);
    std::vector<const Expr*> keys;
    for (const Expr& e : rhs.nodes) {
      if (e.op != Op::kRead) continue;
      bool seen = false;
      for (const Expr* k : keys) seen |= k->tensor == e.tensor && k->args == e.args;
      if (!seen) keys.push_back(&e);
    }
    std::optional<ExprList> seed;  // built once per statement (the arg statement too)
    for (const Expr* key : keys) {
      int forward = ForwardTensor(key->tensor);
      ExprList c;
      if (!seed) {
        seed.emplace();
        KGRAD_RETURN_IF_ERROR(Seed(*seed, s, rhs).status());
      }
      Append(c, *seed);
      int f = c.root();
      Append(c, rhs);
      std::optional<int> d = Derivative(c, *key);
      if (!d) continue;
      int root = Mul(c, f, *d);
      KGRAD_RETURN_IF_ERROR(Contribution(s, forward, key->args, Prune(c, root)));
    }
    return absl::OkStatus();
  }

  int ForwardTensor(int g) const {
    for (size_t t = 0; t < value_.size(); ++t) {
      if (value_[t] == g) return static_cast<int>(t);
    }
    return -1;
  }

  // Xx(f(l, r)) += C(l, r), with the written index made plain.
  absl::Status Contribution(int s, int x, const std::vector<Affine>& args, ExprList c) {
    const Statement& st = f_.statements[s];
    const Domain& d = a_.domains[s];
    const size_t room = g_.indices.size() + args.size();
    std::vector<std::optional<Affine>> map(room);
    std::vector<bool> taken(room, false);  // a left index or solved
    std::vector<int> lhs(args.size(), -1);
    std::vector<Condition> conditions;
    for (size_t j = 0; j < args.size(); ++j) {
      if (!args[j].IsPlainIndex() || taken[args[j].terms[0].first]) continue;
      lhs[j] = args[j].terms[0].first;
      taken[lhs[j]] = true;
    }
    for (size_t j = 0; j < args.size(); ++j) {
      if (lhs[j] >= 0) continue;
      lhs[j] = NewIndex("y");
      hints_.push_back({lhs[j], DimHint(x, static_cast<int>(j))});
      taken[lhs[j]] = true;
      Affine a = Apply(args[j], map);
      int v = Widest(s, a, taken);
      if (v < 0) {  // y_j == a: (num - div * y_j) in 0:1
        Affine eq = a;
        eq.divisor = 1;
        eq.terms.push_back({lhs[j], -a.divisor});
        Normalize(eq);
        conditions.push_back(Condition{eq, Bound{-1, 0}, Bound{-1, 1}});
        continue;
      }
      // a = (c v + rest) / div = y  =>  v = (div y - rest) / c
      int64_t cv = a.Coefficient(v);
      Affine sol;
      for (const auto& [id, coef] : a.terms) {
        if (id != v) sol.terms.push_back({id, -coef});
      }
      sol.terms.push_back({lhs[j], a.divisor});
      sol.constant = -a.constant;
      sol.divisor = cv;
      Normalize(sol);
      for (auto& m : map) {
        if (m) *m = Substitute(*m, v, sol);
      }
      map[v] = sol;
      taken[v] = true;
      int p = d.position[v];
      KGRAD_ASSIGN_OR_RETURN(auto range, Range(s, p));
      conditions.push_back(Condition{Plain(v), range.first, range.second});  // mapped below
    }
    Statement out;
    out.lhs_indices = lhs;
    out.reducer = Reducer::kSum;
    // A left index the forward ranged over less than the written dim keeps its
    // forward range as a second (restricting) range.
    for (size_t j = 0; j < lhs.size(); ++j) {
      int v = lhs[j];
      if (v >= static_cast<int>(f_.indices.size()) || d.position[v] < 0) continue;
      KGRAD_ASSIGN_OR_RETURN(auto range, Range(s, d.position[v]));
      Bound dim{DimSymbol(x, static_cast<int>(j)), 0};
      bool same = range.first.size == -1 && range.first.offset == 0 && range.second.size == dim.size &&
                  range.second.offset == 0;
      if (!same) conditions.push_back(Condition{Plain(v), range.first, range.second});
    }
    std::vector<bool> skip(g_.indices.size(), false);
    for (int id : lhs) skip[id] = true;
    for (size_t v = 0; v < map.size() && v < skip.size(); ++v) {
      if (map[v]) skip[v] = true;
    }
    KGRAD_RETURN_IF_ERROR(ForwardRanges(s, skip, out));
    for (const Condition& w : st.where) {
      if (!w.expr.IsPlainIndex()) conditions.push_back(w);
    }
    for (Condition& w : conditions) {
      w.expr = Apply(w.expr, map);
      out.where.push_back(w);
    }
    out.rhs = Substituted(c, map);
    return Emit(x, std::move(out));
  }

  static Affine Apply(const Affine& a, const std::vector<std::optional<Affine>>& map) {
    Affine r = a;
    for (size_t v = 0; v < map.size(); ++v) {
      if (map[v]) r = Substitute(r, static_cast<int>(v), *map[v]);
    }
    Normalize(r);
    return r;
  }

  // The index of `a` to solve for: not yet a left index or solved, widest range
  // (unknown counts as widest; ties: the forward's left indices).
  int Widest(int s, const Affine& a, const std::vector<bool>& taken) {
    const Domain& d = a_.domains[s];
    int best = -1;
    int64_t best_size = -1;
    for (const auto& [id, coef] : a.terms) {
      if (id < static_cast<int>(taken.size()) && taken[id]) continue;
      int p = id < static_cast<int>(d.position.size()) ? d.position[id] : -1;
      if (p < 0) continue;
      int64_t size = (d.hi[p] == kUnknownDim || d.lo[p] == kUnknownDim) ? INT64_MAX : d.hi[p] - d.lo[p];
      if (p < d.num_lhs && size != INT64_MAX) size += 1;  // ties to the left side
      if (size > best_size) {
        best = id;
        best_size = size;
      }
    }
    return best;
  }

  // c with reads' indices and index values rewritten by `map`.
  ExprList Substituted(const ExprList& c, const std::vector<std::optional<Affine>>& map) {
    ExprList out;
    std::vector<int> at(c.nodes.size());
    for (size_t k = 0; k < c.nodes.size(); ++k) {
      Expr x = c.nodes[k];
      for (int* ch : {&x.a, &x.b, &x.c}) {
        if (*ch >= 0) *ch = at[*ch];
      }
      if (x.op == Op::kRead) {
        for (Affine& a : x.args) a = Apply(a, map);
      }
      if (x.op == Op::kIndex && x.id < static_cast<int>(map.size()) && map[x.id]) {
        at[k] = AffineValue(out, *map[x.id]);
        continue;
      }
      at[k] = out.Add(std::move(x));
    }
    return out;
  }

  static int AffineValue(ExprList& l, const Affine& a) {
    int sum = -1;
    for (const auto& [id, coef] : a.terms) {
      int t = Leaf(l, Op::kIndex, id);
      if (coef != 1) t = Node(l, Op::kMul, Number(l, static_cast<double>(coef)), t);
      sum = sum < 0 ? t : Plus(l, sum, t);
    }
    if (a.constant != 0 || sum < 0) {
      int k = Number(l, static_cast<double>(a.constant));
      sum = sum < 0 ? k : Plus(l, sum, k);
    }
    if (a.divisor != 1) sum = Node(l, Op::kDiv, sum, Number(l, static_cast<double>(a.divisor)));
    return sum;
  }

  // A read whose index the solution rewrote is bounded by a `where` on the same
  // expression (it held over the forward domain, so the domain is unchanged):
  // the analysis then sees it in bounds.
  void GuardReads(Statement& out) {
    for (const Expr& e : out.rhs.nodes) {
      if (e.op != Op::kRead) continue;
      for (size_t k = 0; k < e.args.size(); ++k) {
        const Affine& a = e.args[k];
        if (a.IsPlainIndex() || a.terms.empty()) continue;
        bool bounded = false;
        for (const Condition& w : out.where) bounded |= w.expr == a;
        if (bounded) continue;
        bool solved = false;
        for (const auto& [id, coef] : a.terms) solved |= id >= static_cast<int>(f_.indices.size());
        if (!solved) continue;
        Bound hi = DimBoundOf(e.tensor, static_cast<int>(k));
        out.where.push_back(Condition{a, Bound{-1, 0}, hi});
      }
    }
  }

  Bound DimBoundOf(int g_tensor, int k) {
    return Bound{g_tensors_[g_tensor].decl.dims[k], 0};
  }

  // Ranges of indices the statement no longer uses, and ranges an unguarded
  // plain read of a dim with the same size states anyway.
  void DropUnused(Statement& out) {
    std::vector<bool> used(g_.indices.size(), false);
    for (int id : out.lhs_indices) used[id] = true;
    for (const Expr& e : out.rhs.nodes) {
      if (e.op == Op::kIndex) used[e.id] = true;
      for (const Affine& a : e.args) {
        for (const auto& t : a.terms) used[t.first] = true;
      }
    }
    for (const Condition& w : out.where) {
      if (w.expr.IsPlainIndex()) continue;
      for (const auto& t : w.expr.terms) used[t.first] = true;
    }
    std::vector<Condition> kept;
    for (const Condition& w : out.where) {
      if (w.expr.IsPlainIndex() && !used[w.expr.terms[0].first]) continue;
      if (w.expr.IsPlainIndex() && PlainConditions(out, w.expr.terms[0].first) == 1 && StatedByReads(out, w)) {
        continue;
      }
      kept.push_back(w);
    }
    out.where = std::move(kept);
  }

  static int PlainConditions(const Statement& out, int id) {
    int n = 0;
    for (const Condition& w : out.where) n += w.expr.IsPlainIndex() && w.expr.terms[0].first == id;
    return n;
  }

  // Every unguarded read naming index w's variable reads it plainly in a dim of
  // size w.hi, and w.lo is 0: TC's inference gives the same range.
  bool StatedByReads(const Statement& out, const Condition& w) {
    if (w.lo.size != -1 || w.lo.offset != 0 || w.hi.size < 0 || w.hi.offset != 0) return false;
    int id = w.expr.terms[0].first;
    bool any = false;
    for (const Expr& e : out.rhs.nodes) {
      if (e.op == Op::kIndex && e.id == id) continue;
      for (size_t k = 0; k < e.args.size(); ++k) {
        const Affine& a = e.args[k];
        if (a.Coefficient(id) == 0) continue;
        bool guarded = false;
        for (const Condition& c : out.where) guarded |= !c.expr.IsPlainIndex() && c.expr == a;
        if (guarded) continue;
        if (!a.IsPlainIndex()) return false;
        const TensorDecl& d = g_tensors_[e.tensor].decl;
        if (d.dims.empty() || d.dims[k] != w.hi.size) return false;
        any = true;
      }
    }
    return any;
  }

  // Adds `out` to forward tensor x's adjoint: the first contribution to an input
  // initialises it; a forward output's starts from its cotangent.
  absl::Status Emit(int x, Statement out) {
    out.init = adjoint_[x] < 0 && x < f_.num_inputs;
    if (adjoint_[x] < 0) {
      bool output = x >= f_.num_inputs;
      adjoint_[x] = NewOutput(f_.tensors[x].name + (output ? "x_total" : "x"), x);
      if (output) {
        Statement copy;
        copy.lhs = adjoint_[x];
        copy.lhs_indices = out.lhs_indices;
        copy.reducer = Reducer::kAssign;
        std::vector<Affine> idx;
        for (int id : out.lhs_indices) idx.push_back(Plain(id));
        Read(copy.rhs, Cotangent(x), idx);
        DimRanges(x, copy);
        DropUnused(copy);
        g_statements_.push_back(std::move(copy));
      }
    }
    out.lhs = adjoint_[x];
    if (out.init) DimRanges(x, out);  // an update takes the written tensor's shape
    GuardReads(out);
    DropUnused(out);
    NameNewIndices(out);
    g_statements_.push_back(std::move(out));
    return absl::OkStatus();
  }

  // The written dim's size in lower case ("H" -> "h").
  std::string DimHint(int x, int j) {
    std::string hint = g_.sizes[DimSymbol(x, j)];
    for (char& ch : hint) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return hint.empty() || !std::isalpha(static_cast<unsigned char>(hint[0])) ? "y" : hint;
  }

  // Names the indices solving introduced after their written dims; a name may
  // repeat across statements (each statement's indices are its own), never
  // within one, nor clash with a tensor or size.
  void NameNewIndices(const Statement& out) {
    std::vector<int> ids(out.lhs_indices.begin(), out.lhs_indices.end());
    auto add = [&](const Affine& a) {
      for (const auto& t : a.terms) ids.push_back(t.first);
    };
    for (const Expr& e : out.rhs.nodes) {
      if (e.op == Op::kIndex) ids.push_back(e.id);
      for (const Affine& a : e.args) add(a);
    }
    for (const Condition& w : out.where) add(w.expr);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (const auto& entry : hints_) {
      const int id = entry.first;
      const std::string& hint = entry.second;
      if (!std::binary_search(ids.begin(), ids.end(), id)) continue;
      auto clashes = [&](const std::string& n) {
        for (int other : ids) {
          if (other != id && g_.indices[other] == n) return true;
        }
        for (const Tensor& t : g_tensors_) {
          if (t.decl.name == n) return true;
        }
        return std::find(g_.sizes.begin(), g_.sizes.end(), n) != g_.sizes.end();
      };
      std::string name = hint;
      for (int k = 2; clashes(name); ++k) name = absl::StrCat(hint, k);
      g_.indices[id] = name;
    }
    hints_.clear();
  }

  // `where y in 0:dim` for each left index, first, so that they are the ranges.
  void DimRanges(int x, Statement& out) {
    std::vector<Condition> ranges;
    for (size_t j = 0; j < out.lhs_indices.size(); ++j) {
      ranges.push_back(Condition{Plain(out.lhs_indices[j]), Bound{-1, 0}, Bound{DimSymbol(x, static_cast<int>(j)), 0}});
    }
    out.where.insert(out.where.begin(), ranges.begin(), ranges.end());
  }

  // The block: inputs first (forward inputs, outputs, cotangents, in creation
  // order), then outputs; tensor ids renumbered.
  absl::StatusOr<AdjointBlock> Assemble() {
    AdjointBlock r;
    std::vector<int> order, at(g_tensors_.size(), -1);
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t t = 0; t < g_tensors_.size(); ++t) {
        if (g_tensors_[t].decl.input == (pass == 0)) order.push_back(static_cast<int>(t));
      }
    }
    for (int t : order) {
      at[t] = static_cast<int>(g_.tensors.size());
      g_.tensors.push_back(g_tensors_[t].decl);
      if (!g_.tensors.back().input) g_.tensors.back().dims.clear();
      if (g_tensors_[t].decl.input) r.sources.push_back(g_tensors_[t].source);
    }
    g_.num_inputs = static_cast<int>(r.sources.size());
    if (g_.num_inputs == static_cast<int>(g_.tensors.size())) {
      return BlockError(f_, "no input is differentiable: every read is under a comparison");
    }
    int number = 0;
    for (Statement& s : g_statements_) {
      s.lhs = at[s.lhs];
      for (Expr& e : s.rhs.nodes) {
        if (e.op == Op::kRead) e.tensor = at[e.tensor];
      }
      s.number = ++number;
    }
    g_.statements = std::move(g_statements_);
    for (Statement& s : g_.statements) s.text = PrintStatement(g_, s);
    r.input_adjoint.assign(f_.num_inputs, -1);
    for (int t = 0; t < f_.num_inputs; ++t) {
      if (adjoint_[t] >= 0) r.input_adjoint[t] = at[adjoint_[t]] - g_.num_inputs;
    }
    r.block = std::move(g_);
    return r;
  }

  const Block& f_;
  const Analysis& a_;
  Block g_;
  std::vector<Tensor> g_tensors_;
  std::vector<Statement> g_statements_;
  std::vector<int> value_, cotangent_, adjoint_;
  std::vector<int> arg_of_;
  std::vector<std::pair<int, std::string>> hints_;  // new index, its name's hint
  std::vector<std::vector<int>> dim_symbol_;
};

}  // namespace

absl::StatusOr<AdjointBlock> DeriveAdjoint(const Block& forward, const Analysis& a) {
  return Adjoint(forward, a).Run();
}

}  // namespace tc
}  // namespace kgrad
