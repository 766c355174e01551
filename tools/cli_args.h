// Minimal argument parsing for the CLI: positional arguments and --flag value /
// --flag=value options (repeatable), validated against the options a command takes.
#ifndef KGRAD_TOOLS_CLI_ARGS_H_
#define KGRAD_TOOLS_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kgrad {
namespace cli {

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;
  std::set<std::string> switches;  // flags without a value

  bool Has(const std::string& name) const {
    return switches.count(name) > 0 || options.count(name) > 0;
  }
  // The last value of an option, or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
};

// `with_value`: options that take a value; `switches`: flags that do not.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::set<std::string>& with_value,
                                     const std::set<std::string>& switches);

// --NAME as a whole number of at least `least`, `fallback` when absent ("--batch
// wants a whole number of at least 1, got '0'").
absl::StatusOr<int64_t> IntOption(const ParsedArgs& args, const std::string& name, int64_t fallback,
                                  int64_t least);
// --NAME as a finite number, `fallback` when absent.
absl::StatusOr<double> NumberOption(const ParsedArgs& args, const std::string& name, double fallback);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_ARGS_H_
