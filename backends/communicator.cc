#include "backends/communicator.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace {

absl::Status CheckRoot(int root) {
  if (root == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("root ", root, " is not a rank of a group of 1"));
}

void Copy(const void* in, void* out, int64_t bytes) {
  if (in != out && bytes > 0) std::memmove(out, in, static_cast<size_t>(bytes));
}

}  // namespace

absl::Status NotReducible(DType dtype) {
  return absl::InvalidArgumentError(
      absl::StrCat("collectives reduce f32, f64, i32 or i64 values, got ", DTypeName(dtype)));
}

absl::Status LocalCommunicator::AllReduce(const void* in, void* out, int64_t count, DType dtype,
                                          ReduceOp) {
  Copy(in, out, count * static_cast<int64_t>(DTypeSize(dtype)));
  return absl::OkStatus();
}

absl::Status LocalCommunicator::AllGather(const void* in, void* out, int64_t bytes) {
  Copy(in, out, bytes);
  return absl::OkStatus();
}

absl::Status LocalCommunicator::ReduceScatter(const void* in, void* out, int64_t count,
                                              DType dtype) {
  Copy(in, out, count * static_cast<int64_t>(DTypeSize(dtype)));
  return absl::OkStatus();
}

absl::Status LocalCommunicator::Broadcast(void*, int64_t, int root) { return CheckRoot(root); }

absl::Status LocalCommunicator::Reduce(const void* in, void* out, int64_t count, DType dtype,
                                       int root) {
  if (absl::Status s = CheckRoot(root); !s.ok()) return s;
  Copy(in, out, count * static_cast<int64_t>(DTypeSize(dtype)));
  return absl::OkStatus();
}

absl::Status LocalCommunicator::Agree(uint64_t, absl::string_view) { return absl::OkStatus(); }

}  // namespace kgrad
