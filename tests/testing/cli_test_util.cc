#include "tests/testing/cli_test_util.h"

#include <cstdlib>
#include <sstream>

#include "tools/cli.h"

namespace kgrad {
namespace testing {

CliResult Cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int s = cli::Main(args, out, err);
  return {s, out.str(), err.str()};
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

}  // namespace testing
}  // namespace kgrad
