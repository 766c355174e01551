#include "tools/cli.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/executor.h"
#include "core/infer.h"
#include "core/printer.h"
#include "core/status_macros.h"
#include "tools/cli_ad.h"
#include "tools/cli_bench.h"
#include "tools/cli_common.h"
#include "tools/cli_demo.h"
#include "tools/cli_onnx.h"
#include "tools/cli_finetune.h"
#include "tools/cli_train.h"

namespace kgrad {
namespace cli {
namespace {

constexpr char kUsage[] = R"(kgrad: automatic differentiation of programs held as graphs

usage: kgrad COMMAND FILE [options]

FILE is a kgrad graph file: binary protobuf (.pb) or text format (.pbtxt), or an
ONNX model (.onnx, imported on the fly).

commands:
  print FILE [--no-types]       the IR as text (nested graphs inside their parents),
                                with inferred types when the entry's inputs are declared
  dot FILE [--grad] [--wrt all|weights|0,2] [--optimize]
                                Graphviz DOT of every graph, nested graphs as clusters in
                                their parents; --grad draws the gradient graph beside the
                                forward one
  run FILE --input NAME=VALUE... [--weight NAME=FILE.npy]... [--output DIR] [--graph G]
      [--profile] [--max-seconds S] [--max-tail-calls N] [--flush-denormals]
                                run the entry graph (or G); VALUE is a .npy file, or a
                                literal for a scalar input; outputs are summarised and,
                                with --output, written as DIR/out[_i].npy (leaves nested
                                deeper than 8 tuples as out_leafK); --profile adds the
                                time spent per primitive; --max-seconds stops the run
                                after S seconds (default: none), --max-tail-calls after N
                                tail calls, i.e. N/2 loop iterations (default 100000000);
                                --flush-denormals computes subnormal floats as zero
                                (faster where values underflow; x86-64)
  grad FILE -o OUT [--wrt all|weights|0,2] [--sens] [--value] [--has-aux] [--optimize]
      [--graph G] [--remat nothing_saveable|dots_saveable|everything_saveable]
      [--residuals SPEC] [--split [--verify] [--input NAME=VALUE]...]
                                write the gradient graph (entry of OUT) of the entry graph
                                with respect to all inputs, the weights, or input positions;
                                --sens adds the output sensitivity as a last input;
                                --value returns (value, gradients), as JAX value_and_grad;
                                --has-aux: the graph returns a pair (loss, aux), only loss
                                is differentiated and aux is returned as is: (gradients,
                                aux), or ((loss, aux), gradients) with --value;
                                --optimize runs the post-AD optimiser (a plain kernel graph);
                                --remat checkpoints every graph the entry calls: their
                                backward passes recompute forward values instead of saving
                                them (dots_saveable: all but matmul/einsum/conv outputs);
                                --residuals chooses what each rule saves: FORM, OP=FORM,
                                @NODE=FORM or save_only_these_names=A|B, comma-separated
                                (forms save_inputs, save_outputs, recompute);
                                --split writes fwd_G(x...) -> (value, residuals...), the
                                entry, and bwd_G(residuals..., dout) -> gradients, cut
                                where the optimised gradient starts reading dout; --verify
                                runs fwd then bwd against the whole at random inputs
  jvp FILE -o OUT [--no-optimize] [--graph G]
                                write the forward-mode graph (x..., x_dot...) -> (out, J x_dot),
                                derived by transposing the reverse graph and optimised
  check FILE [--order 1|2|3] [--seed N] [--input NAME=VALUE]... [--graph G]
      [--residuals SPEC]
                                float64 central-difference check of derivatives up to the
                                order, at random inputs (seed printed); exit 1 above tolerance;
                                --residuals as for grad
  check FILE --precision [--input NAME=VALUE]... [--top N] [--no-weights] [--seed N]
                                float32 against float64, node by node: value_and_grad of the
                                output run in both at the same inputs; per application its
                                error, its inputs' error, its kernel's own rounding, and the
                                masks and indices that differ (kinks crossed)
  demo [--steps N] [--lr X] [--hidden N] [--seed N]
                                train a small MLP on generated data (three spirals) with
                                its optimised value-and-gradient graph; the loss falls
  train FILE [--steps N] [--input NAME=VALUE ...] [--print-every N] [--output DIR]
                                run a training-step graph N times (default 100): it returns
                                (loss, new weights), one per weight in file order, which the
                                next step uses; prints the loss, writes the final weights
      [--data-parallel]         under mpirun: each rank trains on its rows of the batch,
      [--collective-timeout S]  gradients averaged across ranks by all_reduce in buckets
      [--bucket-mb M]           of M MB (default 25; --gradient-sum: summed); inputs named
      [--replicated A,B]        by --replicated go whole to every rank; a collective that
      [--gradient-sum]          waits longer than S seconds (default 300) fails
  train-artifacts MODEL --loss cross_entropy|nll|mse|bce_with_logits|none -o DIR
      [--optimizer sgd|momentum|adam|adamw] [--lr X] [--betas B1,B2] [--eps X]
      [--weight-decay X] [--momentum X] [--dampening X] [--nesterov] [--amsgrad]
      [--maximize] [--clip-norm X] [--schedule constant|step|cosine] [--step-size N]
      [--gamma X] [--t-max N] [--eta-min X] [--warmup-steps N] [--warmup-start X]
      [--probability-targets] [--label-smoothing X] (cross_entropy)
      [--freeze REGEX]          training artifacts of MODEL (.onnx or graph file): the loss
                                against a new input 'target', gradients of the weights not
                                frozen, torch.optim's update (defaults: adamw, torch's
                                values), as DIR/training.pb and DIR/checkpoint.ckpt
  train DIR --data NAME=FILE.npy ... [--batch N] [--epochs E] [--shuffle] [--seed S]
      [--drop-last] [--eval NAME=FILE.npy ...] [--save-every K] [--resume]
      [--print-every N] [--output OUT] [--data-parallel [--bucket-mb M]]
                                train the artifacts in DIR on batches of the arrays (the
                                model's inputs and 'target' by name; the last partial batch
                                kept unless --drop-last): a progress bar on a terminal,
                                eval loss per epoch, DIR/last.ckpt every K steps and at the
                                end, --resume from it (bit-identical), final weights as
                                OUT/<weight>.npy; under mpirun with --data-parallel each
                                rank takes its share of every batch, gradients averaged
  bench FILE [--input NAME=X.npy ...] [--dim NAME=N ...] [--grad [--remat POLICY|auto
      --memory-budget B] [--residuals SPEC]] [--jvp] [--repeat N] [--warmup N]
      [--flush-denormals] [--profile]
                                time the forward pass (and the training step, the Jvp):
                                median and spread of N runs (default 10); inputs not
                                given are random, symbolic dims sized by --dim;
                                --profile: N more runs give the time per primitive;
                                with --grad also the step's peak MiB above its inputs and
                                outputs, under --remat and --residuals as for grad;
                                --remat auto plans what to recompute inside the graph so
                                that the peak is at most B (bytes, 64MiB, or 0.5 of the
                                save-everything peak) and prints the plan
  import-onnx MODEL.onnx -o OUT [--remat nothing_saveable|dots_saveable]
                                the ONNX model as a kgrad graph file (.pb or .pbtxt):
                                initializers become weights, shape chains are folded;
                                --remat outlines every residual block into a called graph
                                with that checkpoint policy (also: grad MODEL.onnx --remat)
  export-onnx FILE -o OUT.onnx [--graph G]
                                a first-order graph (e.g. from grad --optimize) as ONNX
                                opset 17 with weights as initializers
  onnx-ops                      the ONNX ops the importer maps, as a Markdown table
  help [COMMAND]                this text, or one command's (also: kgrad COMMAND --help)

Errors name the file, graph and node, and exit with status 1.
)";

// The block of kUsage that describes `command` (its line and the indented lines
// after it), or "" when there is none.
std::string CommandUsage(const std::string& command) {
  const std::string text = kUsage;
  const std::string head = "\n  " + command;
  size_t at = 0;
  while ((at = text.find(head, at)) != std::string::npos) {
    char next = at + head.size() < text.size() ? text[at + head.size()] : '\n';
    if (next == ' ' || next == '\n') break;
    at += head.size();
  }
  if (at == std::string::npos) return "";
  size_t end = at + 1;
  // Continuation lines start with more than two spaces.
  while ((end = text.find('\n', end)) != std::string::npos && text.compare(end + 1, 3, "   ") == 0) ++end;
  return "usage: kgrad " + text.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 2);
}

// `kgrad help` prints everything; `kgrad help CMD` and `kgrad CMD --help` one command.
int Help(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    out << kUsage;
    return 0;
  }
  std::string usage = CommandUsage(args[0]);
  if (usage.empty()) {
    err << "error: unknown command '" << args[0] << "' (try: kgrad help)\n";
    return 2;
  }
  out << usage;
  return 0;
}

// Types help the reader; a graph without declared inputs prints without them.
void InferIfPossible(Module& m) {
  if (m.entry() != nullptr) (void)InferGraph(m.entry());
}

int Print(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> args = ParseArgs(argv, {}, {"no-types"});
  if (!args.ok()) return Fail(args.status(), err);
  if (args->positional.size() != 1) return Fail(absl::InvalidArgumentError("print takes one FILE"), err);
  absl::StatusOr<std::unique_ptr<Module>> m = LoadModule(args->positional[0], /*expand=*/false);
  if (!m.ok()) return Fail(m.status(), err);
  PrintOptions o;
  o.show_types = !args->Has("no-types");
  if (o.show_types) InferIfPossible(**m);
  out << PrintModule(**m, o);
  return 0;
}

// --max-seconds S and --max-tail-calls N (positive numbers), --flush-denormals.
absl::StatusOr<ExecutorOptions> RunLimits(const ParsedArgs& args) {
  ExecutorOptions o;
  o.flush_denormals = args.Has("flush-denormals");
  if (args.Has("max-seconds")) {
    std::string text = args.Get("max-seconds");
    if (!absl::SimpleAtod(text, &o.max_run_seconds) || !(o.max_run_seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-seconds wants a positive number of seconds, got '", text, "'"));
    }
  }
  if (args.Has("max-tail-calls")) {
    std::string text = args.Get("max-tail-calls");
    if (!absl::SimpleAtoi(text, &o.max_tail_calls) || o.max_tail_calls <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-tail-calls wants a positive whole number, got '", text, "'"));
    }
  }
  return o;
}

absl::Status RunCommand(const ParsedArgs& args, std::ostream& out) {
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, LoadFileArgument(args, "run"));
  KGRAD_ASSIGN_OR_RETURN(FuncGraph* g, SelectGraph(*m, args));
  KGRAD_ASSIGN_OR_RETURN(std::vector<Value> inputs, ReadInputs(g, args));
  KGRAD_ASSIGN_OR_RETURN(auto weights, ReadWeightOverrides(args));
  KGRAD_ASSIGN_OR_RETURN(ExecutorOptions options, RunLimits(args));
  KGRAD_ASSIGN_OR_RETURN(std::unique_ptr<Executor> e, Executor::Create(g, options));
  Profile profile;
  KGRAD_ASSIGN_OR_RETURN(Value result, e->Run(std::move(inputs), weights, args.Has("profile") ? &profile : nullptr));
  PrintSummary(result, "out", out);
  if (args.Has("profile")) out << "time per primitive:\n" << profile.ToString();
  if (args.Has("output")) KGRAD_RETURN_IF_ERROR(WriteOutputs(result, args.Get("output"), "out"));
  return absl::OkStatus();
}

int Run(const std::vector<std::string>& argv, std::ostream& out, std::ostream& err) {
  return CommandMain(argv, {"input", "weight", "output", "graph", "max-seconds", "max-tail-calls"},
                     {"profile", "flush-denormals"}, RunCommand, out, err);
}

}  // namespace

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  using Command = std::function<int(const std::vector<std::string>&, std::ostream&, std::ostream&)>;
  static const std::map<std::string, Command>* const commands = new std::map<std::string, Command>{
      {"help", Help}, {"--help", Help}, {"-h", Help}, {"print", Print}, {"dot", DotCommand},
      {"run", Run},   {"grad", GradCommand},  {"check", CheckCommand},
      {"jvp", JvpCommand},    {"demo", DemoCommand}, {"train", TrainCommand},
      {"train-artifacts", TrainArtifactsCommand}, {"bench", BenchCommand}, {"import-onnx", ImportOnnxCommand},
      {"export-onnx", ExportOnnxCommand}, {"onnx-ops", OnnxOpsCommand},
  };
  if (args.empty()) {
    err << kUsage;
    return 2;
  }
  if (args.size() > 1 && (args[1] == "--help" || args[1] == "-h")) return Help({args[0]}, out, err);
  auto it = commands->find(args[0]);
  if (it == commands->end()) {
    err << "error: unknown command '" << args[0] << "' (try: kgrad help)\n";
    return 2;
  }
  return it->second(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
}

}  // namespace cli
}  // namespace kgrad
