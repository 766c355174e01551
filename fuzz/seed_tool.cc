// Writes the fuzzers' seed corpus (fuzz/corpus/load): every graph file given on
// the command line in both formats, plus small programs built in C++ (an MLP, a
// conv net, a tanh RNN with its gradient). Plain files; fuzz/run.sh puts the
// pipeline target's format byte (0 binary, 1 text) in front of each.
//   seed_tool OUT_DIR FILE.pbtxt...
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "ad/grad_operation.h"
#include "examples/programs.h"
#include "ops/registry.h"
#include "proto/model_io.h"

namespace kgrad {
namespace {

bool Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return static_cast<bool>(out);
}

// Both formats of `m`, named after `name`.
bool Emit(Module& m, const std::string& name, const std::string& dir) {
  absl::StatusOr<proto::ModelProto> p = SaveModel(m);
  absl::StatusOr<std::string> text = ModelToText(m);
  if (!p.ok() || !text.ok()) {
    std::cerr << name << ": " << (p.ok() ? text.status() : p.status()) << "\n";
    return false;
  }
  std::string binary;
  p->SerializeToString(&binary);
  return Write(dir + "/" + name + ".pb", binary) && Write(dir + "/" + name + ".pbtxt", *text);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return base.substr(0, base.find('.'));
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: seed_tool OUT_DIR FILE.pbtxt...\n";
    return 2;
  }
  std::string dir = argv[1];
  bool ok = true;
  for (int i = 2; i < argc; ++i) {
    absl::StatusOr<std::unique_ptr<Module>> m = LoadModelFile(argv[i], DefaultRegistry());
    if (!m.ok()) {
      std::cerr << m.status() << "\n";
      ok = false;
      continue;
    }
    ok &= Emit(**m, BaseName(argv[i]), dir);
  }
  struct Program {
    const char* name;
    FuncGraph* (*build)(Module*);
  };
  const Program programs[] = {
      {"mlp_small", [](Module* m) { return programs::Mlp(m, 2, {3, 4, 2}, DType::kFloat32); }},
      {"convnet_small", [](Module* m) { return programs::ConvNet(m, 1, 4, 2, 2, 2, DType::kFloat32, true); }},
      {"rnn_small", [](Module* m) { return programs::TanhRnn(m, 3, 1, 2, 3, DType::kFloat64); }},
  };
  for (const Program& pr : programs) {
    Module m(DefaultRegistry());
    FuncGraph* f = pr.build(&m);
    m.set_entry(f);
    ok &= Emit(m, pr.name, dir);
    // Its (unoptimised) gradient: closures, tuples, env ops, switch.
    absl::StatusOr<FuncGraph*> g = GradOperation(/*get_all=*/true)(m, f);
    if (!g.ok()) {
      std::cerr << pr.name << " grad: " << g.status() << "\n";
      ok = false;
      continue;
    }
    m.set_entry(*g);
    ok &= Emit(m, std::string(pr.name) + "_grad", dir);
  }
  // Long loops (a trip-count input) and loops whose state nests deeper each
  // iteration: the pipeline target varies the count.
  const Program loops[] = {
      {"horner_loop", [](Module* m) { return programs::HornerLoop(m, 3, DType::kFloat64); }},
      {"tuple_chain", [](Module* m) { return programs::WrappingLoop(m, false); }},
      {"partial_chain", [](Module* m) { return programs::WrappingLoop(m, true); }},
  };
  for (const Program& pr : loops) {
    Module m(DefaultRegistry());
    m.set_entry(pr.build(&m));
    ok &= Emit(m, pr.name, dir);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kgrad

int main(int argc, char** argv) { return kgrad::Main(argc, argv); }
