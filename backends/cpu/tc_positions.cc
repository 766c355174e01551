#include "backends/cpu/tc_positions.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/tc_division.h"

namespace kgrad {
namespace cpu {
namespace {

using tc::CeilDiv;
using tc::FloorDiv;

// The state the rewrites share: the forms, the program's positions and which
// of them are read as values.
struct Space {
  TcForms& forms;
  TcProgram& p;
  std::vector<bool> valued;  // per current position

  bool Empty() const {
    for (int q = 0; q < p.num_pos; ++q) {
      if (p.hi[q] <= p.lo[q]) return true;
    }
    return false;
  }

  // Moves position `from` to index `to`, shifting those between.
  void Move(int from, int to) {
    auto rotate = [&](auto& v) {
      const typename std::decay_t<decltype(v)>::value_type value = v[from];
      v.erase(v.begin() + from);
      v.insert(v.begin() + to, value);
    };
    for (std::vector<int64_t>& c : forms.coef) rotate(c);
    rotate(p.lo);
    rotate(p.hi);
    rotate(valued);
    for (int& o : p.origin) {
      if (o == from) {
        o = to;
      } else if (o >= 0 && from < to && o > from && o <= to) {
        --o;
      } else if (o >= 0 && to < from && o >= to && o < from) {
        ++o;
      }
    }
  }

  // Removes position q (every form's coefficient of it zero).
  void Erase(int q) {
    for (std::vector<int64_t>& c : forms.coef) c.erase(c.begin() + q);
    p.lo.erase(p.lo.begin() + q);
    p.hi.erase(p.hi.begin() + q);
    valued.erase(valued.begin() + q);
    for (int& o : p.origin) {
      if (o == q) o = -1;
      else if (o > q) --o;
    }
    --p.num_pos;
  }

  // Form f no longer read: zero, so that it holds no rewrite back.
  void Forget(int f) {
    std::fill(forms.coef[f].begin(), forms.coef[f].end(), 0);
    forms.constant[f] = 0;
  }

  // Every point's value of form f divisible by d.
  bool AlwaysDivisible(int f, int64_t d) const {
    if (forms.constant[f] % d != 0) return false;
    for (int64_t c : forms.coef[f]) {
      if (c % d != 0) return false;
    }
    return true;
  }

  // The least and greatest value of form f over the box (not empty).
  std::pair<int64_t, int64_t> Bounds(int f) const {
    int64_t lo = forms.constant[f], hi = forms.constant[f];
    for (int q = 0; q < p.num_pos; ++q) {
      const int64_t c = forms.coef[f][q];
      lo += c * (c > 0 ? p.lo[q] : p.hi[q] - 1);
      hi += c * (c > 0 ? p.hi[q] - 1 : p.lo[q]);
    }
    return {lo, hi};
  }
};

// Lattice substitution on guard `g` (tc_positions.h); false when its form is
// not `a * (h - k) + c` for a left-side h, a reduction k of exactly d values
// and a = +-1, or when the new box would not map onto h's range exactly.
bool Substitute(Space& s, const TcGuardPlan& g) {
  TcProgram& p = s.p;
  const int64_t d = g.divisor;
  if (d <= 1) return false;
  const std::vector<int64_t>& c = s.forms.coef[g.form];
  int h = -1, k = -1;
  for (int q = 0; q < p.num_pos; ++q) {
    if (c[q] == 0) continue;
    int& slot = q < p.num_lhs ? h : k;
    if (slot >= 0) return false;
    slot = q;
  }
  if (h < 0 || k < 0 || s.valued[h]) return false;
  const int64_t a = c[h];
  if ((a != 1 && a != -1) || c[k] != -a || p.hi[k] - p.lo[k] != d) return false;
  // h = d * i + k + e makes the form a * d * i.
  const int64_t e = -a * s.forms.constant[g.form];
  const int64_t i_lo = CeilDiv(p.lo[h] - (p.hi[k] - 1) - e, d);
  const int64_t i_hi = FloorDiv(p.hi[h] - 1 - p.lo[k] - e, d) + 1;
  if (d * i_lo + p.lo[k] + e != p.lo[h] || d * (i_hi - 1) + p.hi[k] - 1 + e != p.hi[h] - 1) {
    return false;
  }
  for (size_t f = 0; f < s.forms.coef.size(); ++f) {
    std::vector<int64_t>& cf = s.forms.coef[f];
    const int64_t ch = cf[h];
    if (ch == 0) continue;
    cf[h] = d * ch;
    cf[k] += ch;
    s.forms.constant[f] += ch * e;
  }
  p.lo[h] = i_lo;
  p.hi[h] = i_hi;
  for (int& o : p.origin) {
    if (o == h) o = -1;  // h is no longer one position
  }
  s.Move(k, h + 1);
  ++p.num_lhs;
  return true;
}

// Divisibility that holds everywhere becomes a plain bound; bounds that hold
// everywhere go; exact quotients become plain terms of their read.
void DropTrueConditions(Space& s) {
  if (s.Empty()) return;
  std::vector<TcGuardPlan> kept;
  for (TcGuardPlan g : s.p.guards) {
    if (g.divisor > 1 && s.AlwaysDivisible(g.form, g.divisor)) {
      g.divisor = 1;
      g.period = 1;
    }
    const auto [lo, hi] = s.Bounds(g.form);
    if (g.divisor == 1 && lo >= g.lo && hi < g.hi) {
      s.Forget(g.form);
      continue;
    }
    kept.push_back(g);
  }
  s.p.guards = std::move(kept);
  for (TcReadPlan& r : s.p.reads) {
    std::vector<TcReadPlan::Divided> divided;
    for (const TcReadPlan::Divided& dv : r.divided) {
      if (!s.AlwaysDivisible(dv.form, dv.divisor)) {
        divided.push_back(dv);
        continue;
      }
      std::vector<int64_t>& to = s.forms.coef[r.form];
      const std::vector<int64_t>& from = s.forms.coef[dv.form];
      for (int q = 0; q < s.p.num_pos; ++q) to[q] += from[q] / dv.divisor * dv.stride;
      s.forms.constant[r.form] += s.forms.constant[dv.form] / dv.divisor * dv.stride;
      s.Forget(dv.form);
    }
    r.divided = std::move(divided);
  }
}

// Merges left-side positions q and q + 1 when every form's step along q is its
// step along q + 1 times q + 1's range (tc_positions.h).
bool Merge(Space& s, int q) {
  TcProgram& p = s.p;
  const int r = q + 1;
  if (s.valued[q] || s.valued[r]) return false;
  const int64_t range = p.hi[r] - p.lo[r];
  for (const std::vector<int64_t>& c : s.forms.coef) {
    if (c[q] != c[r] * range) return false;
  }
  for (std::vector<int64_t>& c : s.forms.coef) c[q] = c[r], c[r] = 0;
  p.lo[q] = p.lo[q] * range + p.lo[r];
  p.hi[q] = (p.hi[q] - 1) * range + p.hi[r];
  for (int& o : p.origin) {
    if (o == q) o = -1;
  }
  s.Erase(r);
  --p.num_lhs;
  return true;
}

}  // namespace

void SimplifyTcPositions(const std::vector<bool>& valued, TcForms& forms, TcProgram& p) {
  Space s{forms, p, valued};
  if (s.Empty()) return;  // no point: nothing to run faster
  for (bool again = true; again;) {
    again = false;
    for (const TcGuardPlan& g : p.guards) {
      if (Substitute(s, g)) {
        again = true;
        break;
      }
    }
  }
  DropTrueConditions(s);
  for (int q = p.num_lhs - 2; q >= 0; --q) Merge(s, q);
}

}  // namespace cpu
}  // namespace kgrad
