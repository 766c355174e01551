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
#include "backends/cpu/tc_program.h"
#include "backends/cpu/tc_rows.h"
#include "ops/elementwise_functors.h"
#include "ops/tc_division.h"

namespace kgrad {
namespace cpu {
namespace {

using tc::Op;
using tc::Reducer;
using tc_rows::Accumulate;
using tc_rows::Assign;
using tc_rows::CmpSelectRow;
using tc_rows::CombineEveryOther;
using tc_rows::CombinePairs;
using tc_rows::EveryOther;
using tc_rows::Lanes;
using tc_rows::MirroredComparison;
using tc_rows::Operand;
using tc_rows::RowOf;
using tc_rows::RunCmpSelect;
using tc_rows::Store;
using tc_rows::StoreEveryOther;
using tc_rows::StoreInterleaved;

using tc::CeilDiv;
using tc::FloorDiv;

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
// fn(combine) with combine(acc, v) the reducer's step. max and min propagate NaN
// (as torch.amax): once a NaN is combined the result stays NaN.
template <typename T, typename Fn>
void VisitReducer(Reducer r, Fn&& fn) {
  switch (r) {
    case Reducer::kAssign: return fn([](T, T v) { return v; });
    case Reducer::kSum: return fn([](T a, T v) { return a + v; });
    case Reducer::kProd: return fn([](T a, T v) { return a * v; });
    // `|`, not `||`: no branch in the scalar loops' tails, whose data decide it.
    case Reducer::kMax: return fn([](T a, T v) { return ((v > a) | (v != v)) ? v : a; });
    case Reducer::kMin: return fn([](T a, T v) { return ((v < a) | (v != v)) ? v : a; });
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

// A loop of the odometer: position `pos` from lo to hi by `step`.
struct Level {
  int pos;
  int64_t lo, hi, step;
  int64_t count() const { return hi > lo ? (hi - lo + step - 1) / step : 0; }
};


// ----- Evaluation ---------------------------------------------------------------------------

template <typename T>
class Evaluator {
 public:
  Evaluator(const TcProgram& p, absl::Span<const TcTensor<T>> tensors)
      : p_(p),
        tensors_(tensors),
        idx_(p.lo),
        fv_(p.constant),
        buf_(p.nodes.size() * kTcLanes),
        vals_(p.nodes.size()) {
    for (int q = 0; q < p.num_pos; ++q) {
      for (const auto& [f, c] : p.moves[q]) fv_[f] += c * idx_[q];
    }
  }

  int64_t idx(int q) const { return idx_[q]; }
  int64_t form(int f) const { return fv_[f]; }

  void Move(int q, int64_t delta) {
    idx_[q] += delta;
    for (const auto& [f, c] : p_.moves[q]) fv_[f] += c * delta;
  }
  // The first point of `levels`; false when one of them is empty.
  bool Begin(absl::Span<const Level> levels) {
    for (const Level& l : levels) {
      if (l.lo >= l.hi) return false;
      Move(l.pos, l.lo - idx_[l.pos]);
    }
    return true;
  }
  // The next point in row-major order; false (and back at the first) after the last.
  bool Next(absl::Span<const Level> levels) {
    for (int i = static_cast<int>(levels.size()) - 1; i >= 0; --i) {
      const Level& l = levels[i];
      Move(l.pos, l.step);
      if (idx_[l.pos] < l.hi) return true;
      Move(l.pos, l.lo - idx_[l.pos]);
    }
    return false;
  }
  // Point number `item` of `levels` in row-major order.
  void Seek(absl::Span<const Level> levels, int64_t item) {
    for (int i = static_cast<int>(levels.size()) - 1; i >= 0; --i) {
      const Level& l = levels[i];
      const int64_t n = l.count();
      Move(l.pos, l.lo + (item % n) * l.step - idx_[l.pos]);
      item /= n;
    }
  }

  // The lanes j < n of the chunk at the current point (the vector index at
  // idx + j) and its rows r < rows (the row index at idx + r) that pass every
  // guard; false when none does.
  bool Guarded(int64_t n, int64_t rows, Lanes* lanes) const {
    for (int i = 0; i < p_.num_uniform_guards; ++i) {
      const TcGuardPlan& g = p_.guards[i];
      const int64_t v = fv_[g.form];
      if (v < g.lo || v >= g.hi || (g.divisor != 1 && v % g.divisor != 0)) return false;
    }
    const int row_end = p_.num_uniform_guards + p_.num_row_guards;
    lanes->row_first = 0;
    lanes->row_step = 1;
    lanes->rows = rows;
    if (row_end > p_.num_uniform_guards &&
        !Cut(p_.num_uniform_guards, row_end, p_.ocoef, rows, &lanes->row_first, &lanes->row_step,
             &lanes->rows)) {
      return false;
    }
    lanes->pair = p_.pair_size;
    return Cut(row_end, static_cast<int>(p_.guards.size()), p_.vcoef, n, &lanes->first,
               &lanes->step, &lanes->count);
  }

  // The j < n for which guards [from, to) hold at v0 + coef * j (v0 and coef
  // their form's value and coefficient of one index): first + step * t for
  // t < count, a progression, the guards being affine; false when empty.
  bool Cut(int from, int to, const std::vector<int64_t>& coef, int64_t n, int64_t* first_out,
           int64_t* step_out, int64_t* count_out) const {
    int64_t lo = 0, hi = n;
    for (int i = from; i < to; ++i) {  // lo <= v0 + c * j < hi
      const TcGuardPlan& g = p_.guards[i];
      const int64_t v0 = fv_[g.form], c = coef[g.form];
      constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      if (c == 1) {  // the common case, without divisions
        if (g.lo != kMin) lo = std::max(lo, g.lo - v0);
        if (g.hi != kMax) hi = std::min(hi, g.hi - v0);
      } else if (c > 0) {
        if (g.lo != kMin) lo = std::max(lo, CeilDiv(g.lo - v0, c));
        if (g.hi != kMax) hi = std::min(hi, FloorDiv(g.hi - 1 - v0, c) + 1);
      } else {
        if (g.lo != kMin) hi = std::min(hi, FloorDiv(v0 - g.lo, -c) + 1);
        if (g.hi != kMax) lo = std::max(lo, CeilDiv(v0 - (g.hi - 1), -c));
      }
    }
    if (lo >= hi) return false;
    int64_t first = lo, step = 1;
    for (int i = from; i < to; ++i) {  // divisibility: a progression
      const TcGuardPlan& g = p_.guards[i];
      if (g.divisor == 1) continue;
      const int64_t v0 = fv_[g.form], c = coef[g.form];
      bool found = false;
      for (int64_t t = 0; t < g.divisor; ++t) {
        const int64_t lane = first + step * t;
        if (lane >= hi) break;
        if ((v0 + c * lane) % g.divisor == 0) {
          first = lane;
          found = true;
          break;
        }
      }
      if (!found) return false;
      step = step / std::gcd(step, g.period) * g.period;
    }
    *first_out = first;
    *step_out = step;
    *count_out = (hi - first + step - 1) / step;
    return *count_out > 0;
  }

  // The root's value over `lanes`; a root computed lane by lane goes to `dst`
  // when given (then the result points there).
  Operand<T> Eval(const Lanes& lanes, T* dst = nullptr) {
    const size_t last = p_.nodes.size() - 1;
    for (size_t i = 0; i < last; ++i) EvalNode(i, lanes, &buf_[i * kTcLanes]);
    EvalNode(last, lanes, dst != nullptr ? dst : &buf_[last * kTcLanes]);
    return vals_.back();
  }

  // The operands of a root select whose comparison is fused, for a caller that
  // combines cmp(a, b) ? x : y into its accumulator in the same loop.
  struct SelectRoot {
    Op op;
    Operand<T> a, b, x;
    T y;
  };
  // Every node but the root; true when the root is such a select with a varying
  // a and one value y (*r), else false with the root evaluated too (*v).
  bool EvalSelectRoot(const Lanes& lanes, SelectRoot* r, Operand<T>* v) {
    const size_t last = p_.nodes.size() - 1;
    for (size_t i = 0; i < last; ++i) EvalNode(i, lanes, &buf_[i * kTcLanes]);
    const TcNodePlan& root = p_.nodes[last];
    if (root.cmp >= 0) {
      const TcNodePlan& cn = p_.nodes[root.cmp];
      *r = {cn.op, vals_[cn.a], vals_[cn.b], vals_[root.b], vals_[root.c].u};
      if (r->a.p == nullptr) {
        std::swap(r->a, r->b);
        r->op = MirroredComparison(r->op);
      }
      if (r->a.p != nullptr && vals_[root.c].p == nullptr) return true;
    }
    EvalNode(last, lanes, &buf_[last * kTcLanes]);
    *v = vals_.back();
    return false;
  }

 private:
  // Node i over `lanes`, into vals_[i] (computed lane by lane into `o`).
  void EvalNode(size_t i, const Lanes& lanes, T* o) {
    const TcNodePlan& nd = p_.nodes[i];
    if (nd.fused) return;  // its select evaluates it
    Operand<T>& out = vals_[i];
    switch (nd.op) {
      case Op::kNumber:
      case Op::kSize: out = {nullptr, static_cast<T>(nd.value)}; break;
      case Op::kIndex:
        if (nd.vec) {
          const bool column = nd.pos == p_.vp, pair = nd.pos == p_.pair;
          const int64_t v0 =
              idx_[nd.pos] + (column ? lanes.first : pair ? 0 : lanes.row_first);
          const int64_t w = lanes.width(), s = lanes.pair;
          if (column || pair) {  // the same in every row: the first, then copies
            for (int64_t j = 0; j < lanes.count; ++j) {
              for (int64_t k = 0; k < s; ++k) {
                o[j * s + k] = static_cast<T>(column ? v0 + lanes.step * j : v0 + k);
              }
            }
            for (int64_t r = 1; r < lanes.rows; ++r) std::copy(o, o + w, o + r * w);
          } else {
            for (int64_t r = 0; r < lanes.rows; ++r) {
              std::fill(o + r * w, o + (r + 1) * w, static_cast<T>(v0 + lanes.row_step * r));
            }
          }
          out = {o, T{}};
        } else {
          out = {nullptr, static_cast<T>(idx_[nd.pos])};
        }
        break;
      case Op::kRead: out = Read(nd, lanes, o); break;
      default: out = nd.cmp >= 0 ? CmpSelect(nd, lanes, o) : Apply(nd, lanes, o);
    }
    if (out.p == o) out.rs = lanes.width();
  }

 private:
  Operand<T> Read(const TcNodePlan& nd, const Lanes& lanes, T* o) const {
    const TcReadPlan& r = p_.reads[nd.read];
    const T* data = tensors_[r.tensor].data;
    int64_t off = fv_[r.form] + p_.vcoef[r.form] * lanes.first + p_.ocoef[r.form] * lanes.row_first;
    int64_t step = p_.vcoef[r.form] * lanes.step;
    int64_t row_step = p_.ocoef[r.form] * lanes.row_step;
    for (const TcReadPlan::Divided& dv : r.divided) {  // exact on the guarded lanes and rows
      const int64_t c = p_.vcoef[dv.form], oc = p_.ocoef[dv.form];
      const int64_t v = fv_[dv.form] + c * lanes.first + oc * lanes.row_first;
      off += dv.stride * ExactDiv(v, dv.divisor, dv.shift);
      step += dv.stride * ExactDiv(c * lanes.step, dv.divisor, dv.shift);
      row_step += dv.stride * ExactDiv(oc * lanes.row_step, dv.divisor, dv.shift);
    }
    if (!nd.vec) return {nullptr, data[off]};
    if (lanes.pair > 1) {
      return ReadPairs(data + off, step, p_.pcoef[r.form], row_step, lanes, &nd == &p_.nodes.back(),
                       o);
    }
    const int64_t count = lanes.count;
    if (step == 1) return {data + off, T{}, row_step};
    for (int64_t row = 0; row < lanes.rows; ++row) {
      const T* src = data + off + row * row_step;
      T* dst = o + row * count;
      if (step == 2) {  // strided windows and pools
        EveryOther(src, dst, count);
      } else {
        for (int64_t j = 0; j < count; ++j) dst[j] = src[j * step];
      }
    }
    return {o, T{}};
  }

  // A read along the vector index by `step` and the pair index by `pstep`: row
  // r's lane x at src + r * row_step + step * (x / pair) + pstep * (x % pair),
  // in place when that is x (the window's contiguous rows): as one run when the
  // rows lie end to end, else row by row when the read is the root (the
  // reduction combines each row where it lies; a pooling's rows are two image
  // rows apart), else copied end to end for the nodes above it.
  Operand<T> ReadPairs(const T* src, int64_t step, int64_t pstep, int64_t row_step,
                       const Lanes& lanes, bool root, T* o) const {
    const int64_t s = lanes.pair, w = lanes.width();
    const bool contiguous = pstep == 1 && step == s;
    if (contiguous && (lanes.rows == 1 || row_step == w || root)) return {src, T{}, row_step};
    for (int64_t r = 0; r < lanes.rows; ++r) {
      const T* in = src + r * row_step;
      T* dst = o + r * w;
      if (contiguous) {  // rows apart copied end to end: the nodes and the reduction run flat
        std::memcpy(dst, in, sizeof(T) * w);  // small rows: overlapping moves, no scalar tail
      } else if (pstep == 0 && s == 2) {  // each value twice (the output's own element)
        for (int64_t j = 0; j < lanes.count; ++j) {
          const T v = in[step * j];
          dst[2 * j] = v;
          dst[2 * j + 1] = v;
        }
      } else {
        for (int64_t j = 0; j < lanes.count; ++j) {
          for (int64_t k = 0; k < s; ++k) dst[j * s + k] = in[step * j + pstep * k];
        }
      }
    }
    return {o, T{}};
  }

  // A select whose condition is a fused comparison (TcNodePlan::fused):
  // cmp(a, b) ? x : y in one loop where the comparison has a varying operand
  // and y is one value (a mask routing x, or choosing between two values);
  // else the comparison into its own buffer first.
  Operand<T> CmpSelect(const TcNodePlan& nd, const Lanes& lanes, T* o) {
    const TcNodePlan& cn = p_.nodes[nd.cmp];
    Operand<T> a = vals_[cn.a], b = vals_[cn.b];
    Op op = cn.op;
    if (a.p == nullptr) {
      std::swap(a, b);
      op = MirroredComparison(op);
    }
    const Operand<T> x = vals_[nd.b], y = vals_[nd.c];
    if (a.p == nullptr || y.p != nullptr) {
      T* co = &buf_[nd.cmp * kTcLanes];
      vals_[nd.cmp] = Apply(cn, lanes, co);
      vals_[nd.cmp].rs = lanes.width();
      return Apply(nd, lanes, o);
    }
    int64_t n = lanes.width(), rows = lanes.rows;
    auto flat = [n](const Operand<T>& v) { return v.p == nullptr || v.rs == n; };
    if (rows > 1 && flat(a) && flat(b) && flat(x)) {
      n *= rows;
      rows = 1;
    }
    RunCmpSelect(op, a, b, x, y.u, o, n, rows, [](T, T v) { return v; });
    return {o, T{}};
  }

  // A computed node over the lanes: one loop over all of them when every operand's
  // rows lie end to end (buffers, and reads whose rows are contiguous), else row by row.
  Operand<T> Apply(const TcNodePlan& nd, const Lanes& lanes, T* o) const {
    const Operand<T> a = vals_[nd.a];
    const Operand<T> b = nd.b >= 0 ? vals_[nd.b] : Operand<T>{};
    const Operand<T> c = nd.c >= 0 ? vals_[nd.c] : Operand<T>{};
    if (!nd.vec) return {nullptr, ApplyTcOp<T>(nd.op, a.u, b.u, c.u)};
    int64_t n = lanes.width(), rows = lanes.rows;
    auto flat = [n](const Operand<T>& v) { return v.p == nullptr || v.rs == n; };
    if (rows > 1 && flat(a) && flat(b) && flat(c)) {
      n *= rows;
      rows = 1;
    }
    ApplyBlock(nd.op, a, b, c, o, n, rows);
    return {o, T{}};
  }

  // o[r * n + j] = op(a's, b's, c's row r at j) for r < rows, j < n: the op's
  // dispatch once per block, the rows inside.
  static void ApplyBlock(Op op, const Operand<T>& a, const Operand<T>& b, const Operand<T>& c,
                         T* o, int64_t n, int64_t rows) {
    if (IsTcPacketOp(op)) {
      for (int64_t r = 0; r < rows; ++r) TcPacketOpRow(op, a.p + r * a.rs, o + r * n, n);
      return;
    }
    VisitTcOp<T>(op, [&](auto f) {
      using F = decltype(f);
      for (int64_t r = 0; r < rows; ++r) {
        const T* x = a.p != nullptr ? a.p + r * a.rs : nullptr;
        const T* y = b.p != nullptr ? b.p + r * b.rs : nullptr;
        const T* z = c.p != nullptr ? c.p + r * c.rs : nullptr;
        T* out = o + r * n;
        if constexpr (std::is_invocable_v<F, T>) {
          for (int64_t j = 0; j < n; ++j) out[j] = f(x[j]);
        } else if constexpr (std::is_invocable_v<F, T, T>) {
          if (x != nullptr && y != nullptr) {
            for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], y[j]);
          } else if (x != nullptr) {
            const T v = b.u;
            for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], v);
          } else {
            const T u = a.u;
            for (int64_t j = 0; j < n; ++j) out[j] = f(u, y[j]);
          }
        } else if (x != nullptr && y == nullptr && z == nullptr) {  // a mask of two values
          const T v = b.u, w = c.u;
          for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], v, w);
        } else if (x != nullptr && y != nullptr && z == nullptr) {  // relu-like
          const T w = c.u;
          for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], y[j], w);
        } else if (x != nullptr && y == nullptr && z != nullptr) {
          const T v = b.u;
          for (int64_t j = 0; j < n; ++j) out[j] = f(x[j], v, z[j]);
        } else {
          auto at = [](const T* p, T u, int64_t j) { return p != nullptr ? p[j] : u; };
          for (int64_t j = 0; j < n; ++j) out[j] = f(at(x, a.u, j), at(y, b.u, j), at(z, c.u, j));
        }
      }
    });
  }

  const TcProgram& p_;
  absl::Span<const TcTensor<T>> tensors_;
  std::vector<int64_t> idx_, fv_;
  std::vector<T> buf_;
  std::vector<Operand<T>> vals_;
};


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
    group_ = Group();
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
    Compute(ev, acc);
    if (direct_) {  // the lanes are output elements
      const bool flat = step == 1 && row_step == n;  // the output's rows end to end
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
      Lanes l;
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
    } else {
      std::fill(acc, acc + (direct_ ? n * rows : tree_), lane_identity_);
    }
    if (!one_point_ && ev.Begin(inner_)) {
      do {
        const int64_t lanes =
            direct_ ? n : std::min<int64_t>(kTcLanes, p_.hi[p_.vp] - ev.idx(p_.vp));
        Lanes l;
        if (ev.Guarded(lanes, rows, &l) && !FusedAccumulate(ev, acc, n, l, combine_)) {
          Accumulate(acc, n, l, ev.Eval(l), combine_);
        }
      } while (ev.Next(inner_));
    }
  }

  // Accumulate's work for a root select of a fused comparison, the select
  // combined into acc by `sink` in the same loop, where the lanes are one run
  // of acc (no pairs, no step; rows end to end) and the operands' rows lie end
  // to end too; false (nothing done) otherwise.
  template <typename S>
  bool FusedAccumulate(Evaluator<T>& ev, T* acc, int64_t width, const Lanes& l, S sink) {
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
    Lanes l;
    if (!ev.Guarded(n, rows, &l)) {
      for (int64_t r = 0; r < rows; ++r) Store(out + r * row_step, step, n, identity, Assign());
      return;
    }
    const bool all_rows = l.row_first == 0 && l.row_step == 1 && l.rows == rows;
    if (!all_rows) {  // the rows guarded out
      for (int64_t r = 0; r < rows; ++r) Store(out + r * row_step, step, n, identity, Assign());
    }
    T* first = out + l.first * step;
    const Operand<T> v = ev.Eval(l, step == 1 && l.step == 1 && rows == 1 ? first : nullptr);
    for (int64_t r = 0; r < l.rows; ++r) {
      T* row = out + (l.row_first + r * l.row_step) * row_step;
      const Operand<T> vr = RowOf(v, r);
      if (l.step == 1) {
        const int64_t end = l.first + l.count;
        if (all_rows) Store(row, step, l.first, identity, Assign());
        if (vr.p != first) Store(row + l.first * step, step, l.count, vr, Assign());
        if (all_rows) Store(row + end * step, step, n - end, identity, Assign());
      } else {
        if (all_rows) Store(row, step, n, identity, Assign());
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
