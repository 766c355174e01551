// GraphBuilder: writes graphs in C++. Errors (a bad attribute, an unknown
// primitive) are sticky: the first one is kept, later calls still return usable
// placeholder nodes, and Return() reports it. Nested builders (If, While,
// Closure) share the error with their parent.
//
//   GraphBuilder b(&module, "f");
//   AnfNode* x = b.Param("x", DType::kFloat64, {3});
//   AnfNode* y = b.Op(PrimId::kMul, {x, x});
//   absl::StatusOr<FuncGraph*> f = b.Return(b.Op(PrimId::kReduceSum, {y}));
#ifndef KGRAD_CORE_BUILDER_H_
#define KGRAD_CORE_BUILDER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/module.h"

namespace kgrad {

class GraphBuilder {
 public:
  // Starts a new graph (nested in `parent` when given). Top-level graphs made by a
  // builder are public (kept by garbage collection).
  GraphBuilder(Module* module, absl::string_view name, FuncGraph* parent = nullptr);
  // Adds nodes to an existing graph.
  explicit GraphBuilder(FuncGraph* graph);

  FuncGraph* graph() const { return graph_; }
  Module* module() const { return module_; }
  const absl::Status& status() const;
  void SetError(absl::Status s);

  Parameter* Param(std::string name, AbstractPtr declared = nullptr);
  Parameter* Param(std::string name, DType dtype, Shape shape);
  // A weight of the module, created on first use (by name) with `init`.
  AnfNode* Weight(const std::string& name, const Tensor& init);

  ValueNode* Const(Value v);
  ValueNode* Int(int64_t v) { return Const(Value(Scalar::Int(v))); }
  ValueNode* Float(double v) { return Const(Value(Scalar::Float(v))); }
  ValueNode* Bool(bool v) { return Const(Value(Scalar::Bool(v))); }
  ValueNode* GraphRef(FuncGraph* g) { return Const(Value::Graph(g)); }
  ValueNode* PrimRef(PrimId id, AttrMap attrs = {});

  // An application of primitive `id` to `args`.
  CNode* Op(PrimId id, std::vector<AnfNode*> args, AttrMap attrs = {});
  CNode* Op(const PrimitivePtr& prim, std::vector<AnfNode*> args);
  // An application of any callable node (graph constant, closure, partial, ...).
  CNode* Call(AnfNode* fn, std::vector<AnfNode*> args);
  CNode* Call(FuncGraph* g, std::vector<AnfNode*> args) { return Call(GraphRef(g), std::move(args)); }

  CNode* Tuple(std::vector<AnfNode*> elems) { return Op(PrimId::kMakeTuple, std::move(elems)); }
  CNode* GetItem(AnfNode* tuple, int64_t i) { return Op(PrimId::kTupleGetItem, {tuple, Int(i)}); }
  CNode* Switch(AnfNode* cond, AnfNode* a, AnfNode* b) { return Op(PrimId::kSwitch, {cond, a, b}); }
  CNode* Partial(AnfNode* fn, std::vector<AnfNode*> bound);

  // Control flow, emitted in functional form.
  using BranchFn = std::function<AnfNode*(GraphBuilder&)>;
  // switch(cond, @then, @else)() with the branches as nested graphs that may use
  // this graph's nodes as free variables.
  CNode* If(AnfNode* cond, const BranchFn& then_fn, const BranchFn& else_fn);

  using LoopCondFn = std::function<AnfNode*(GraphBuilder&, absl::Span<AnfNode* const>)>;
  using LoopBodyFn =
      std::function<std::vector<AnfNode*>(GraphBuilder&, absl::Span<AnfNode* const>)>;
  // A while loop as a tail-recursive nested graph:
  //   @loop(s...) = switch(cond(s...), @body, @exit)()
  //   @body()     = @loop(body(s...))        (nested in @loop)
  //   @exit()     = (s...)
  // Returns the final state, one node per state variable.
  std::vector<AnfNode*> While(std::vector<AnfNode*> init, const LoopCondFn& cond,
                              const LoopBodyFn& body, absl::string_view name = "while");
  // The same with `num_state` state variables whose initial values `init` makes
  // (in this graph) after the body is built: for state whose initial value
  // depends on what the body computes (the empty accumulators of ONNX Loop's scan
  // outputs take the element type of the body's outputs).
  using LoopInitFn = std::function<std::vector<AnfNode*>(GraphBuilder&)>;
  std::vector<AnfNode*> While(size_t num_state, const LoopInitFn& init, const LoopCondFn& cond,
                              const LoopBodyFn& body, absl::string_view name = "while");

  using ClosureFn =
      std::function<AnfNode*(GraphBuilder&, absl::Span<AnfNode* const> params)>;
  // A nested graph with `num_params` parameters, as a closure value.
  ValueNode* Closure(absl::string_view name, int num_params, const ClosureFn& fn);

  // Sets the output and returns the graph, or the first error seen.
  absl::StatusOr<FuncGraph*> Return(AnfNode* output);

 private:
  GraphBuilder(Module* module, FuncGraph* graph, std::shared_ptr<absl::Status> status);
  GraphBuilder Nested(absl::string_view name);
  ValueNode* Placeholder();

  Module* module_;
  FuncGraph* graph_;
  // The first error, shared with nested builders; made when first needed (most
  // builders never see an error, and the AD makes one per rule it applies).
  std::shared_ptr<absl::Status> status_;
};

}  // namespace kgrad

#endif  // KGRAD_CORE_BUILDER_H_
