// The little JSON the suite needs: escaping for its writers, and a reader for
// the flat object bench/torch_side.py writes back ({"key": number | string |
// null, ...}; nested values are rejected with a clear error, not guessed at).
#ifndef KGRAD_BENCH_SUITE_JSON_H_
#define KGRAD_BENCH_SUITE_JSON_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kgrad {
namespace bench {

struct FlatJson {
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> strings;
};

// `source` names the file in error messages.
absl::StatusOr<FlatJson> ParseFlatJson(absl::string_view text, absl::string_view source);

// A JSON string literal (quotes included).
std::string JsonString(absl::string_view s);
// A JSON number, or null for NaN and infinities (JSON has neither).
std::string JsonNumber(double v);

}  // namespace bench
}  // namespace kgrad

#endif  // KGRAD_BENCH_SUITE_JSON_H_
