#include "core/printer.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/manager.h"

namespace kgrad {
namespace {

// Canonical names, assigned in printing order.
struct Canon {
  absl::flat_hash_map<const AnfNode*, std::string> nodes;
  absl::flat_hash_map<const FuncGraph*, std::string> graphs;
  int next_node = 0;
  const std::string& Graph(const FuncGraph* g) {
    auto it = graphs.find(g);
    if (it != graphs.end()) return it->second;
    return graphs[g] = absl::StrCat("g", graphs.size());
  }
};

std::string GraphName(const FuncGraph* g, Canon* canon) {
  return canon != nullptr ? canon->Graph(g) : g->name();
}

std::string Ref(const AnfNode* n, const PrintOptions& o, Canon* canon = nullptr) {
  if (const ValueNode* v = n->AsValue()) {
    const Value& val = v->value();
    if (val.is_tensor()) return val.tensor().DebugString(o.max_tensor_elements);
    if (val.is_graph()) return absl::StrCat("@", GraphName(val.graph(), canon));
    return val.ToString();
  }
  if (const Parameter* p = n->AsParameter(); p != nullptr && p->is_weight()) {
    return absl::StrCat("$", p->DebugName());
  }
  if (canon != nullptr) {
    auto it = canon->nodes.find(n);
    if (it != canon->nodes.end()) return absl::StrCat("%", it->second);
    return absl::StrCat("%?", n->DebugName());
  }
  return absl::StrCat("%", n->name().empty() ? absl::StrCat(n->id()) : n->name());
}

std::string TypeSuffix(const AnfNode* n, const PrintOptions& o) {
  if (!o.show_types || n->abstract() == nullptr) return "";
  return absl::StrCat(" : ", n->abstract()->ToString());
}

// "%y = callee(args) : type": one application's line.
std::string Application(const CNode* c, const PrintOptions& o, Canon* canon) {
  std::vector<std::string> args;
  for (size_t i = 1; i < c->size(); ++i) args.push_back(Ref(c->input(i), o, canon));
  std::string callee = c->size() > 0 ? Ref(c->input(0), o, canon) : "<no callee>";
  return absl::StrCat(Ref(c, o, canon), " = ", callee, "(", absl::StrJoin(args, ", "), ")",
                      TypeSuffix(c, o));
}

class Printer {
 public:
  Printer(Module& m, const PrintOptions& o) : module_(m), manager_(m.manager()), o_(o) {
    if (o.canonical) canon_ = std::make_unique<Canon>();
    for (const auto& g : m.graphs()) {
      if (g->parent() != nullptr) children_[g->parent()].push_back(g.get());
    }
  }

  void PrintGraph(FuncGraph* g, int indent) {
    std::string pad(indent * 2, ' ');
    Canon* canon = canon_.get();
    std::vector<std::string> params;
    for (size_t i = 0; i < g->parameters().size(); ++i) {
      Parameter* p = g->parameters()[i];
      if (canon != nullptr) canon->nodes[p] = absl::StrCat("p", canon->next_node++);
      params.push_back(Ref(p, o_, canon) + TypeSuffix(p, o_));
    }
    const GraphInfo& info = manager_.Info(g);
    std::string header = absl::StrCat(pad, "@", GraphName(g, canon), "(", absl::StrJoin(params, ", "), ")");
    if (g->custom_bprop() != nullptr) absl::StrAppend(&header, " bprop=@", GraphName(g->custom_bprop(), canon));
    if (g->remat() != RematPolicy::kEverythingSaveable) {
      absl::StrAppend(&header, " remat=", RematPolicyName(g->remat()));
    }
    absl::StrAppend(&header, " {");
    if (g->parent() != nullptr && !info.fvs.empty()) {
      std::vector<std::string> fvs;
      for (AnfNode* v : info.fvs) fvs.push_back(Ref(v, o_, canon));
      absl::StrAppend(&header, "  # free: ", absl::StrJoin(fvs, ", "));
    }
    out_ += header + "\n";
    // Applications are named before nested graphs print (they may read them).
    if (canon != nullptr) {
      for (CNode* c : info.order) canon->nodes[c] = absl::StrCat(canon->next_node++);
    }
    for (FuncGraph* child : children_[g]) PrintGraph(child, indent + 1);
    for (CNode* c : info.order) absl::StrAppend(&out_, pad, "  ", Application(c, o_, canon), "\n");
    absl::StrAppend(&out_, pad, "  return ",
                    g->output() != nullptr ? Ref(g->output(), o_, canon) : "<none>", "\n");
    absl::StrAppend(&out_, pad, "}\n");
  }

  std::string PrintAll() {
    for (const auto& w : module_.weights()) {
      absl::StrAppend(&out_, Ref(w.get(), o_), TypeSuffix(w.get(), o_));
      if (o_.show_weight_values && w->default_value().has_value()) {
        absl::StrAppend(&out_, " = ", w->default_value()->DebugString(o_.max_tensor_elements));
      }
      out_ += "\n";
    }
    for (const auto& g : module_.graphs()) {
      if (g->parent() == nullptr) PrintGraph(g.get(), 0);
    }
    return out_;
  }

  std::string out_;

 private:
  Module& module_;
  Manager& manager_;
  const PrintOptions& o_;
  absl::flat_hash_map<FuncGraph*, std::vector<FuncGraph*>> children_;
  std::unique_ptr<Canon> canon_;
};

std::string DotEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

}  // namespace

std::string PrintModule(Module& module, const PrintOptions& options) {
  Printer p(module, options);
  return p.PrintAll();
}

std::string PrintGraph(FuncGraph* graph, const PrintOptions& options) {
  Printer p(*graph->module(), options);
  p.PrintGraph(graph, 0);
  return p.out_;
}

std::string PrintApplication(const CNode* node, const PrintOptions& options) {
  return Application(node, options, nullptr);
}

// Nested graphs are clusters inside their parents' clusters, so a closure is drawn
// inside the graph that creates it; edges are listed after all clusters.
std::string ToDot(Module& module) {
  Manager& manager = module.manager();
  PrintOptions o;
  o.max_tensor_elements = 3;
  std::string out = "digraph kgrad {\n  compound=true;\n  node [shape=box, fontsize=10];\n";
  auto id = [](const AnfNode* n) { return absl::StrCat("n", n->id()); };
  for (const auto& w : module.weights()) {
    absl::StrAppend(&out, "  ", id(w.get()), " [label=\"", DotEscape(Ref(w.get(), o)),
                    "\", shape=cylinder];\n");
  }
  absl::flat_hash_map<const FuncGraph*, std::vector<FuncGraph*>> children;
  std::vector<FuncGraph*> tops;
  for (const auto& gp : module.graphs()) {
    if (gp->parent() != nullptr) {
      children[gp->parent()].push_back(gp.get());
    } else {
      tops.push_back(gp.get());
    }
  }
  std::string edges;
  int cluster = 0;
  // Iterative (a hostile file may nest deeply): `true` opens a graph's cluster and
  // its nodes, `false` closes it after its children.
  std::vector<std::pair<FuncGraph*, bool>> stack;
  for (auto it = tops.rbegin(); it != tops.rend(); ++it) stack.emplace_back(*it, true);
  while (!stack.empty()) {
    auto [g, open] = stack.back();
    stack.pop_back();
    std::string indent(2 + 2 * std::min(g->depth(), 16), ' ');
    if (!open) {
      absl::StrAppend(&out, indent, "}\n");
      continue;
    }
    const GraphInfo& info = manager.Info(g);
    absl::StrAppend(&out, indent, "subgraph cluster_", cluster++, " {\n", indent, "  label=\"@",
                    DotEscape(g->name()), "\";\n");
    for (Parameter* p : g->parameters()) {
      absl::StrAppend(&out, indent, "  ", id(p), " [label=\"", DotEscape(Ref(p, o)), "\", shape=ellipse];\n");
    }
    for (CNode* c : info.order) {
      std::string callee = c->size() > 0 ? Ref(c->input(0), o) : "?";
      absl::StrAppend(&out, indent, "  ", id(c), " [label=\"", DotEscape(Ref(c, o)), " = ", DotEscape(callee),
                      "\"];\n");
    }
    std::string ret = absl::StrCat("ret", cluster);
    absl::StrAppend(&out, indent, "  ", ret, " [label=\"return\", shape=plaintext];\n");
    for (CNode* c : info.order) {
      for (size_t i = 1; i < c->size(); ++i) {
        const AnfNode* in = c->input(i);
        if (!in->is_value()) absl::StrAppend(&edges, "  ", id(in), " -> ", id(c), ";\n");
      }
    }
    if (g->output() != nullptr && !g->output()->is_value()) {
      absl::StrAppend(&edges, "  ", id(g->output()), " -> ", ret, ";\n");
    }
    stack.emplace_back(g, false);
    auto kids = children.find(g);
    if (kids != children.end()) {
      for (auto it = kids->second.rbegin(); it != kids->second.rend(); ++it) stack.emplace_back(*it, true);
    }
  }
  out += edges;
  out += "}\n";
  return out;
}

}  // namespace kgrad
