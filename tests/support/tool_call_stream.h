// The streaming tool-call parser against the whole-text parse: `text` fed in random pieces
// (60 trials, pieces of 0-2 or 0-12 bytes) must give, concatenated, the same content and the
// same calls as parse_tool_calls on all of it. A call's first delta carries its id and name
// and no arguments; later deltas carry only argument text.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>

#include "server/tool_calls.h"

namespace moetier::testing {

inline void check_tool_call_stream(const std::string& text, const server::ToolCallParseOptions& options,
                                   std::mt19937& rng) {
  using namespace moetier::server;
  const ParsedReply whole = parse_tool_calls(text, options);
  for (int trial = 0; trial < 60; ++trial) {
    ToolCallStream stream(options);
    ParsedReply got;
    auto take = [&](const ToolStreamDelta& d) {
      got.content += d.content;
      for (const ToolCallDelta& c : d.tool_calls) {
        if (!c.id.empty()) {
          ASSERT_EQ(c.index, got.tool_calls.size());
          ASSERT_TRUE(c.arguments.empty());
          got.tool_calls.push_back({.id = c.id, .name = c.name});
        } else {
          ASSERT_LT(c.index, got.tool_calls.size());
          EXPECT_TRUE(c.name.empty());
          got.tool_calls[c.index].arguments += c.arguments;
        }
      }
    };
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t n = std::min<size_t>(text.size() - pos, std::uniform_int_distribution<size_t>(0, trial % 3 == 0 ? 2 : 12)(rng));
      take(stream.push(std::string_view(text).substr(pos, n)));
      pos += n;
    }
    take(stream.finish());
    ASSERT_EQ(got.content, whole.content) << text;
    ASSERT_EQ(got.tool_calls.size(), whole.tool_calls.size()) << text;
    for (size_t i = 0; i < got.tool_calls.size(); ++i) {
      EXPECT_EQ(got.tool_calls[i].id, whole.tool_calls[i].id);
      EXPECT_EQ(got.tool_calls[i].name, whole.tool_calls[i].name);
      EXPECT_EQ(got.tool_calls[i].arguments, whole.tool_calls[i].arguments);
    }
  }
}

}  // namespace moetier::testing
