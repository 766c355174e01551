#include "backends/cpu/tc_interpreter.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/simd.h"
#include "backends/cpu/tc_evaluator.h"
#include "backends/cpu/tc_program.h"
#include "backends/cpu/tc_rows.h"
#include "ops/elementwise_functors.h"
#include "ops/tc_division.h"

namespace kgrad {
namespace cpu {
namespace {

using tc::Op;
using tc::Reducer;
using tc_eval::Evaluator;
using tc_eval::Level;
using tc_rows::Accumulate;
using tc_rows::Assign;
using tc_rows::Operand;
using tc_rows::RowOf;
using tc_rows::RunCmpSelect;
using tc_rows::Store;
using tc_rows::StoreInterleaved;

// ----- Packet math -------------------------------------------------------------------
// fn(Op{}) with Op the elementwise functor of one of the packet ops.
template <typename Fn>
void VisitPacketOp(Op op, Fn&& fn) {
  switch (op) {
    case Op::kExp: return fn(ew::ExpOp{});
    case Op::kLog: return fn(ew::LogOp{});
    case Op::kTanh: return fn(ew::TanhOp{});
    case Op::kSigmoid: return fn(ew::SigmoidOp{});
    default: return;
  }
}

// y[0, n) = F(x[0, n)), each element through a full packet (the tail padded), as
// the elementwise kernels compute (backends/cpu/elementwise_rows.h).
template <typename F, typename T>
void PacketRow(const T* x, T* y, int64_t n) {
  using V = Vec<T>;
  constexpr int kW = V::kSize;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) F::Apply(ew::Attrs{}, V::Load(x + i)).Store(y + i);
  if (i < n) {
    T in[kW] = {}, out[kW];
    std::copy(x + i, x + n, in);
    F::Apply(ew::Attrs{}, V::Load(in)).Store(out);
    std::copy(out, out + (n - i), y + i);
  }
}

// ----- Reducers ------------------------------------------------------------------------
// fn(combine) with combine(acc, v) the reducer's step (tc_rows.h's ReducerStep).
template <typename T, typename Fn>
void VisitReducer(Reducer r, Fn&& fn) {
  using tc_rows::ReducerStep;
  switch (r) {
    case Reducer::kAssign: return fn(ReducerStep<Reducer::kAssign>{});
    case Reducer::kSum: return fn(ReducerStep<Reducer::kSum>{});
    case Reducer::kProd: return fn(ReducerStep<Reducer::kProd>{});
    case Reducer::kMax: return fn(ReducerStep<Reducer::kMax>{});
    case Reducer::kMin: return fn(ReducerStep<Reducer::kMin>{});
  }
}

// What an initialising statement fills its output with: the reducer's identity.
template <typename T>
T InitIdentity(Reducer r) {
  switch (r) {
    case Reducer::kProd: return T{1};
    case Reducer::kMax: return -std::numeric_limits<T>::infinity();
    case Reducer::kMin: return std::numeric_limits<T>::infinity();
    default: return T{0};
  }
}

// An identity that leaves every value's bits alone: -0 for sums (+0 + -0 is +0).
template <typename T>
T ExactIdentity(Reducer r) {
  return r == Reducer::kSum ? -T{0} : InitIdentity<T>(r);
}

// ----- The loops -------------------------------------------------------------------------------
// Work items are output chunks: the left side's points with the vector index,
// when it is a left index, cut into chunks of kTcLanes. Each item reduces over
// the reduction points (and, when the vector index is a reduction index, over
// its chunks, lane by lane, then across the lanes).
template <typename T, typename C>
class StatementRunner {
 public:
  StatementRunner(const TcStatement& s, const TcProgram& p, absl::Span<const TcTensor<T>> tensors,
                  C combine)
      : s_(s), p_(p), tensors_(tensors), combine_(combine) {
    const int lhs = p.num_lhs;
    vector_lhs_ = p.vp >= 0 && p.vp < lhs;
    direct_ = vector_lhs_ || p.vp < 0;
    // Loops of one point stay at it (the evaluator starts every index at lo).
    auto add = [](std::vector<Level>& levels, Level l) {
      if (l.count() != 1) levels.push_back(l);
    };
    for (int q = 0; q < p.num_pos; ++q) {
      if (q != p.vp && q != p.pair) {  // the pair index stays at lo: its values are lanes
        add(q < lhs ? items_ : inner_, Level{q, p.lo[q], p.hi[q], q == p.vo ? p.rows : 1});
      }
    }
    if (p.vp >= 0)
      add(vector_lhs_ ? items_ : inner_, Level{p.vp, p.lo[p.vp], p.hi[p.vp], kTcLanes});
    init_identity_ = InitIdentity<T>(s.reducer);
    // The lanes of a reduction along the vector index: a power of 2 for the tree.
    while (tree_ < std::min<int64_t>(p.VectorRange(), kTcLanes)) tree_ *= 2;
    lane_identity_ = direct_ && s.init ? init_identity_ : ExactIdentity<T>(s.reducer);
    // One reduction point per output element and every lane kept (a lattice
    // substitution's result, tc_positions.h): no identity fill, no loop.
    one_point_ = direct_ && inner_.empty() && p.pair < 0 && p.guards.empty();
    select_root_ = !p.nodes.empty() && p.nodes.back().cmp >= 0;
    for (const TcReadPlan& r : p.reads) reads_out_ = reads_out_ || r.tensor == s.out;
    group_ = Group();
    select_pairs_ = SelectPairs();
    point_pairs_ = PointPairsApply();
  }

  // Whether Compute combines the inner points in registers (PointPairs): up
  // to 4 points (max pooling's kh) of a reduction over pairs, each output
  // lane its own (direct_), whose root is a pair select with B read along the
  // output's lanes or a read of the pairs in place, in a statement without
  // guards; f32 packets.
  bool PointPairsApply() const {
    if (!tc_rows::kPointPairs<T, C> || !direct_ || one_point_ || p_.pair < 0 ||
        p_.pair_size != 2 || !p_.guards.empty() || inner_.empty()) {
      return false;
    }
    int64_t points = 1;
    for (const Level& l : inner_) points *= l.count();
    if (points > kMaxPoints) return false;
    if (p_.pair_select.a >= 0) {  // B one value per output lane, in place
      return p_.vcoef[p_.reads[p_.nodes[p_.pair_select.b].read].form] == 1;
    }
    if (p_.nodes.size() != 1 || p_.nodes[0].op != Op::kRead) return false;
    const TcReadPlan& r = p_.reads[p_.nodes[0].read];
    return r.divided.empty() && p_.pcoef[r.form] == 1 && p_.vcoef[r.form] == 2;
  }

  // The items stored in groups (StoreGroup): the items' last level a left-side
  // index of s <= 8 values stepping the output by 1 where the vector index steps
  // it by s (a lattice's Ix(2*i + kh, 2*j + kw), kw beside j), in a statement
  // that writes its output (init, a reduction: each item's chunk is final once
  // computed). One item's store would write every other element, and rows of a
  // pooled image (14 values) are mostly a scalar tail; s items' rows together
  // are whole runs. 1: items one by one.
  int64_t Group() const {
    if (!s_.init || !vector_lhs_ || s_.reducer == Reducer::kAssign || p_.pair >= 0 ||
        items_.empty()) {
      return 1;
    }
    const Level& l = items_.back();
    const int64_t n = l.count(), step = OutStep();
    if (l.step != 1 || n != step || n < 2 || n > 8 || l.pos == p_.vo) return 1;
    for (const auto& [form, coef] : p_.moves[l.pos]) {
      if (form == p_.out_form) return coef == 1 ? n : 1;
    }
    return 1;
  }

  // A group of two items computed and stored in one pass (StoreSelectPairs):
  // items of one point each (no guard, no reduction) whose root is a select of
  // a fused comparison of a contiguous read and one value, choosing between a
  // contiguous read (or one value) and one value, all read in place.
  bool SelectPairs() const {
    if (group_ != 2 || !one_point_ || !select_root_) return false;
    const TcNodePlan& root = p_.nodes.back();
    const TcNodePlan& cmp = p_.nodes[root.cmp];
    auto in_place = [&](int node) {
      const TcNodePlan& nd = p_.nodes[node];
      if (nd.op != Op::kRead) return false;
      const TcReadPlan& r = p_.reads[nd.read];
      return r.divided.empty() && p_.vcoef[r.form] == 1;
    };
    auto uniform = [&](int node) { return !p_.nodes[node].vec; };
    const bool operands = (in_place(cmp.a) && uniform(cmp.b)) || (uniform(cmp.a) && in_place(cmp.b));
    return operands && (in_place(root.b) || uniform(root.b)) && uniform(root.c);
  }

  void Run() {
    int64_t items = 1, points = 1;
    for (const Level& l : items_) items *= l.count();
    for (const Level& l : inner_) points *= std::max<int64_t>(l.hi - l.lo, 0);
    if (items == 0) return;
    const int64_t lanes = vector_lhs_ ? std::min<int64_t>(p_.VectorRange(), kTcLanes) * p_.rows : 1;
    const int64_t work =
        std::max<int64_t>(1, lanes * points * static_cast<int64_t>(p_.nodes.size() + 1));
    const int64_t g = group_, size = std::max<int64_t>(kTcLanes, lanes);
    ParallelFor(items / g, std::max<int64_t>(1, kParallelGrain / (work * g)),
                [&](int64_t begin, int64_t end) {
                  Evaluator<T> ev(p_, tensors_);
                  std::vector<T> acc(size * g);
                  ev.Seek(items_, begin * g);
                  for (int64_t item = begin; item < end; ++item) {
                    if (g == 1) {
                      RunItem(ev, acc.data());
                      ev.Next(items_);
                    } else {
                      RunGroup(ev, acc.data(), size);
                    }
                  }
                });
  }

  // group_ consecutive items: each computed into its own accumulator, then
  // their rows stored interleaved.
  void RunGroup(Evaluator<T>& ev, T* acc, int64_t size) {
    T* out = tensors_[s_.out].data + ev.form(p_.out_form);
    const int64_t n = ItemLanes(ev), rows = ItemRows(ev);
    const int64_t row_step = p_.vo < 0 ? 0 : p_.ocoef[p_.out_form];
    if (select_pairs_) return RunSelectPairs(ev, out, n, rows, row_step);
    const T* v[8];
    for (int64_t k = 0; k < group_; ++k) {
      Compute(ev, acc + k * size);
      v[k] = acc + k * size;
      ev.Next(items_);
    }
    for (int64_t r = 0; r < rows; ++r) {
      StoreInterleaved(out + r * row_step, v, group_, n);
      for (int64_t k = 0; k < group_; ++k) v[k] += n;
    }
  }

  // RunGroup for SelectPairs(): both items' operands, then their rows computed
  // and stored interleaved.
  void RunSelectPairs(Evaluator<T>& ev, T* out, int64_t n, int64_t rows, int64_t row_step) {
    typename Evaluator<T>::SelectRoot r[2];
    for (auto& item : r) {
      tc_rows::Lanes l;
      Operand<T> v;
      ev.Guarded(n, rows, &l);       // no guard: every lane and row
      ev.EvalSelectRoot(l, &item, &v);  // true: SelectPairs()
      ev.Next(items_);
    }
    for (int64_t row = 0; row < rows; ++row) {
      tc_rows::RowSelect<T> s[2];
      for (int k = 0; k < 2; ++k) {
        const auto& x = r[k].x;
        s[k] = {r[k].a.p + row * r[k].a.rs, r[k].b.u,
                x.p != nullptr ? x.p + row * x.rs : nullptr, x.u, r[k].y};
      }
      tc_rows::StoreSelectPairs(r[0].op, s[0], s[1], lane_identity_, out + row * row_step, n,
                                combine_);
    }
  }

  // Lanes of the current item's output chunk.
  int64_t ItemLanes(const Evaluator<T>& ev) const {
    if (!vector_lhs_) return 1;
    return std::min<int64_t>(kTcLanes, p_.hi[p_.vp] - ev.idx(p_.vp));
  }
  // Rows of the current item's output chunk.
  int64_t ItemRows(const Evaluator<T>& ev) const {
    return p_.vo < 0 ? 1 : std::min<int64_t>(p_.rows, p_.hi[p_.vo] - ev.idx(p_.vo));
  }
  int64_t OutStep() const { return vector_lhs_ ? p_.vcoef[p_.out_form] : 0; }

  void RunItem(Evaluator<T>& ev, T* acc) {
    T* out = tensors_[s_.out].data + ev.form(p_.out_form);
    const int64_t step = OutStep(), n = ItemLanes(ev), rows = ItemRows(ev);
    const int64_t row_step = p_.vo < 0 ? 0 : p_.ocoef[p_.out_form];
    if (s_.reducer == Reducer::kAssign) {  // no reduction: store the chunk
      AssignItem(ev, out, step, n, rows, row_step);
      return;
    }
    const bool flat = step == 1 && (rows == 1 || row_step == n);  // the rows end to end
    if (direct_ && s_.init && flat && !reads_out_) {  // the output chunk is the accumulator
      Compute(ev, out);
      return;
    }
    Compute(ev, acc);
    if (direct_) {  // the lanes are output elements
      for (int64_t r = 0, end = flat ? 1 : rows; r < end; ++r) {
        const Operand<T> v{acc + r * n, T{}};
        const int64_t m = flat ? n * rows : n;
        if (s_.init) {
          Store(out + r * row_step, step, m, v, Assign());
        } else {
          Store(out + r * row_step, step, m, v, combine_);
        }
      }
      return;
    }
    // Across the lanes in a fixed tree (halves combined lane by lane: it vectorises).
    for (int64_t half = tree_ / 2; half >= 1; half /= 2) {
      for (int64_t j = 0; j < half; ++j) acc[j] = combine_(acc[j], acc[j + half]);
    }
    const T r = combine_(s_.init ? init_identity_ : ExactIdentity<T>(s_.reducer), acc[0]);
    *out = s_.init ? r : combine_(*out, r);
  }

  // The current item's reduction into acc: its lanes (direct_) or its tree's lanes.
  void Compute(Evaluator<T>& ev, T* acc) {
    const int64_t n = ItemLanes(ev), rows = ItemRows(ev);
    if (one_point_) {  // acc = combine(identity, value): no fill, no loop
      tc_rows::Lanes l;
      ev.Guarded(n, rows, &l);  // no guard: every lane and row
      const T identity = lane_identity_;
      const C combine = combine_;
      auto first = [identity, combine](T, T x) { return combine(identity, x); };
      if (!FusedAccumulate(ev, acc, n, l, first)) {
        const Operand<T> v = ev.Eval(l);
        if (v.p == nullptr || v.rs == n) {
          Store(acc, 1, n * rows, v, first);
        } else {
          for (int64_t r = 0; r < rows; ++r) Store(acc + r * n, 1, n, RowOf(v, r), first);
        }
      }
    } else if (point_pairs_ && n >= 8) {
      PointPairs(ev, acc, n, rows);
      return;
    } else {
      std::fill(acc, acc + (direct_ ? n * rows : tree_), lane_identity_);
    }
    if (!one_point_ && ev.Begin(inner_)) {
      do {
        const int64_t lanes =
            direct_ ? n : std::min<int64_t>(kTcLanes, p_.hi[p_.vp] - ev.idx(p_.vp));
        tc_rows::Lanes l;
        if (ev.Guarded(lanes, rows, &l) && !FusedAccumulate(ev, acc, n, l, combine_)) {
          Accumulate(acc, n, l, ev.Eval(l), combine_);
        }
      } while (ev.Next(inner_));
    }
  }

  // Compute's reduction when PointPairsApply(): every point's operands, then
  // each output's pairs of all points combined in one pass from the identity.
  void PointPairs(Evaluator<T>& ev, T* acc, int64_t n, int64_t rows) {
    tc_rows::PointPairs<T> pts[kMaxPoints];
    int np = 0;
    tc_rows::Lanes l;
    ev.Begin(inner_);
    do {
      ev.Guarded(n, rows, &l);  // no guard: every lane and row
      if (p_.pair_select.a >= 0) {
        int64_t b_step;  // 1: PointPairsApply()
        pts[np] = ev.PairSelectPoint(l, &b_step);
      } else {
        const Operand<T> v = ev.Eval(l);  // in place: PointPairsApply()
        pts[np].a = v.p;
        pts[np].a_rs = v.rs;
      }
      ++np;
    } while (ev.Next(inner_));
    if (p_.pair_select.a >= 0) {
      tc_rows::SelectPointPairs(p_.pair_select.op, pts, np, lane_identity_, acc, n, rows,
                                combine_);
    } else {
      tc_rows::CombinePointPairs(pts, np, lane_identity_, acc, n, rows, combine_);
    }
  }

  // Accumulate's work for a root select of a fused comparison, the select
  // combined into acc by `sink` in the same loop, where the lanes are one run
  // of acc (no pairs, no step; rows end to end) and the operands' rows lie end
  // to end too; false (nothing done) otherwise.
  template <typename S>
  bool FusedAccumulate(Evaluator<T>& ev, T* acc, int64_t width, const tc_rows::Lanes& l, S sink) {
    if (p_.pair_select.a >= 0) {
      ev.PairSelect(acc, width, l, sink);
      return true;
    }
    if (!select_root_ || l.pair != 1 || l.step != 1) return false;
    const bool one_run = l.rows == 1 || (l.first == 0 && l.count == width && l.row_step == 1);
    if (!one_run) return false;
    typename Evaluator<T>::SelectRoot r;
    Operand<T> v;
    if (!ev.EvalSelectRoot(l, &r, &v)) {
      Accumulate(acc, width, l, v, combine_);
      return true;
    }
    const int64_t n = l.count;
    auto flat = [n](const Operand<T>& o) { return o.p == nullptr || o.rs == n; };
    if (l.rows > 1 && !(flat(r.a) && flat(r.b) && flat(r.x))) {
      // Row by row: acc's rows are still one run, n apart.
      RunCmpSelect(r.op, r.a, r.b, r.x, r.y, acc + l.row_first * width + l.first, n, l.rows,
                   sink);
      return true;
    }
    RunCmpSelect(r.op, r.a, r.b, r.x, r.y, acc + l.row_first * width + l.first, n * l.rows, 1,
                 sink);
    return true;
  }

  // The chunk's values, written in place where the output is contiguous; lanes
  // guarded out get the identity.
  void AssignItem(Evaluator<T>& ev, T* out, int64_t step, int64_t n, int64_t rows,
                  int64_t row_step) {
    const Operand<T> identity{nullptr, init_identity_};
    tc_rows::Lanes l;
    if (!ev.Guarded(n, rows, &l)) {
      for (int64_t r = 0; r < rows; ++r) Store(out + r * row_step, step, n, identity, Assign());
      return;
    }
    const bool all_rows = l.row_first == 0 && l.row_step == 1 && l.rows == rows;
    // Contiguous rows whose guarded lanes are one run: each row stored whole,
    // the run and its borders in one pass (StoreBordered).
    const bool bordered = step == 1 && l.step == 1;
    // Every row filled with the identity first (the rows guarded out are not a
    // run); else only the rows guarded out, and each row's borders below.
    const bool prefilled = !all_rows && !(bordered && l.row_step == 1);
    if (prefilled) {
      for (int64_t r = 0; r < rows; ++r) Store(out + r * row_step, step, n, identity, Assign());
    } else if (!all_rows) {
      for (int64_t r = 0; r < rows; ++r) {
        if (r < l.row_first || r >= l.row_first + l.rows) {
          Store(out + r * row_step, step, n, identity, Assign());
        }
      }
    }
    T* first = out + l.first * step;
    const Operand<T> v = ev.Eval(l, step == 1 && l.step == 1 && rows == 1 ? first : nullptr);
    for (int64_t r = 0; r < l.rows; ++r) {
      T* row = out + (l.row_first + r * l.row_step) * row_step;
      const Operand<T> vr = RowOf(v, r);
      if (bordered && vr.p != nullptr) {
        tc_rows::StoreBordered(row, n, l.first, l.count, vr.p, init_identity_);
      } else if (l.step == 1) {
        const int64_t end = l.first + l.count;
        if (!prefilled) Store(row, step, l.first, identity, Assign());
        if (vr.p != first) Store(row + l.first * step, step, l.count, vr, Assign());
        if (!prefilled) Store(row + end * step, step, n - end, identity, Assign());
      } else {
        if (!prefilled) Store(row, step, n, identity, Assign());
        Store(row + l.first * step, step * l.step, l.count, vr, Assign());
      }
    }
  }

  const TcStatement& s_;
  const TcProgram& p_;
  absl::Span<const TcTensor<T>> tensors_;
  C combine_;
  bool vector_lhs_ = false;  // the vector index is a left-side index
  bool direct_ = false;      // ... or there is none: each lane is an output element
  bool one_point_ = false;
  bool select_root_ = false;  // the root a select of a fused comparison
  bool reads_out_ = false;    // the right side reads the output
  bool select_pairs_ = false;  // SelectPairs()
  bool point_pairs_ = false;   // PointPairsApply()
  static constexpr int kMaxPoints = 4;
  std::vector<Level> items_, inner_;
  T init_identity_{}, lane_identity_{};
  int64_t tree_ = 1;
  int64_t group_ = 1;
};

}  // namespace

bool IsTcPacketOp(tc::Op op) {
  return op == Op::kExp || op == Op::kLog || op == Op::kTanh || op == Op::kSigmoid;
}

template <typename T>
T TcPacketOp(tc::Op op, T x) {
  T y = x;
  VisitPacketOp(op, [&](auto f) { PacketRow<decltype(f)>(&x, &y, 1); });
  return y;
}

template <typename T>
void TcPacketOpRow(tc::Op op, const T* x, T* y, int64_t n) {
  VisitPacketOp(op, [&](auto f) { PacketRow<decltype(f)>(x, y, n); });
}

template float TcPacketOp<float>(tc::Op, float);
template double TcPacketOp<double>(tc::Op, double);
template void TcPacketOpRow<float>(tc::Op, const float*, float*, int64_t);
template void TcPacketOpRow<double>(tc::Op, const double*, double*, int64_t);

TcStatement MakeTcStatement(const tc::Block& b, const tc::Analysis& a, int i) {
  const tc::Statement& st = b.statements[i];
  const tc::Domain& d = a.domains[i];
  TcStatement s;
  s.rhs = &st.rhs;
  s.domain = &d;
  s.reducer = st.reducer;
  s.init = st.init;
  s.out = st.lhs;
  s.sizes = a.size;
  const Shape& shape = a.shapes[st.lhs];
  const Shape strides = RowMajorStrides(shape);
  s.out_strides.assign(d.indices.size(), 0);
  const bool by_name = st.lhs_indices.size() == shape.size();
  s.covers_out = by_name && static_cast<int>(shape.size()) == d.num_lhs;
  for (size_t k = 0; k < shape.size(); ++k) {
    const int q = by_name ? d.position[st.lhs_indices[k]] : static_cast<int>(k);
    s.out_strides[q] += strides[k];
    if (d.lo[q] != 0 || d.hi[q] != shape[k]) s.covers_out = false;
  }
  return s;
}

template <typename T>
void RunTcProgram(const TcStatement& s, const TcProgram& p, absl::Span<const TcTensor<T>> tensors) {
  const TcTensor<T>& out = tensors[s.out];
  if (s.init && !s.covers_out) {
    std::fill(out.data, out.data + out.num_elements, InitIdentity<T>(s.reducer));
  }
  for (int q = 0; q < s.domain->num_lhs; ++q) {
    if (s.domain->hi[q] <= s.domain->lo[q]) return;  // no left-side points
  }
  VisitReducer<T>(s.reducer, [&](auto combine) {
    StatementRunner<T, decltype(combine)>(s, p, tensors, combine).Run();
  });
}

template <typename T>
void RunTcStatement(const TcStatement& s, absl::Span<const TcTensor<T>> tensors) {
  std::vector<Shape> strides;
  for (const TcTensor<T>& t : tensors) strides.push_back(t.strides);
  RunTcProgram(s, CompileTcStatement(s, strides), tensors);
}

template void RunTcStatement<float>(const TcStatement&, absl::Span<const TcTensor<float>>);
template void RunTcStatement<double>(const TcStatement&, absl::Span<const TcTensor<double>>);
template void RunTcProgram<float>(const TcStatement&, const TcProgram&,
                                  absl::Span<const TcTensor<float>>);
template void RunTcProgram<double>(const TcStatement&, const TcProgram&,
                                   absl::Span<const TcTensor<double>>);

}  // namespace cpu
}  // namespace kgrad
