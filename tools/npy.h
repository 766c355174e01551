// NumPy .npy files (format versions 1.0, 2.0 and 3.0 read; 1.0 written): C order,
// little-endian f4/f8/i4/i8, b1, the narrow u1/i1/i2/u2/u4/u8/f2, and V2 for
// bfloat16. Readers bound everything a hostile file could ask for.
#ifndef KGRAD_TOOLS_NPY_H_
#define KGRAD_TOOLS_NPY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"

namespace kgrad {

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view source = "<npy>");
std::string SerializeNpy(const Tensor& t);

absl::StatusOr<Tensor> ReadNpyFile(const std::string& path);
absl::Status WriteNpyFile(const Tensor& t, const std::string& path);

}  // namespace kgrad

#endif  // KGRAD_TOOLS_NPY_H_
