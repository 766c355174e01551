// Return-if-error macros. Debian's Abseil (20220623) predates ABSL_RETURN_IF_ERROR,
// so kgrad defines its own.
#ifndef KGRAD_CORE_STATUS_MACROS_H_
#define KGRAD_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define KGRAD_STATUS_CONCAT_INNER_(a, b) a##b
#define KGRAD_STATUS_CONCAT_(a, b) KGRAD_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not ok.
#define KGRAD_RETURN_IF_ERROR(expr)                         \
  do {                                                      \
    ::absl::Status kgrad_status_ = (expr);                  \
    if (!kgrad_status_.ok()) return kgrad_status_;          \
  } while (false)

// `KGRAD_ASSIGN_OR_RETURN(auto x, Foo());` evaluates the StatusOr, returns its status
// if not ok, and otherwise moves the value into `lhs`.
#define KGRAD_ASSIGN_OR_RETURN(lhs, rexpr) \
  KGRAD_ASSIGN_OR_RETURN_IMPL_(KGRAD_STATUS_CONCAT_(kgrad_statusor_, __LINE__), lhs, rexpr)

#define KGRAD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

// Internal invariants only (never user input): prints and aborts.
#define KGRAD_CHECK(cond)                                                      \
  do {                                                                         \
    if (!(cond)) ::kgrad::internal::CheckFailed(__FILE__, __LINE__, #cond);    \
  } while (false)

namespace kgrad {
namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond);
}  // namespace internal
}  // namespace kgrad

#endif  // KGRAD_CORE_STATUS_MACROS_H_
