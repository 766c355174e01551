#include "ops/einsum_spec.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace kgrad {
namespace {

// Letters appearing exactly once over all operands, in ASCII order (NumPy's
// implicit output).
std::string ImplicitOutput(const std::vector<std::string>& inputs) {
  std::array<int, 128> count{};
  for (const std::string& s : inputs) {
    for (char ch : s) ++count[static_cast<unsigned char>(ch)];
  }
  std::string out;
  for (int ch = 0; ch < 128; ++ch) {
    if (count[ch] == 1) out.push_back(static_cast<char>(ch));
  }
  return out;
}

absl::Status CheckOutput(absl::string_view eq, const EinsumSpec& spec) {
  for (size_t i = 0; i < spec.output.size(); ++i) {
    char ch = spec.output[i];
    if (spec.output.find(ch, i + 1) != std::string::npos) {
      return EinsumError(eq,
                         absl::StrCat("output subscript '", std::string(1, ch), "' is repeated"));
    }
    bool found = false;
    for (const std::string& s : spec.inputs) found |= s.find(ch) != std::string::npos;
    if (!found) {
      return EinsumError(eq, absl::StrCat("output subscript '", std::string(1, ch),
                                          "' does not appear in any input"));
    }
  }
  return absl::OkStatus();
}

bool Has(const std::string& s, char ch) { return s.find(ch) != std::string::npos; }

// The letters of `s` (first occurrences, in order) for which keep(ch) holds.
template <typename Pred>
std::string Select(const std::string& s, Pred keep) {
  std::string out;
  for (char ch : s) {
    if (!Has(out, ch) && keep(ch)) out.push_back(ch);
  }
  return out;
}

int64_t SizeOf(const std::string& letters, const EinsumSizes& size) {
  int64_t n = 1;
  for (char ch : letters) n *= size[static_cast<unsigned char>(ch)];
  return n;
}

// The letters still needed after contracting operands i and j: those of the
// output and of every other operand.
std::string NeededLetters(const std::vector<std::string>& ops, size_t i, size_t j,
                          const std::string& output) {
  std::string keep = output;
  for (size_t o = 0; o < ops.size(); ++o) {
    if (o != i && o != j) keep += ops[o];
  }
  return keep;
}

// The pair whose contraction gives the smallest result.
std::pair<size_t, size_t> CheapestPair(const std::vector<std::string>& ops,
                                       const std::string& output, const EinsumSizes& size) {
  std::pair<size_t, size_t> best{0, 1};
  int64_t best_size = -1;
  for (size_t i = 0; i < ops.size(); ++i) {
    for (size_t j = i + 1; j < ops.size(); ++j) {
      const std::string keep = NeededLetters(ops, i, j, output);
      auto kept = [&keep](char ch) { return Has(keep, ch); };
      const int64_t n = SizeOf(Select(ops[i] + ops[j], kept), size);
      if (best_size < 0 || n < best_size) best = {i, j}, best_size = n;
    }
  }
  return best;
}

// The GEMM of operands with letters a0 and b0 that keeps the letters in `keep`.
EinsumContraction PlanPair(const std::string& a0, const std::string& b0, const std::string& keep,
                           const EinsumSizes& size) {
  const std::string keep_a = keep + b0, keep_b = keep + a0;
  const std::string a = Select(a0, [&](char ch) { return Has(keep_a, ch); });
  const std::string b = Select(b0, [&](char ch) { return Has(keep_b, ch); });
  const std::string batch = Select(a, [&](char ch) { return Has(b, ch) && Has(keep, ch); });
  const std::string sum = Select(a, [&](char ch) { return Has(b, ch) && !Has(keep, ch); });
  const std::string free_a = Select(a, [&](char ch) { return !Has(b, ch); });
  const std::string free_b = Select(b, [&](char ch) { return !Has(a, ch); });
  const std::string a_plain = batch + free_a + sum, a_trans = batch + sum + free_a;
  const std::string b_plain = batch + sum + free_b, b_trans = batch + free_b + sum;
  EinsumContraction c;
  c.ta = a0 == a_trans && a_trans != a_plain;
  c.tb = b0 == b_trans && b_trans != b_plain;
  c.a = c.ta ? a_trans : a_plain;
  c.b = c.tb ? b_trans : b_plain;
  c.out = batch + free_a + free_b;
  c.batch = SizeOf(batch, size);
  c.m = SizeOf(free_a, size);
  c.n = SizeOf(free_b, size);
  c.k = SizeOf(sum, size);
  return c;
}

}  // namespace

std::string EinsumSpec::ToString() const {
  return absl::StrCat(absl::StrJoin(inputs, ","), "->", output);
}

bool IsEinsumLetter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }

absl::Status EinsumError(absl::string_view eq, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("einsum equation '", eq, "': ", what));
}

absl::StatusOr<EinsumSpec> ParseEinsum(absl::string_view eq, int num_operands) {
  std::string s;
  for (char ch : eq) {
    if (ch != ' ') s.push_back(ch);
  }
  if (s.find('.') != std::string::npos) return EinsumError(eq, "ellipsis '...' is unsupported");
  size_t arrow = s.find("->");
  EinsumSpec spec;
  spec.inputs.emplace_back();
  for (char ch : s.substr(0, arrow)) {
    if (ch == ',') {
      spec.inputs.emplace_back();
    } else if (IsEinsumLetter(ch)) {
      spec.inputs.back().push_back(ch);
    } else {
      return EinsumError(eq,
                         absl::StrCat("'", std::string(1, ch), "' is not a letter, ',' or '->'"));
    }
  }
  spec.output = arrow == std::string::npos ? ImplicitOutput(spec.inputs) : s.substr(arrow + 2);
  for (char ch : spec.output) {
    if (!IsEinsumLetter(ch)) {
      return EinsumError(eq, absl::StrCat("output '", spec.output, "' must contain letters only"));
    }
  }
  if (static_cast<int>(spec.inputs.size()) != num_operands) {
    return EinsumError(
        eq, absl::StrCat("names ", spec.inputs.size(), " operands, got ", num_operands, " inputs"));
  }
  KGRAD_RETURN_IF_ERROR(CheckOutput(eq, spec));
  return spec;
}

Shape LetterShape(const std::string& letters, const EinsumSizes& size) {
  Shape shape;
  for (char ch : letters) shape.push_back(size[static_cast<unsigned char>(ch)]);
  return shape;
}

std::vector<EinsumContraction> PlanEinsum(const EinsumSpec& spec, const EinsumSizes& size) {
  std::vector<std::string> ops = spec.inputs;
  std::vector<EinsumContraction> plan;
  while (ops.size() > 1) {
    const auto [i, j] = CheapestPair(ops, spec.output, size);
    plan.push_back(PlanPair(ops[i], ops[j], NeededLetters(ops, i, j, spec.output), size));
    plan.back().i = i;
    plan.back().j = j;
    ops.erase(ops.begin() + j);
    ops[i] = plan.back().out;
  }
  return plan;
}

}  // namespace kgrad
