#include "backends/cpu/tc_program.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <utility>
#include <vector>

#include "backends/cpu/tc_positions.h"
#include "backends/cpu/tc_rows.h"

namespace kgrad {
namespace cpu {
namespace {

using tc::Op;

// Builds the forms one at a time (coefficients per form), then lays them out by position.
class FormBuilder {
 public:
  explicit FormBuilder(const tc::Domain& d) : d_(d) {}
  int Add(const tc::Affine& a, int64_t scale) {
    std::vector<int64_t> c(d_.indices.size(), 0);
    for (const auto& [id, k] : a.terms) c[d_.position[id]] += scale * k;
    return forms_.Add(std::move(c), scale * a.constant);
  }
  int AddRaw(std::vector<int64_t> c, int64_t constant) { return forms_.Add(std::move(c), constant); }
  std::vector<int64_t>& coef(int f) { return forms_.coef[f]; }
  const std::vector<int64_t>& coef(int f) const { return forms_.coef[f]; }
  int64_t& constant(int f) { return forms_.constant[f]; }
  TcForms& forms() { return forms_; }

  void Finish(TcProgram& p) const {
    const std::vector<std::vector<int64_t>>& coef_ = forms_.coef;
    p.num_forms = static_cast<int>(coef_.size());
    p.moves.assign(p.num_pos, {});
    p.vcoef.assign(p.num_forms, 0);
    p.ocoef.assign(p.num_forms, 0);
    p.pcoef.assign(p.num_forms, 0);
    for (int f = 0; f < p.num_forms; ++f) {
      for (int q = 0; q < p.num_pos; ++q) {
        if (coef_[f][q] != 0) p.moves[q].push_back({f, coef_[f][q]});
      }
      if (p.vp >= 0) p.vcoef[f] = coef_[f][p.vp];
      if (p.vo >= 0) p.ocoef[f] = coef_[f][p.vo];
      if (p.pair >= 0) p.pcoef[f] = coef_[f][p.pair];
    }
    p.constant = forms_.constant;
  }

 private:
  const tc::Domain& d_;
  TcForms forms_;
};

// Step 1. The forms of the output, the reads and the guards.
void CompileForms(const TcStatement& s, absl::Span<const Shape> strides, FormBuilder& fb,
                  TcProgram& p) {
  const tc::Domain& d = *s.domain;
  p.out_form = fb.AddRaw(s.out_strides, s.out_offset);
  for (const tc::Expr& e : s.rhs->nodes) {
    if (e.op != Op::kRead) continue;
    TcReadPlan r;
    r.tensor = e.tensor;
    r.form = fb.AddRaw(std::vector<int64_t>(p.num_pos, 0), 0);
    const Shape& stride = strides[e.tensor];
    for (size_t k = 0; k < e.args.size(); ++k) {
      const tc::Affine& a = e.args[k];
      if (a.divisor == 1) {
        for (const auto& [id, c] : a.terms) fb.coef(r.form)[d.position[id]] += c * stride[k];
        fb.constant(r.form) += a.constant * stride[k];
      } else {
        const int64_t sign = a.divisor < 0 ? -1 : 1;
        const int64_t divisor = sign * a.divisor;
        int shift = -1;
        if ((divisor & (divisor - 1)) == 0) {
          shift = 0;
          while ((int64_t{1} << shift) < divisor) ++shift;
        }
        r.divided.push_back({fb.Add(a, sign), divisor, stride[k], shift});
      }
    }
    p.reads.push_back(std::move(r));
  }
  for (const tc::Guard& g : d.guards) {
    const int64_t sign = g.divisor < 0 ? -1 : 1;
    TcGuardPlan gp;
    gp.form = fb.Add(g.numerator, sign);
    gp.divisor = sign * g.divisor;
    if (g.lo != tc::kNoBound) gp.lo = g.lo * gp.divisor;
    if (g.hi != tc::kNoBound) gp.hi = g.hi * gp.divisor;
    p.guards.push_back(gp);
  }
}

// How well position q serves as the vector index: long enough to fill lanes
// (with the rows of its row index), then the most reads (and the output)
// contiguous along it, then a left-side index (no reduction across the lanes),
// the last one, the longest.
struct VectorScore {
  bool filled;
  int contiguity;
  bool lhs, last_lhs;
  int64_t lanes;
  bool operator<(const VectorScore& o) const {
    if (filled != o.filled) return filled < o.filled;
    if (contiguity != o.contiguity) return contiguity < o.contiguity;
    if (lhs != o.lhs) return lhs < o.lhs;
    if (last_lhs != o.last_lhs) return last_lhs < o.last_lhs;
    return lanes < o.lanes;
  }
};

// The rows a chunk of vector index vp takes of left-side index q (q not
// named by a guard or a divided argument together with vp, so that every row
// keeps the same lanes; the rows that pass the guards naming it are a
// progression, and each read's rows a fixed stride apart), or 0 when q cannot
// be its row index.
int64_t RowsOf(int q, int vp, const FormBuilder& fb, const TcProgram& p) {
  if (q == vp || p.hi[q] - p.lo[q] < 2) return 0;
  auto apart = [&](int form) { return fb.coef(form)[q] == 0 || fb.coef(form)[vp] == 0; };
  for (const TcGuardPlan& g : p.guards) {
    if (!apart(g.form)) return 0;
  }
  for (const TcReadPlan& r : p.reads) {
    for (const TcReadPlan::Divided& dv : r.divided) {
      if (!apart(dv.form)) return 0;
    }
  }
  // A chunk's nodes hold the lanes and rows that pass the guards: at most
  // every lp-th lane and rp-th row, lp and rp the periods of the divisibility
  // guards along vp and q.
  int64_t lp = 1, rp = 1;
  for (const TcGuardPlan& g : p.guards) {
    const std::vector<int64_t>& c = fb.coef(g.form);
    const int64_t k = c[vp] != 0 ? c[vp] : c[q];
    if (g.divisor == 1 || k == 0) continue;
    int64_t& period = c[vp] != 0 ? lp : rp;
    period = std::lcm(period, g.divisor / std::gcd(std::abs(k), g.divisor));
  }
  const int64_t passing = (p.hi[vp] - p.lo[vp] + lp - 1) / lp;
  return std::min(p.hi[q] - p.lo[q], kTcLanes / passing * rp);
}

// The row index for vector index vp when that is a short left-side index: the
// innermost other left-side index that can be (RowsOf), unless an outer one
// fills at least twice the lanes (a pooled image's rows merged across planes
// beside a window index of 2 values): then the one filling the most. -1 when
// there is none.
int RowIndexFor(int vp, const FormBuilder& fb, const TcProgram& p, int64_t* rows) {
  const int64_t width = p.hi[vp] - p.lo[vp];
  if (vp >= p.num_lhs || width <= 0 || width > kTcLanes / 2) return -1;
  int inner = -1, best = -1;
  int64_t inner_rows = 0, best_rows = 0;
  for (int q = p.num_lhs - 1; q >= 0; --q) {
    const int64_t r = RowsOf(q, vp, fb, p);
    if (r == 0) continue;
    if (inner < 0) inner = q, inner_rows = r;
    if (r > best_rows) best = q, best_rows = r;
  }
  if (inner < 0) return -1;
  const bool outer = best_rows >= 2 * inner_rows;
  *rows = outer ? best_rows : inner_rows;
  return outer ? best : inner;
}

// Step 2. The vector index (and the row index that fills its chunks).
void ChooseVectorIndex(const FormBuilder& fb, TcProgram& p) {
  std::vector<int64_t> lanes(p.num_pos);
  int64_t longest = 0;
  for (int q = 0; q < p.num_pos; ++q) {
    int64_t rows = 1;
    RowIndexFor(q, fb, p, &rows);
    lanes[q] = std::min<int64_t>(std::max<int64_t>(p.hi[q] - p.lo[q], 0), kTcLanes) * rows;
    longest = std::max(longest, lanes[q]);
  }
  VectorScore best_score{};
  for (int q = 0; q < p.num_pos; ++q) {
    // Runs of a few elements are worth no more than strided ones.
    const bool runs = p.hi[q] - p.lo[q] >= 8;
    int contiguity = 0;
    auto count = [&](int64_t step) {
      if (step != 0) contiguity += runs && (step == 1 || step == -1) ? 1 : -1;
    };
    for (const TcReadPlan& r : p.reads) {
      int64_t step = fb.coef(r.form)[q];
      for (const TcReadPlan::Divided& dv : r.divided) {
        if (fb.coef(dv.form)[q] != 0) step = 2;  // strided whatever its value
      }
      count(step);
    }
    if (q < p.num_lhs) count(fb.coef(p.out_form)[q]);
    VectorScore score{lanes[q] >= 16 || lanes[q] == longest, contiguity, q < p.num_lhs,
                      q == p.num_lhs - 1, lanes[q]};
    if (p.vp < 0 || best_score < score) {
      p.vp = q;
      best_score = score;
    }
  }
  if (p.vp >= 0) p.vo = RowIndexFor(p.vp, fb, p, &p.rows);
}

bool IsComparison(Op op) {
  return op == Op::kLt || op == Op::kLe || op == Op::kGt || op == Op::kGe || op == Op::kEq ||
         op == Op::kNe;
}

// Node id -> its read's index in p.reads (reads are in node order), else -1.
std::vector<int> ReadOfNode(const tc::ExprList& rhs) {
  std::vector<int> read(rhs.nodes.size(), -1);
  int r = 0;
  for (size_t i = 0; i < rhs.nodes.size(); ++i) {
    if (rhs.nodes[i].op == Op::kRead) read[i] = r++;
  }
  return read;
}

// The pair select of `s` with pair index k (TcPairSelect), or none (a = -1):
// the root a select of a comparison of a read in pairs and a read that steps
// along the vector index only (or not at all), X and Y of no read and of no
// position but k and those constant over a chunk.
TcPairSelect PairSelectOf(const TcStatement& s, const FormBuilder& fb, const TcProgram& p, int k) {
  const tc::ExprList& rhs = *s.rhs;
  const tc::Expr& root = rhs.nodes[rhs.root()];
  if (root.op != Op::kSelect || !IsComparison(rhs.nodes[root.a].op)) return {};
  const tc::Expr& cmp = rhs.nodes[root.a];
  const std::vector<int> read = ReadOfNode(rhs);
  auto kind = [&](int node) {  // 2: in pairs, 1: one per lane, 0: uniform, -1: neither
    if (read[node] < 0) return -1;
    const TcReadPlan& r = p.reads[read[node]];
    if (!r.divided.empty()) return -1;
    const std::vector<int64_t>& c = fb.coef(r.form);
    if (c[k] == 1 && c[p.vp] == p.hi[k] - p.lo[k]) return 2;
    if (c[k] != 0) return -1;
    return c[p.vp] != 0 || (p.vo >= 0 && c[p.vo] != 0) ? 1 : 0;
  };
  TcPairSelect ps;
  ps.op = cmp.op;
  if (kind(cmp.a) == 2 && kind(cmp.b) >= 0) {
    ps.a = cmp.a, ps.b = cmp.b;
  } else if (kind(cmp.b) == 2 && kind(cmp.a) >= 0) {
    ps.a = cmp.b, ps.b = cmp.a;
    ps.op = tc_rows::MirroredComparison(cmp.op);
  } else {
    return {};
  }
  for (int v : {root.b, root.c}) {
    const std::vector<bool> in = rhs.Reaches(v);
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i]) continue;
      const tc::Expr& e = rhs.nodes[i];
      if (e.op == Op::kRead) return {};
      if (e.op == Op::kIndex) {
        const int q = p.origin[s.domain->position[e.id]];
        if (q == p.vp || q == p.vo) return {};
      }
    }
  }
  ps.x = root.b;
  ps.y = root.c;
  return ps;
}

// Step 2b. The pair index (tc_program.h): the innermost reduction index of a
// few values, named by no guard and no divided argument, with no guard along
// the vector index (the lanes stay whole), when a read steps by 1 along it and
// by its range along the vector index; and the pair select, if the root is one.
void ChoosePairIndex(const TcStatement& s, const FormBuilder& fb, TcProgram& p) {
  if (p.vp < 0 || p.vp >= p.num_lhs || s.reducer == tc::Reducer::kAssign) return;
  int k = -1;
  for (int q = p.num_lhs; q < p.num_pos; ++q) {
    if (p.hi[q] - p.lo[q] > 1) k = q;
  }
  if (k < 0) return;
  const int64_t size = p.hi[k] - p.lo[k], width = p.hi[p.vp] - p.lo[p.vp];
  if (size > 8 || width * size > kTcLanes) return;
  for (const TcGuardPlan& g : p.guards) {
    if (fb.coef(g.form)[k] != 0 || fb.coef(g.form)[p.vp] != 0) return;
  }
  const TcPairSelect ps = PairSelectOf(s, fb, p, k);
  const std::vector<int> read = ReadOfNode(*s.rhs);
  bool contiguous = false;
  for (size_t node = 0; node < read.size(); ++node) {
    if (read[node] < 0) continue;
    const TcReadPlan& r = p.reads[read[node]];
    for (const TcReadPlan::Divided& dv : r.divided) {
      if (fb.coef(dv.form)[k] != 0) return;
    }
    // A read along the lanes but not in pairs (each value twice, say) costs
    // more than the fusion saves (measured on max pooling's adjoint), unless
    // it is the pair select's B, read in place.
    const std::vector<int64_t>& c = fb.coef(r.form);
    const bool pairs = c[k] == 1 && c[p.vp] == size && r.divided.empty();
    const bool select_b = static_cast<int>(node) == ps.b;
    if (!pairs && !select_b && (c[k] != 0 || c[p.vp] != 0)) return;
    contiguous = contiguous || pairs;
  }
  if (!contiguous) return;
  p.pair = k;
  p.pair_size = size;
  p.pair_select = ps;
  p.rows = std::max<int64_t>(1, std::min(p.rows, kTcLanes / (width * size)));
}


// Marks each comparison that only a varying select's condition reads as
// evaluated by that select (TcNodePlan::fused).
void FuseComparisons(TcProgram& p) {
  std::vector<int> uses(p.nodes.size(), 0);
  for (const TcNodePlan& n : p.nodes) {
    for (int child : {n.a, n.b, n.c}) {
      if (child >= 0) ++uses[child];
    }
  }
  for (TcNodePlan& n : p.nodes) {
    if (n.op != Op::kSelect || !n.vec) continue;
    TcNodePlan& c = p.nodes[n.a];
    if (IsComparison(c.op) && c.vec && uses[n.a] == 1) {
      c.fused = true;
      n.cmp = n.a;
    }
  }
}

// Step 3. The nodes, each marked uniform or varying across the lanes.
void CompileNodes(const TcStatement& s, TcProgram& p) {
  int read = 0;
  for (const tc::Expr& e : s.rhs->nodes) {
    TcNodePlan n;
    n.op = e.op;
    n.a = e.a;
    n.b = e.b;
    n.c = e.c;
    switch (e.op) {
      case Op::kNumber: n.value = e.number; break;
      case Op::kSize: n.value = static_cast<double>(s.sizes[e.id]); break;
      case Op::kIndex:
        n.pos = p.origin[s.domain->position[e.id]];
        n.vec = p.vp >= 0 && (n.pos == p.vp || n.pos == p.vo || n.pos == p.pair);
        break;
      case Op::kRead: {
        n.read = read++;
        const TcReadPlan& r = p.reads[n.read];
        n.vec = p.vcoef[r.form] != 0 || p.ocoef[r.form] != 0 || p.pcoef[r.form] != 0;
        for (const TcReadPlan::Divided& dv : r.divided) {
          n.vec = n.vec || p.vcoef[dv.form] != 0 || p.ocoef[dv.form] != 0;
        }
        break;
      }
      default:
        for (int child : {e.a, e.b, e.c}) {
          if (child >= 0) n.vec = n.vec || p.nodes[child].vec;
        }
    }
    p.nodes.push_back(n);
  }
  FuseComparisons(p);
}

}  // namespace

TcProgram CompileTcStatement(const TcStatement& s, absl::Span<const Shape> strides) {
  const tc::Domain& d = *s.domain;
  TcProgram p;
  p.num_pos = static_cast<int>(d.indices.size());
  p.num_lhs = d.num_lhs;
  p.lo = d.lo;
  p.hi = d.hi;
  p.origin.resize(p.num_pos);
  std::iota(p.origin.begin(), p.origin.end(), 0);
  FormBuilder fb(d);
  CompileForms(s, strides, fb, p);
  std::vector<bool> valued(p.num_pos, false);
  for (const tc::Expr& e : s.rhs->nodes) {
    if (e.op == Op::kIndex) valued[d.position[e.id]] = true;
  }
  SimplifyTcPositions(valued, fb.forms(), p);
  ChooseVectorIndex(fb, p);
  ChoosePairIndex(s, fb, p);
  fb.Finish(p);
  // Guards constant over a chunk are checked once per chunk, first; then those
  // that cut its rows, then its lanes.
  auto kind = [&](const TcGuardPlan& g) {
    return p.vcoef[g.form] != 0 ? 2 : p.ocoef[g.form] != 0 ? 1 : 0;
  };
  std::stable_sort(p.guards.begin(), p.guards.end(),
                   [&](const TcGuardPlan& x, const TcGuardPlan& y) { return kind(x) < kind(y); });
  for (TcGuardPlan& g : p.guards) {
    p.num_uniform_guards += kind(g) == 0;
    p.num_row_guards += kind(g) == 1;
    const int64_t c = std::abs(kind(g) == 2 ? p.vcoef[g.form] : p.ocoef[g.form]);
    g.period = g.divisor / std::gcd(c, g.divisor);
  }
  CompileNodes(s, p);
  return p;
}

}  // namespace cpu
}  // namespace kgrad
