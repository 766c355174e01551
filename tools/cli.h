// The `kgrad` command line: one function per subcommand. Each returns the process
// exit status and writes results to `out`, problems to `err`.
#ifndef KGRAD_TOOLS_CLI_H_
#define KGRAD_TOOLS_CLI_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_H_
