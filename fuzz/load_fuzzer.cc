// libFuzzer target: the graph-file loader on arbitrary bytes, read both as a
// binary ModelProto and as text format (ParseModel). A load may fail, never crash,
// hang or leak; a module that loads must save and load again. Seeds:
// fuzz/corpus/load; LLVMFuzzerInitialize: fuzz/fuzz_init.cc.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "fuzz/fuzz_limits.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

void LoadOne(absl::string_view bytes, bool text) {
  absl::StatusOr<std::unique_ptr<Module>> m =
      ParseModel(bytes, text, DefaultRegistry(), "fuzz", fuzz::Limits());
  if (!m.ok()) return;
  // Round trip: what the loader accepted, the saver must write and the loader
  // must read back.
  absl::StatusOr<proto::ModelProto> saved = SaveModel(**m);
  if (!saved.ok()) return;  // e.g. a constant the saver cannot write: an error, fine
  absl::StatusOr<std::unique_ptr<Module>> again =
      LoadModel(*saved, DefaultRegistry(), "fuzz-resaved");
  if (!again.ok()) {
    fuzz::Die("a saved module does not load again", again.status());
  }
}

}  // namespace
}  // namespace kgrad

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes = kgrad::fuzz::Bytes(data, size);
  kgrad::LoadOne(bytes, /*text=*/false);
  kgrad::LoadOne(bytes, /*text=*/true);
  return 0;
}
