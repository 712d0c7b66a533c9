// Left-recursion check: strongly connected components of the "can start with" graph between
// rules (iterative Tarjan, so deep grammars cannot overflow the C++ stack).
#include "grammar/gbnf_validate.h"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

namespace moetier::grammar {

namespace {

struct Edge {
  uint32_t to = 0;
  bool tail = false;  // the reference is the last item of its alternative
};

// Component id of every rule.
std::vector<int> strongly_connected(const std::vector<std::vector<Edge>>& adj) {
  const size_t n = adj.size();
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<bool> on_stack(n, false);
  std::vector<uint32_t> stack;
  std::vector<std::pair<uint32_t, size_t>> calls;  // (rule, next edge to look at)
  int counter = 0;
  int n_comp = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    index[s] = low[s] = counter++;
    stack.push_back(s);
    on_stack[s] = true;
    calls.emplace_back(s, 0);
    while (!calls.empty()) {
      auto& [v, i] = calls.back();
      if (i < adj[v].size()) {
        const uint32_t w = adj[v][i++].to;
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = true;
          calls.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const uint32_t done = v;
      calls.pop_back();
      if (low[done] == index[done]) {
        uint32_t w = 0;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          comp[w] = n_comp;
        } while (w != done);
        ++n_comp;
      }
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[done]);
    }
  }
  return comp;
}

}  // namespace

std::vector<bool> nullable_rules(const Grammar& g) {
  const auto& el = g.elements();
  std::vector<bool> nullable(g.rules().size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules().size(); ++r) {
      if (nullable[r]) continue;
      for (const uint32_t start : g.rules()[r].alternatives) {
        uint32_t p = start;
        while (el[p].kind == ElementKind::kRule && nullable[el[p].index]) ++p;
        if (el[p].kind == ElementKind::kEnd) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

Status check_left_recursion(const Grammar& g, const std::vector<std::string>& where) {
  const auto& el = g.elements();
  const std::vector<bool> nullable = nullable_rules(g);
  std::vector<std::vector<Edge>> adj(g.rules().size());
  for (size_t r = 0; r < g.rules().size(); ++r) {
    for (const uint32_t start : g.rules()[r].alternatives) {
      for (uint32_t p = start; el[p].kind == ElementKind::kRule; ++p) {
        adj[r].push_back(Edge{.to = el[p].index, .tail = el[p + 1].kind == ElementKind::kEnd});
        if (!nullable[el[p].index]) break;
      }
    }
  }
  const std::vector<int> comp = strongly_connected(adj);
  for (uint32_t u = 0; u < adj.size(); ++u) {
    for (const Edge& e : adj[u]) {
      if (e.tail || comp[e.to] != comp[u]) continue;
      // A shortest path e.to -> ... -> u inside the component closes the cycle.
      std::vector<int64_t> prev(adj.size(), -1);
      std::deque<uint32_t> queue{e.to};
      prev[e.to] = e.to;
      while (!queue.empty() && prev[u] < 0) {
        const uint32_t v = queue.front();
        queue.pop_front();
        for (const Edge& f : adj[v]) {
          if (comp[f.to] == comp[u] && prev[f.to] < 0) {
            prev[f.to] = v;
            queue.push_back(f.to);
          }
        }
      }
      std::vector<uint32_t> path{u};
      for (uint32_t v = u; v != e.to;) {
        v = static_cast<uint32_t>(prev[v]);
        path.push_back(v);
      }
      path.push_back(u);
      std::reverse(path.begin() + 1, path.end() - 1);
      std::string chain;
      for (size_t i = 0; i < path.size(); ++i) chain += (i ? " -> " : "") + g.rules()[path[i]].name;
      const std::string origin = g.rules()[u].origin;
      return Status::bad_input(fmt::format("{}: left recursion in rule '{}': {} (a rule must match some input "
                                           "before it can refer to itself again)",
                                           where[u], origin, chain));
    }
  }
  return Status::ok();
}

}  // namespace moetier::grammar
