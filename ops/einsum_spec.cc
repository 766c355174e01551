#include "ops/einsum_spec.h"

#include <array>

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

}  // namespace kgrad
