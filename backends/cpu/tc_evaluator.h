// The evaluator of tc's interpreter (tc_interpreter.h): one thread's walk
// over a compiled statement's points (tc_program.h), its affine forms kept
// current as the loops step, and the right side evaluated over a chunk of
// lanes node by node with tc_rows.h's loops. Internal to backends/cpu/tc_*.
#ifndef KGRAD_BACKENDS_CPU_TC_EVALUATOR_H_
#define KGRAD_BACKENDS_CPU_TC_EVALUATOR_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "backends/cpu/tc_interpreter.h"
#include "backends/cpu/tc_program.h"
#include "backends/cpu/tc_rows.h"
#include "ops/tc_block.h"
#include "ops/tc_division.h"

namespace kgrad {
namespace cpu {
namespace tc_eval {

using tc::CeilDiv;
using tc::FloorDiv;
using tc::Op;
using tc::Reducer;
using tc_rows::EveryOther;
using tc_rows::Lanes;
using tc_rows::MirroredComparison;
using tc_rows::Operand;
using tc_rows::PairSelectRow;
using tc_rows::RunCmpSelect;

// A loop of the odometer: position `pos` from lo to hi by `step`.
struct Level {
  int pos;
  int64_t lo, hi, step;
  int64_t count() const { return hi > lo ? (hi - lo + step - 1) / step : 0; }
};


template <typename T>
class Evaluator {
 public:
  Evaluator(const TcProgram& p, absl::Span<const TcTensor<T>> tensors)
      : p_(p),
        tensors_(tensors),
        idx_(p.lo),
        fv_(p.constant),
        buf_(p.nodes.size() * kTcLanes),
        vals_(p.nodes.size()),
        scalars_(p.nodes.size()) {
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

  // The root of a pair select (TcPairSelect) over `lanes`, combined into acc
  // (rows `width` apart) by `combine`: A and B read in place, X and Y once per
  // value of the pair index.
  template <typename C>
  void PairSelect(T* acc, int64_t width, const Lanes& lanes, C combine) {
    int64_t b_step;
    const tc_rows::PointPairs<T> pt = PairSelectPoint(lanes, &b_step);
    T xs[8];
    for (int64_t k = 0; k < lanes.pair; ++k) xs[k] = Scalar(p_.pair_select.x, p_.lo[p_.pair] + k);
    for (int64_t r = 0; r < lanes.rows; ++r) {
      PairSelectRow(p_.pair_select.op, pt.a + r * pt.a_rs, pt.b + r * pt.b_rs, b_step, xs,
                    lanes.pair, pt.y, acc + (lanes.row_first + r * lanes.row_step) * width,
                    lanes.count, combine);
    }
  }

  // The pair select's operands at this point over `lanes`: A and B in place
  // (B stepping by *b_step along the vector index), X at the first two values
  // of the pair index and Y.
  tc_rows::PointPairs<T> PairSelectPoint(const Lanes& lanes, int64_t* b_step) {
    const TcPairSelect& ps = p_.pair_select;
    const TcReadPlan &ra = p_.reads[p_.nodes[ps.a].read], &rb = p_.reads[p_.nodes[ps.b].read];
    tc_rows::PointPairs<T> pt;
    pt.a = ReadAt(p_.nodes[ps.a], lanes);
    pt.a_rs = p_.ocoef[ra.form] * lanes.row_step;
    pt.b = ReadAt(p_.nodes[ps.b], lanes);
    pt.b_rs = p_.ocoef[rb.form] * lanes.row_step;
    *b_step = p_.vcoef[rb.form];
    const int64_t lo = p_.lo[p_.pair];
    pt.x0 = Scalar(ps.x, lo);
    pt.x1 = lanes.pair > 1 ? Scalar(ps.x, lo + 1) : pt.x0;
    pt.y = Scalar(ps.y, lo);
    return pt;
  }

 private:
  // A read's first element over `lanes` (a read of no divided argument).
  const T* ReadAt(const TcNodePlan& nd, const Lanes& lanes) const {
    const TcReadPlan& r = p_.reads[nd.read];
    return tensors_[r.tensor].data + fv_[r.form] + p_.vcoef[r.form] * lanes.first +
           p_.ocoef[r.form] * lanes.row_first;
  }

  // Node `node`'s value at the current point with the pair index at
  // `pair_value`, for a node of no read and no index of the lanes (a pair
  // select's X and Y): the nodes in order, children first.
  T Scalar(int node, int64_t pair_value) {
    for (int i = 0; i <= node; ++i) {
      const TcNodePlan& nd = p_.nodes[i];
      T& v = scalars_[i];
      switch (nd.op) {
        case Op::kNumber:
        case Op::kSize: v = static_cast<T>(nd.value); break;
        case Op::kIndex: v = static_cast<T>(nd.pos == p_.pair ? pair_value : idx_[nd.pos]); break;
        case Op::kRead: v = T{0}; break;  // in neither X nor Y
        default:
          v = ApplyTcOp<T>(nd.op, scalars_[nd.a], nd.b >= 0 ? scalars_[nd.b] : T{0},
                           nd.c >= 0 ? scalars_[nd.c] : T{0});
      }
    }
    return scalars_[node];
  }

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
  std::vector<T> scalars_;  // Scalar's
};

}  // namespace tc_eval
}  // namespace cpu
}  // namespace kgrad

#endif  // KGRAD_BACKENDS_CPU_TC_EVALUATOR_H_
