// PrecisionReport::ToString: the summary, the trail of the worst gradient's
// error with its verdict, the kinks crossed and the largest local errors.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/precision_report.h"

namespace kgrad {
namespace {

std::string Sci(double x) {
  if (std::isinf(x)) return "inf";
  return absl::StrFormat("%.2g", x);
}

std::string Where(const ApplicationError& a) {
  return absl::StrCat(a.backward ? "[bwd] " : "", a.text,
                      a.occurrence > 0 ? absl::StrCat("  (run ", a.occurrence + 1, ")") : "");
}

void AppendOutputs(const PrecisionReport& r, std::string* out) {
  if (r.outputs.empty()) return;
  absl::StrAppend(out, "value error ", Sci(r.outputs[0].second));
  size_t worst = 0, above = 0;
  for (size_t i = 1; i < r.outputs.size(); ++i) {
    if (worst == 0 || r.outputs[i].second > r.outputs[worst].second) worst = i;
    above += r.outputs[i].second > 1e-3;
  }
  if (worst > 0) {
    absl::StrAppend(out, "; gradients: worst ", Sci(r.outputs[worst].second), " (",
                    r.outputs[worst].first, "), ", above, " of ", r.outputs.size() - 1,
                    " above 1e-3");
  }
  absl::StrAppend(out, "  [max|a - b| / max(1, max|b|)]\n");
}

// What the trail says about where the error began: a crossed kink on it, a
// kernel on it that loses precision, or neither.
std::string Verdict(const PrecisionReport& r) {
  for (auto it = r.trail.rbegin(); it != r.trail.rend(); ++it) {
    const ApplicationError& a = r.applications[*it];
    if (a.flipped > 0) {
      return absl::StrCat("a kink at step ", a.step, ": float32 rounding moved ", a.flipped, " of ",
                          a.elements, " elements across a comparison, after which the runs take "
                          "different branches (not a loss of precision)");
    }
    if (a.kink) {
      return absl::StrCat("a kink at step ", a.step, ": its input from step ", a.blamed,
                          " crossed a kink of the operation (a mask or an argmax changed), after "
                          "which the runs take different branches (not a loss of precision)");
    }
    if (a.local_error > 1e-5) {
      return absl::StrCat("precision lost in a kernel at step ", a.step, ": its own rounding is ",
                          Sci(a.local_error), ", far above float32's");
    }
  }
  return "ordinary float32 rounding amplified along the trail (the growth column: by how much "
         "at each step)";
}

// A trail step worth its own line: where the error changes much, a kink, a
// kernel that rounds much, and the ends.
bool Notable(const ApplicationError& a, double growth, bool end) {
  return end || a.flipped > 0 || a.kink || a.local_error > 1e-6 || growth > 2 || growth < 0.5;
}

void AppendTrail(const PrecisionReport& r, std::string* out) {
  if (r.trail.empty()) {
    absl::StrAppend(out, "no error to trace\n");
    return;
  }
  absl::StrAppend(out, "where the worst gradient's error began (from its origin to the gradient):\n",
                  "     value    local  growth    step  application\n");
  const ApplicationError* prev = nullptr;
  int64_t skipped = 0;
  double skipped_from = 0;
  const size_t n = r.trail.size();
  for (size_t i = 0; i < n; ++i) {
    const ApplicationError& a = r.applications[r.trail[n - 1 - i]];
    const bool has_prev = prev != nullptr && prev->value_error > 0 && !std::isinf(prev->value_error);
    const double growth = has_prev ? a.inherited / prev->value_error : 1;
    prev = &a;
    if (!Notable(a, growth, i < 2 || i + 3 > n)) {
      if (skipped++ == 0) skipped_from = a.value_error;
      continue;
    }
    if (skipped > 0) {
      absl::StrAppend(out, "  ... ", skipped, " steps, value error ", Sci(skipped_from), " .. ",
                      Sci(r.applications[r.trail[n - i]].value_error), "\n");
      skipped = 0;
    }
    absl::StrAppendFormat(out, "  %8s %8s %7s %7d  %s%s\n", Sci(a.value_error),
                          a.local_error < 0 ? "-" : Sci(a.local_error),
                          has_prev ? absl::StrFormat("x%.3g", growth) : "", a.step, Where(a),
                          a.kink ? "  <- kink" : "");
  }
  absl::StrAppend(out, "verdict: ", Verdict(r), "\n");
}

void AppendKinks(const PrecisionReport& r, int top, std::string* out) {
  int64_t apps = 0, elements = 0, inside = 0;
  std::vector<const ApplicationError*> first;
  for (const ApplicationError& a : r.applications) {
    inside += a.kink;
    if (a.flipped <= 0) continue;
    ++apps;
    elements += a.flipped;
    if (first.size() < static_cast<size_t>(top)) first.push_back(&a);
  }
  absl::StrAppend(out, "kinks crossed: ", apps, apps == 1 ? " mask or index differs" : " masks or indices differ",
                  " between the runs (", elements, elements == 1 ? " element); " : " elements); ", inside,
                  inside == 1 ? " application" : " applications", " crossed a kink of its own",
                  apps > 0 ? "; first masks:" : "", "\n");
  for (const ApplicationError* a : first) {
    absl::StrAppendFormat(out, "  step %6d  %d of %d elements  %s\n", a->step, a->flipped,
                          a->elements, Where(*a));
  }
}

void AppendLocal(const PrecisionReport& r, int top, std::string* out) {
  std::vector<const ApplicationError*> rows;
  for (const ApplicationError& a : r.applications) {
    if (a.local_error > 0) rows.push_back(&a);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ApplicationError* x, const ApplicationError* y) {
    return x->local_error > y->local_error;
  });
  if (rows.size() > static_cast<size_t>(top)) rows.resize(top);
  absl::StrAppend(out, "largest local errors (each kernel's own rounding; float32's unit is 6e-8):\n",
                  "     local    value    step  application\n");
  for (const ApplicationError* a : rows) {
    absl::StrAppendFormat(out, "  %8s %8s %7d  %s\n", Sci(a->local_error), Sci(a->value_error),
                          a->step, Where(*a));
  }
}

}  // namespace

std::string PrecisionReport::ToString(int top) const {
  std::string out = absl::StrCat("precision of @", program, ": ", applications.size(),
                                 " kernel applications, float32 against float64 at the same inputs\n");
  AppendOutputs(*this, &out);
  AppendTrail(*this, &out);
  AppendKinks(*this, top, &out);
  AppendLocal(*this, top, &out);
  return out;
}

}  // namespace kgrad
