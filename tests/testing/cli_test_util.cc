#include "tests/testing/cli_test_util.h"

#include <cstdlib>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cli.h"

namespace kgrad {
namespace testing {

CliResult Cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int s = cli::Main(args, out, err);
  return {s, out.str(), err.str()};
}

void ExpectCliError(const std::vector<std::string>& args, int status, const std::vector<std::string>& fragments) {
  SCOPED_TRACE(absl::StrCat("kgrad ", absl::StrJoin(args, " ")));
  CliResult r = Cli(args);
  EXPECT_EQ(r.status, status);
  for (const std::string& f : fragments) EXPECT_THAT(r.err, ::testing::HasSubstr(f));
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

}  // namespace testing
}  // namespace kgrad
