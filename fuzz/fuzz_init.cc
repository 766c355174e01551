// LLVMFuzzerInitialize of every fuzz target. Protobuf logs every invalid UTF-8
// string it parses; the loader's Status already says what is wrong, and the
// logging would dominate the fuzzer's time.
#include "google/protobuf/stubs/logging.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
