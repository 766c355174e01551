// The `kgrad` command-line tool; see tools/cli.cc or `kgrad help`.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tools/cli.h"

int main(int argc, char** argv) {
  // Under `bazel run` the process starts in the runfiles tree; paths on the
  // command line are relative to where the user typed it.
  if (const char* wd = std::getenv("BUILD_WORKING_DIRECTORY")) {
    if (chdir(wd) != 0) std::cerr << "warning: cannot change to " << wd << "\n";
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  return kgrad::cli::Main(args, std::cout, std::cerr);
}
