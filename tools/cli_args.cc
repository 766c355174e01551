#include "tools/cli_args.h"

#include "absl/status/status.h"
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kgrad {
namespace cli {

std::string ParsedArgs::Get(const std::string& name, const std::string& fallback) const {
  auto it = options.find(name);
  return it == options.end() || it->second.empty() ? fallback : it->second.back();
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::set<std::string>& with_value,
                                     const std::set<std::string>& switches) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!absl::StartsWith(a, "-") || a == "-") {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(a[1] == '-' ? 2 : 1);
    std::string value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "o") name = "output";
    if (switches.count(name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      out.switches.insert(name);
      continue;
    }
    if (!with_value.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
    if (!has_value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      value = args[++i];
    }
    out.options[name].push_back(value);
  }
  return out;
}

absl::StatusOr<int64_t> IntOption(const ParsedArgs& args, const std::string& name, int64_t fallback,
                                  int64_t least) {
  if (!args.Has(name)) return fallback;
  int64_t v = 0;
  if (!absl::SimpleAtoi(args.Get(name), &v) || v < least) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " wants a whole number of at least ", least, ", got '", args.Get(name), "'"));
  }
  return v;
}

absl::StatusOr<double> NumberOption(const ParsedArgs& args, const std::string& name, double fallback) {
  if (!args.Has(name)) return fallback;
  double v = 0;
  if (!absl::SimpleAtod(args.Get(name), &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " wants a number, got '", args.Get(name), "'"));
  }
  return v;
}

}  // namespace cli
}  // namespace kgrad
