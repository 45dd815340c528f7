#pragma once
// Walking the autograd graph behind a tensor: the fused kernels' tests count their nodes.
#include <torch/types.h>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab::testutil {

/// The autograd nodes reachable from t's grad_fn, each once (none for a tensor without one).
inline std::vector<torch::autograd::Node*> graph_nodes(const torch::Tensor& t) {
  std::set<torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> order, todo{t.grad_fn().get()};
  while (!todo.empty()) {
    auto* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    order.push_back(n);
    for (const auto& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return order;
}

/// How many of those nodes have a name that contains every one of `parts`.
inline int nodes_named(const torch::Tensor& t, std::initializer_list<std::string_view> parts) {
  const auto nodes = graph_nodes(t);
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [&](torch::autograd::Node* n) {
    const std::string name = n->name();
    return std::all_of(parts.begin(), parts.end(), [&](std::string_view p) { return name.find(p) != std::string::npos; });
  }));
}

}  // namespace attnlab::testutil
