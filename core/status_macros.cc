#include "core/status_macros.h"

#include <cstdio>
#include <cstdlib>

namespace kgrad {
namespace internal {

void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "%s:%d: internal invariant violated: %s\n", file, line, cond);
  std::abort();
}

}  // namespace internal
}  // namespace kgrad
