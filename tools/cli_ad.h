// The CLI's differentiation commands: dot (with the gradient), grad, jvp and check.
#ifndef KGRAD_TOOLS_CLI_AD_H_
#define KGRAD_TOOLS_CLI_AD_H_

#include <ostream>
#include <string>
#include <vector>

namespace kgrad {
namespace cli {

int GradCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int DotCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int JvpCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int CheckCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cli
}  // namespace kgrad

#endif  // KGRAD_TOOLS_CLI_AD_H_
