// bench --e2e: a chat turn end to end, next to llama-bench's pure pp/tg figures (which
// leave out tokenization and sampling): the fixed user message below rendered with the
// model's chat template, tokenized, prefilled, N tokens sampled with the default sampler
// (llama.cpp's chain: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05; a fixed seed) with
// end-of-generation ignored so the count is fixed, and detokenized. With --url the same
// turn goes through POST /v1/chat/completions (streamed, so the first token's arrival is
// seen) of moetier serve or any llama-server.
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_params.h"
#include "bench/report.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "eval/openai_client.h"
#include "model/model.h"
#include "text/chat_prompt.h"
#include "text/tokenizer.h"

namespace moetier::bench {

// The user message of e2e turn `turn`: "(turn) " and about 60 words of English, a short chat
// question. The number keeps a server from reusing an earlier turn's prompt cache; turns
// 0-9 have the same length in tokens.
std::string e2e_message(int64_t turn);

// One turn: its wall time from the message to the last detokenized piece, the time to the
// first sampled token (template + tokenization + prefill + first sample), and the counts.
struct E2eTurn {
  int64_t total_ns = 0;
  int64_t ttft_ns = 0;
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
};

// The rendered, tokenized message (what the server does with the request's messages).
Result<std::vector<int32_t>> e2e_prompt_tokens(const ChatPrompt& chat, const text::Tokenizer& tokenizer, int64_t turn);

struct E2eTurnParams {
  Model& model;
  SequenceState& seq;  // empty, with room for the prompt and n_gen tokens
  ThreadPool& pool;
  const text::Tokenizer& tokenizer;
  const ChatPrompt& chat;
  int64_t n_gen = 128;
  uint32_t seed = 1234;  // the sampler's
  int64_t turn = 0;
};
Result<E2eTurn> run_e2e_turn(const E2eTurnParams& p);

// A server for --url: its address and the model id /v1/models names. kBadInput when the
// URL is malformed or no server answers there (the message says which).
struct E2eServer {
  std::string url;  // as given
  eval::ServerUrl address;
  std::string model_id;
};
Result<E2eServer> connect_e2e_server(const std::string& url);

// One turn through POST /v1/chat/completions with "stream": true, "ignore_eos": true,
// "cache_prompt": false (each turn prefills the whole prompt, as a new conversation does),
// "max_tokens": n_gen. The first token is the first chunk with content (or reasoning
// content); counts come from the usage chunk (stream_options.include_usage), else the
// timings, else n_gen. 
Result<E2eTurn> http_e2e_turn(const E2eServer& server, int64_t n_gen, uint32_t seed, int64_t turn);

// A whole HTTP e2e test: a warm-up turn (unless !warmup), then `repetitions` timed turns.
struct HttpE2eOptions {
  int64_t repetitions = 5;
  bool warmup = true;
  uint32_t seed = 1234;
};
Result<TestResult> run_http_e2e_test(const E2eServer& server, const TestSpec& test, const HttpE2eOptions& options);

}  // namespace moetier::bench
