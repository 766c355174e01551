// PlanTcContraction (tc_contraction.h): which index plays which part in the
// GEMMs, and which operands are used where they lie.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/tc_contraction.h"

namespace kgrad {
namespace cpu {
namespace {

using tc::Op;
using Operand = TcContractionPlan::Operand;

// Which of the reads (A, B: in the order written) and the left side name an index.
enum class Role { kBatch, kRowA, kColB, kDepth, kSumA, kSumB, kNone };

// Nodes whose value depends on the point (an index or a read with indices).
std::vector<bool> VaryingNodes(const tc::ExprList& e) {
  std::vector<bool> varies(e.nodes.size(), false);
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    const tc::Expr& x = e.nodes[i];
    varies[i] = x.op == Op::kIndex || (x.op == Op::kRead && !x.args.empty());
    for (int c : {x.a, x.b, x.c}) {
      if (c >= 0 && varies[c]) varies[i] = true;
    }
  }
  return varies;
}

// Step 1. The right side as coef * A * B: the two reads and the coefficient's factors.
bool SplitProduct(const tc::ExprList& e, TcContractionPlan* plan) {
  const std::vector<bool> varies = VaryingNodes(e);
  std::vector<int> stack = {e.root()}, reads;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    const tc::Expr& x = e.nodes[i];
    if (!varies[i]) {
      plan->times.push_back(i);
      continue;
    }
    switch (x.op) {
      case Op::kMul:
        stack.push_back(x.a);
        stack.push_back(x.b);
        break;
      case Op::kNeg:
        plan->negate = !plan->negate;
        stack.push_back(x.a);
        break;
      case Op::kDiv:
        if (varies[x.b]) return false;
        plan->over.push_back(x.b);
        stack.push_back(x.a);
        break;
      case Op::kRead: reads.push_back(i); break;
      default: return false;
    }
  }
  if (reads.size() != 2) return false;
  for (size_t i = 0; i < e.nodes.size(); ++i) {
    if (!varies[i]) plan->constants.push_back(static_cast<int>(i));
  }
  plan->a.node = std::min(reads[0], reads[1]);
  plan->b.node = std::max(reads[0], reads[1]);
  return true;
}

// A read's indices, and whether it can be used where it lies: every argument a
// plain index, each once (then `strides` holds each position's stride).
struct ReadIndices {
  std::vector<bool> names;
  bool plain = true;
  std::vector<int64_t> strides;
};

ReadIndices IndicesOf(const tc::Expr& read, const tc::Domain& d, const Shape& strides) {
  ReadIndices r;
  r.names.assign(d.indices.size(), false);
  r.strides.assign(d.indices.size(), 0);
  for (size_t k = 0; k < read.args.size(); ++k) {
    const tc::Affine& a = read.args[k];
    for (const auto& term : a.terms) r.names[d.position[term.first]] = true;
    if (!a.IsPlainIndex()) {
      r.plain = false;
      continue;
    }
    int64_t& s = r.strides[d.position[a.terms[0].first]];
    if (s != 0) r.plain = false;  // a diagonal
    s = strides[k];
  }
  return r;
}

// A group of positions flattened row-major: its stride (of its innermost dim
// with more than one point), or `any` when it has one point; !ok when its dims
// do not nest.
struct Flat {
  bool ok = true, any = true;
  int64_t stride = 0;
};

Flat Flatten(const std::vector<int>& group, const std::vector<int64_t>& strides,
             const tc::Domain& d) {
  Flat f;
  int64_t expect = 0;
  for (int i = static_cast<int>(group.size()) - 1; i >= 0; --i) {
    const int q = group[i];
    const int64_t n = d.hi[q] - d.lo[q];
    if (n == 1) continue;
    if (f.any) {
      f.any = false;
      f.stride = strides[q];
    } else if (strides[q] != expect) {
      f.ok = false;
      return f;
    }
    expect = strides[q] * n;
  }
  return f;
}

int64_t Count(const std::vector<int>& group, const tc::Domain& d) {
  int64_t n = 1;
  for (int q : group) n *= d.hi[q] - d.lo[q];
  return n;
}

// Sets op.trans and op.ld when its strides give a GEMM operand [outer, inner]
// (a: [rows, depth], b: [depth, cols]) or its transpose.
bool FitGemm(Operand& op, const std::vector<int>& outer, const std::vector<int>& inner,
             const tc::Domain& d) {
  const Flat fo = Flatten(outer, op.strides, d), fi = Flatten(inner, op.strides, d);
  if (!fo.ok || !fi.ok) return false;
  const int64_t no = Count(outer, d), ni = Count(inner, d);
  if ((fi.any || fi.stride == 1) && (fo.any || fo.stride >= ni)) {
    op.trans = false;
    op.ld = fo.any ? std::max<int64_t>(ni, 1) : fo.stride;
    return true;
  }
  if ((fo.any || fo.stride == 1) && (fi.any || fi.stride >= no)) {
    op.trans = true;
    op.ld = fi.any ? std::max<int64_t>(no, 1) : fi.stride;
    return true;
  }
  return false;
}

// Row-major strides of a dense tensor over `layout`, per position. With `rows`,
// the rows of its last `rows` positions are padded off multiples of 128
// elements: a GEMM walking down a column of rows 4 KiB apart keeps hitting the
// same cache sets (measured: 1024-wide im2col columns made conv's GEMMs 2x slower).
std::vector<int64_t> DenseStrides(const std::vector<int>& layout, const tc::Domain& d,
                                  int rows = -1) {
  std::vector<int64_t> strides(d.indices.size(), 0);
  int64_t s = 1;
  for (int i = static_cast<int>(layout.size()) - 1; i >= 0; --i) {
    if (static_cast<int>(layout.size()) - i == rows + 1 && s >= 128 && s % 128 == 0) s += 16;
    strides[layout[i]] = s;
    s *= d.hi[layout[i]] - d.lo[layout[i]];
  }
  return strides;
}

std::vector<int> Concat(std::initializer_list<const std::vector<int>*> parts) {
  std::vector<int> v;
  for (const std::vector<int>* p : parts) v.insert(v.end(), p->begin(), p->end());
  return v;
}

// The index that moves a read fastest through memory: of its last argument's
// indices the one with the longest range (-1 for a rank-0 read).
int InnermostIndex(const tc::Expr& read, const tc::Domain& d) {
  if (read.args.empty()) return -1;
  int best = -1;
  for (const auto& term : read.args.back().terms) {
    const int q = d.position[term.first];
    if (best < 0 || d.hi[q] - d.lo[q] > d.hi[best] - d.lo[best]) best = q;
  }
  return best;
}

// Step 2. Each index's role.
std::vector<Role> Roles(const ReadIndices& ra, const ReadIndices& rb, const tc::Domain& d) {
  std::vector<Role> role(d.indices.size(), Role::kNone);
  for (size_t q = 0; q < role.size(); ++q) {
    const bool a = ra.names[q], b = rb.names[q], lhs = static_cast<int>(q) < d.num_lhs;
    if (a && b) {
      role[q] = lhs ? Role::kBatch : Role::kDepth;
    } else if (a) {
      role[q] = lhs ? Role::kRowA : Role::kSumA;
    } else if (b) {
      role[q] = lhs ? Role::kColB : Role::kSumB;
    }
  }
  return role;
}

// Step 3. The output's groups: the trailing run of one read's left indices are
// the columns, the run before it of the other's the rows, the rest the prefix.
// Returns whether a (the operand with the rows) is A.
bool OutputGroups(const std::vector<Role>& role, const tc::Domain& d, TcContractionPlan* plan) {
  const int lhs = d.num_lhs;
  int q = lhs - 1;
  if (lhs > 0 && (role[q] == Role::kRowA || role[q] == Role::kColB)) {
    const Role col = role[q], row = col == Role::kColB ? Role::kRowA : Role::kColB;
    for (; q >= 0 && role[q] == col; --q) plan->cols.insert(plan->cols.begin(), q);
    for (; q >= 0 && role[q] == row; --q) plan->rows.insert(plan->rows.begin(), q);
    for (int p = 0; p <= q; ++p) plan->prefix.push_back(p);
    return col == Role::kColB;
  }
  // A batch index last: the product in [batch, A's, B's] order, then permuted.
  plan->temp_out = true;
  for (int p = 0; p < lhs; ++p) {
    std::vector<int>& group = role[p] == Role::kBatch  ? plan->prefix
                              : role[p] == Role::kRowA ? plan->rows
                                                       : plan->cols;
    group.push_back(p);
  }
  return true;
}

// A position's memory stride in a read: over its arguments, |coefficient| times
// the dim's stride.
int64_t ReadStride(const tc::Expr& read, const tc::Domain& d, const Shape& strides, int q) {
  int64_t s = 0;
  for (size_t k = 0; k < read.args.size(); ++k) {
    const int64_t c = read.args[k].Coefficient(d.indices[q]);
    s += (c < 0 ? -c : c) * strides[k];
  }
  return s;
}

// Output tiles above which the GEMMs have enough of them to share over the threads.
inline constexpr int64_t kFewTiles = 4;
// Depth left per GEMM below which splitting a depth index off costs more than it saves.
inline constexpr int64_t kMinSplitDepth = 64;

// Step 3b. The depth index to split off (TcContractionPlan::split), or -1: with
// no prefix, few output tiles and enough depth left per point of it, the depth
// index outermost in both reads (whose smaller stride of the two is the
// largest: conv's images).
int ChooseSplit(const TcContractionPlan& plan, const tc::Expr& ra, const tc::Expr& rb,
                absl::Span<const Shape> strides, const tc::Domain& d) {
  if (!plan.prefix.empty() || plan.depth.size() < 2) return -1;
  const int64_t tiles = ((Count(plan.rows, d) + kGemmTileRows - 1) / kGemmTileRows) *
                        ((Count(plan.cols, d) + kGemmTileCols - 1) / kGemmTileCols);
  if (tiles > kFewTiles) return -1;
  int best = -1;
  int64_t best_stride = 0;
  for (int q : plan.depth) {
    const int64_t s = std::min(ReadStride(ra, d, strides[ra.tensor], q),
                               ReadStride(rb, d, strides[rb.tensor], q));
    if (best < 0 || s > best_stride) {
      best = q;
      best_stride = s;
    }
  }
  if (d.hi[best] - d.lo[best] < 2 || Count(plan.depth, d) / (d.hi[best] - d.lo[best]) <
                                          kMinSplitDepth) {
    return -1;
  }
  return best;
}

// Step 4. The depth order: as the first operand used in place stores it.
void OrderDepth(std::vector<int>& depth, const Operand& first) {
  std::stable_sort(depth.begin(), depth.end(),
                   [&](int x, int y) { return first.strides[x] > first.strides[y]; });
}

}  // namespace

std::optional<TcContractionPlan> PlanTcContraction(const TcStatement& s,
                                                   absl::Span<const Shape> strides) {
  const tc::Domain& d = *s.domain;
  TcContractionPlan plan;
  if (s.reducer != tc::Reducer::kSum || !s.covers_out || !SplitProduct(*s.rhs, &plan)) {
    return std::nullopt;
  }
  for (size_t q = 0; q < d.indices.size(); ++q) {
    if (d.hi[q] <= d.lo[q]) return std::nullopt;  // nothing for a GEMM to do
  }
  const tc::Expr& read_a = s.rhs->nodes[plan.a.node];
  const tc::Expr& read_b = s.rhs->nodes[plan.b.node];
  const ReadIndices ra = IndicesOf(read_a, d, strides[read_a.tensor]);
  const ReadIndices rb = IndicesOf(read_b, d, strides[read_b.tensor]);
  const std::vector<Role> role = Roles(ra, rb, d);
  std::vector<int> sum_a, sum_b;
  for (size_t q = 0; q < role.size(); ++q) {
    if (role[q] == Role::kNone) return std::nullopt;  // an index neither read names
    if (role[q] == Role::kDepth) plan.depth.push_back(q);
    if (role[q] == Role::kSumA) sum_a.push_back(q);
    if (role[q] == Role::kSumB) sum_b.push_back(q);
  }
  // Each guard to the read whose indices it names (preferring one gathered anyway).
  bool gather_a = !ra.plain || !sum_a.empty(), gather_b = !rb.plain || !sum_b.empty();
  std::vector<int> guards_a, guards_b;
  for (size_t g = 0; g < d.guards.size(); ++g) {
    bool in_a = true, in_b = true;
    for (const auto& term : d.guards[g].numerator.terms) {
      in_a = in_a && ra.names[d.position[term.first]];
      in_b = in_b && rb.names[d.position[term.first]];
    }
    if (!in_a && !in_b) return std::nullopt;  // it couples the two factors
    const bool to_a = in_a && (gather_a || !in_b || !gather_b);
    (to_a ? guards_a : guards_b).push_back(static_cast<int>(g));
    (to_a ? gather_a : gather_b) = true;
  }
  Operand opa = plan.a, opb = plan.b;
  opa.gathered = gather_a;
  opb.gathered = gather_b;
  opa.summed = sum_a;
  opb.summed = sum_b;
  opa.guards = guards_a;
  opb.guards = guards_b;
  opa.strides = ra.strides;
  opb.strides = rb.strides;
  const bool a_is_a = OutputGroups(role, d, &plan);
  plan.a = a_is_a ? opa : opb;
  plan.b = a_is_a ? opb : opa;
  const std::vector<bool>& names_a = a_is_a ? ra.names : rb.names;
  const std::vector<bool>& names_b = a_is_a ? rb.names : ra.names;
  plan.split = ChooseSplit(plan, read_a, read_b, strides, d);
  if (plan.split >= 0) {
    plan.depth.erase(std::find(plan.depth.begin(), plan.depth.end(), plan.split));
    plan.temp_out = true;
  }

  // Operands used in place: the depth in their order, if both then fit.
  if (!plan.a.gathered) {
    OrderDepth(plan.depth, plan.a);
    if (!FitGemm(plan.a, plan.rows, plan.depth, d)) plan.a.gathered = true;
  }
  if (!plan.b.gathered && !FitGemm(plan.b, plan.depth, plan.cols, d)) {
    std::vector<int> own = plan.depth;
    OrderDepth(own, plan.b);
    Operand a = plan.a;
    if (FitGemm(plan.b, own, plan.cols, d) && (a.gathered || FitGemm(a, plan.rows, own, d))) {
      plan.depth = own;
      plan.a = a;
    } else {
      plan.b.gathered = true;
    }
  }
  // Gathered operands: dense [prefix, rows, depth] (a) and [prefix, depth, cols]
  // (b), or transposed when the read's innermost index is a row (a) or depth (b)
  // index, so that the gather copies along the source's rows.
  for (Operand* op : {&plan.a, &plan.b}) {
    const bool is_a = op == &plan.a;
    const std::vector<bool>& names = is_a ? names_a : names_b;
    if (!op->gathered) {
      for (size_t q = 0; q < d.indices.size(); ++q) op->base += d.lo[q] * op->strides[q];
      continue;
    }
    const std::vector<int>& outer = is_a ? plan.rows : plan.depth;
    const std::vector<int>& inner = is_a ? plan.depth : plan.cols;
    const int last = InnermostIndex(s.rhs->nodes[op->node], d);
    const bool transposed = std::find(outer.begin(), outer.end(), last) != outer.end();
    if (plan.split >= 0) op->layout.push_back(plan.split);
    for (int q : plan.prefix) {
      if (names[q]) op->layout.push_back(q);
    }
    op->layout =
        transposed ? Concat({&op->layout, &inner, &outer}) : Concat({&op->layout, &outer, &inner});
    op->strides =
        DenseStrides(op->layout, d, static_cast<int>((transposed ? outer : inner).size()));
    op->base = 0;
    if (!FitGemm(*op, outer, inner, d)) return std::nullopt;  // cannot happen: dense
  }
  // The product in place, unless the output's layout or an update's scaling forbid.
  const bool scaled = !plan.times.empty() || !plan.over.empty() || plan.negate;
  if (!plan.temp_out) {
    plan.out_strides = s.out_strides;
    const Flat fr = Flatten(plan.rows, plan.out_strides, d);
    const Flat fc = Flatten(plan.cols, plan.out_strides, d);
    const int64_t ncols = Count(plan.cols, d);
    plan.ldc = fr.any ? std::max<int64_t>(ncols, 1) : fr.stride;
    plan.temp_out =
        !fr.ok || !fc.ok || !(fc.any || fc.stride == 1) || plan.ldc < ncols || (!s.init && scaled);
  }
  if (plan.temp_out) {
    plan.out_strides = DenseStrides(Concat({&plan.prefix, &plan.rows, &plan.cols}), d);
    plan.ldc = std::max<int64_t>(Count(plan.cols, d), 1);
  }
  plan.m = Count(plan.rows, d);
  plan.n = Count(plan.cols, d);
  plan.k = Count(plan.depth, d);
  return plan;
}

}  // namespace cpu
}  // namespace kgrad
