// Running the kgrad CLI inside a test: its exit status and what it printed, and
// paths in the test's scratch folder.
#ifndef KGRAD_TESTS_TESTING_CLI_TEST_UTIL_H_
#define KGRAD_TESTS_TESTING_CLI_TEST_UTIL_H_

#include <string>
#include <vector>

namespace kgrad {
namespace testing {

struct CliResult {
  int status;
  std::string out, err;
};

// cli::Main(args) with its output and errors captured.
CliResult Cli(const std::vector<std::string>& args);

// Runs the CLI with `args`: it exits with `status` (1: a failure, 2: a usage
// error) and its errors contain each of `fragments`.
void ExpectCliError(const std::vector<std::string>& args, int status, const std::vector<std::string>& fragments);

// `name` in $TEST_TMPDIR (or /tmp outside Bazel).
std::string TempPath(const std::string& name);

}  // namespace testing
}  // namespace kgrad

#endif  // KGRAD_TESTS_TESTING_CLI_TEST_UTIL_H_
