// `kgrad demo`: trains a small network on generated data and shows the loss falling.
#ifndef KGRAD_TOOLS_CLI_DEMO_H_
#define KGRAD_TOOLS_CLI_DEMO_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int DemoCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_DEMO_H_
