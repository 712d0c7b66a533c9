#include "bench/configs.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace moetier::bench {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Knob numeric(std::string name, int64_t v) {
  return {.name = std::move(name), .text = std::to_string(v), .numeric = static_cast<double>(v)};
}

Knob text(std::string name, std::string v) { return {.name = std::move(name), .text = std::move(v), .numeric = std::nullopt}; }

std::vector<std::string> knob_texts(const TestSpec& t) {
  std::vector<std::string> out;
  for (const Knob& k : test_knobs(t)) out.push_back(k.text);
  return out;
}

}  // namespace

std::vector<Knob> test_knobs(const TestSpec& t) {
  return {
      text("model", t.model),
      numeric("n_gpu_layers", t.n_gpu_layers),
      numeric("n_cpu_moe", t.n_cpu_moe),
      text("use_mmap", t.use_mmap ? "1" : "0"),
      text("tensor_buft_overrides", t.tensor_overrides.empty() ? "none" : t.tensor_overrides),
      numeric("n_batch", t.n_batch),
      numeric("n_ubatch", t.n_ubatch),
      text("type_k", lower(dtype_name(t.type_k))),
      text("type_v", lower(dtype_name(t.type_v))),
      text("flash_attn", std::to_string(t.flash_attn)),
      numeric("n_threads", t.n_threads),
      numeric("n_depth", t.n_depth),
  };
}

std::string test_kind(const TestSpec& test) {
  TestSpec t = test;
  t.n_depth = 0;
  return test_name(t);
}

std::vector<size_t> configuration_of(const std::vector<TestSpec>& tests) {
  std::vector<std::vector<std::string>> seen;
  std::vector<size_t> index;
  for (const TestSpec& t : tests) {
    const auto key = knob_texts(t);
    const auto it = std::find(seen.begin(), seen.end(), key);
    index.push_back(static_cast<size_t>(it - seen.begin()));
    if (it == seen.end()) seen.push_back(key);
  }
  return index;
}

size_t count_configurations(const std::vector<TestSpec>& tests) {
  const auto index = configuration_of(tests);
  return index.empty() ? 0 : *std::max_element(index.begin(), index.end()) + 1;
}

std::vector<std::string> swept_knobs(const std::vector<TestSpec>& tests) {
  std::vector<std::string> out;
  if (tests.empty()) return out;
  const auto first = test_knobs(tests[0]);
  for (size_t k = 0; k < first.size(); ++k) {
    for (const TestSpec& t : tests) {
      if (test_knobs(t)[k].text != first[k].text) {
        out.push_back(first[k].name);
        break;
      }
    }
  }
  return out;
}

std::vector<Slot> repetition_order(size_t n_tests, int64_t repetitions, bool interleave) {
  std::vector<Slot> order;
  order.reserve(n_tests * static_cast<size_t>(std::max<int64_t>(repetitions, 0)));
  if (interleave) {
    for (int64_t r = 0; r < repetitions; ++r)
      for (size_t t = 0; t < n_tests; ++t) order.push_back({.test = t, .repetition = r});
  } else {
    for (size_t t = 0; t < n_tests; ++t)
      for (int64_t r = 0; r < repetitions; ++r) order.push_back({.test = t, .repetition = r});
  }
  return order;
}

std::vector<ComparisonPair> plan_comparisons(const std::vector<TestSpec>& tests, bool force) {
  std::vector<ComparisonPair> pairs;
  const auto config = configuration_of(tests);
  const size_t n_configs = count_configurations(tests);
  if (n_configs < 2) return pairs;
  // The first test of each configuration stands for its knobs.
  std::vector<size_t> first_test(n_configs, tests.size());
  for (size_t i = tests.size(); i-- > 0;) first_test[config[i]] = i;
  const auto base_knobs = test_knobs(tests[first_test[0]]);
  for (size_t c = 1; c < n_configs; ++c) {
    const auto knobs = test_knobs(tests[first_test[c]]);
    std::vector<std::string> diffs;
    for (size_t k = 0; k < knobs.size(); ++k) {
      if (knobs[k].text != base_knobs[k].text) {
        diffs.push_back(fmt::format("{} {} -> {}", knobs[k].name, base_knobs[k].text, knobs[k].text));
      }
    }
    if (!force && (n_configs != 2 || diffs.size() != 1)) return {};
    const std::string what = fmt::format("{}", fmt::join(diffs, ", "));
    for (size_t i = 0; i < tests.size(); ++i) {
      if (config[i] != 0) continue;
      for (size_t j = 0; j < tests.size(); ++j) {
        if (config[j] == c && test_kind(tests[j]) == test_kind(tests[i])) {
          pairs.push_back({.a = i, .b = j, .what = what});
          break;
        }
      }
    }
  }
  return pairs;
}

}  // namespace moetier::bench
