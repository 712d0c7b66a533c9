// The phases of the server's engine step (server/scheduler.h), in process on a tiny reference
// model: the events a task gets and their order (a first progress report, one per prompt
// chunk of step_tokens, one per generated token, a final event that carries the last token),
// the step counters in SchedulerStats, the prompt cache (a repeated prompt reuses all but its
// last token and samples the same first token), max_tokens 0 (ends before any forward pass),
// a task waiting for a busy id_slot without holding back the queue, and cancellation.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "server/scheduler.h"

namespace moetier {
namespace {

using server::GenerationTask;
using server::TaskEvent;

// Every event of the task up to and including its final one (fails the test after 60 s).
std::vector<TaskEvent> all_events(GenerationTask& task) {
  std::vector<TaskEvent> events;
  for (int waited = 0; waited < 600; ++waited) {
    task.wait(events, std::chrono::milliseconds(100));
    if (!events.empty() && events.back().final) return events;
  }
  ADD_FAILURE() << "the task did not finish";
  return events;
}

// Waits for the task's next events (at least one), failing the test after 60 s.
std::vector<TaskEvent> next_events(GenerationTask& task) {
  std::vector<TaskEvent> events;
  for (int waited = 0; waited < 600 && events.empty(); ++waited) task.wait(events, std::chrono::milliseconds(100));
  EXPECT_FALSE(events.empty());
  return events;
}

std::shared_ptr<GenerationTask> submit(server::Scheduler& scheduler, server::GenerationSpec spec) {
  auto task = std::make_shared<GenerationTask>(std::move(spec));
  const Status st = scheduler.submit(task);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return task;
}

class SchedulerPhases : public ::testing::Test {
 protected:
  void SetUp() override {
    loaded_ = moetier::testing::load_with_tokenizer(moetier::testing::ref_model_path("qwen3moe-tiny-f32"));
    ASSERT_TRUE(loaded_.model && loaded_.tokenizer);
  }
  std::unique_ptr<server::Scheduler> make(const server::SchedulerOptions& options) {
    auto s = server::Scheduler::create(*loaded_.model, *loaded_.tokenizer, pool_, options);
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    if (!s.is_ok()) return nullptr;
    (*s)->start();
    return std::move(s).value();
  }
  ThreadPool pool_{2};
  moetier::testing::LoadedWithTokenizer loaded_;
};

TEST_F(SchedulerPhases, ChunksProgressTokensFinalAndStats) {
  constexpr int64_t kStep = 4;
  auto scheduler = make({.n_slots = 1, .kv = {.n_ctx = 128}, .step_tokens = kStep});
  ASSERT_TRUE(scheduler);
  const std::vector<int32_t> prompt =
      loaded_.tokenizer->encode("Slots read their prompt in chunks of the step's size, then decode.", {});
  const auto n = static_cast<int64_t>(prompt.size());
  ASSERT_GT(n, 2 * kStep);
  const int64_t n_chunks = (n + kStep - 1) / kStep;
  const server::GenerationSpec spec{.prompt = prompt,
                                    .sampling = {.temperature = 0.0f},
                                    .max_tokens = 3,
                                    .ignore_eos = true,
                                    .report_progress = true};

  // First task: nothing cached.
  auto t1 = submit(*scheduler, spec);
  const std::vector<TaskEvent> e1 = all_events(*t1);
  ASSERT_EQ(e1.size(), static_cast<size_t>(1 + n_chunks + 3));
  ASSERT_TRUE(e1[0].progress);
  EXPECT_EQ(e1[0].progress->total, n);
  EXPECT_EQ(e1[0].progress->cache, 0);
  EXPECT_EQ(e1[0].progress->processed, 0);
  for (int64_t i = 1; i <= n_chunks; ++i) {
    const TaskEvent& e = e1[static_cast<size_t>(i)];
    ASSERT_TRUE(e.progress) << i;
    EXPECT_EQ(e.progress->processed, std::min(i * kStep, n)) << i;
    EXPECT_TRUE(e.tokens.empty()) << i;
    EXPECT_FALSE(e.final);
  }
  std::vector<int32_t> generated;
  for (size_t i = static_cast<size_t>(1 + n_chunks); i < e1.size(); ++i) {
    EXPECT_FALSE(e1[i].progress) << i;
    ASSERT_EQ(e1[i].tokens.size(), 1u) << i;  // one token per step, the last one in the final event
    EXPECT_EQ(e1[i].final, i + 1 == e1.size()) << i;
    generated.push_back(e1[i].tokens[0]);
  }
  const TaskEvent& f1 = e1.back();
  EXPECT_EQ(f1.finish, server::FinishReason::kLength);
  EXPECT_EQ(f1.stop_type, server::StopType::kLimit);
  EXPECT_EQ(f1.slot, 0);
  EXPECT_FALSE(f1.truncated);
  EXPECT_EQ(f1.timings.n_prompt, n);
  EXPECT_EQ(f1.timings.n_cached, 0);
  EXPECT_EQ(f1.timings.n_generated, 3);

  // The same prompt again: the slot's cache covers all but the last prompt token (at least
  // one is computed), and the greedy first token is the same.
  server::GenerationSpec again = spec;
  again.max_tokens = 1;
  auto t2 = submit(*scheduler, again);
  const std::vector<TaskEvent> e2 = all_events(*t2);
  ASSERT_EQ(e2.size(), 3u);
  ASSERT_TRUE(e2[0].progress && e2[1].progress);
  EXPECT_EQ(e2[0].progress->cache, n - 1);
  EXPECT_EQ(e2[0].progress->processed, n - 1);
  EXPECT_EQ(e2[1].progress->processed, n);
  EXPECT_TRUE(e2[2].final);
  EXPECT_EQ(e2[2].timings.n_cached, n - 1);
  ASSERT_EQ(e2[2].tokens.size(), 1u);
  EXPECT_EQ(e2[2].tokens[0], generated[0]);

  // max_tokens 0: ends before its prompt is read, without a forward pass.
  server::GenerationSpec none = spec;
  none.max_tokens = 0;
  auto t3 = submit(*scheduler, none);
  const std::vector<TaskEvent> e3 = all_events(*t3);
  ASSERT_EQ(e3.size(), 2u);  // the first progress report, the final event
  EXPECT_EQ(e3[1].finish, server::FinishReason::kLength);
  EXPECT_EQ(e3[1].timings.n_generated, 0);
  EXPECT_EQ(e3[1].timings.n_cached, n - 1);  // the slot was cut back to the reused prefix
  EXPECT_TRUE(e3[1].tokens.empty());

  scheduler->stop();  // the engine thread has published its last step
  const server::SchedulerStats st = scheduler->stats();
  // Task 1: n_chunks prompt steps (the last one samples the first token) and 2 decode steps;
  // task 2: one step of one prompt token.
  EXPECT_EQ(st.steps, static_cast<uint64_t>(n_chunks + 2 + 1));
  EXPECT_EQ(st.step_tokens, static_cast<uint64_t>(n + 2 + 1));
  EXPECT_EQ(st.step_busy_slots, st.steps);
  EXPECT_EQ(st.prompt_tokens, static_cast<uint64_t>(n + 1));
  EXPECT_EQ(st.prompt_tokens_cached, static_cast<uint64_t>(2 * (n - 1)));  // tasks 2 and 3
  EXPECT_EQ(st.generated_tokens, 4u);
  EXPECT_EQ(st.tasks_finished, 3u);
  EXPECT_EQ(st.tasks_cancelled, 0u);
  EXPECT_EQ(st.busy_slots, 0);
  EXPECT_EQ(st.queued, 0);
  // As of the last forward pass (task 2 fed its prompt; its sampled token was not fed).
  EXPECT_EQ(st.kv_tokens_used, n);
  EXPECT_EQ(st.n_tokens_max, n + 2);  // task 1: the prompt and two fed tokens
  const std::vector<server::SlotInfo> slots = scheduler->slots();
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_FALSE(slots[0].busy);
  EXPECT_EQ(slots[0].n_cached, n - 1);  // task 3 cut the slot back and ended
}

TEST_F(SchedulerPhases, BusyIdSlotWaitsWithoutHoldingBackTheQueueAndCancelFreesTheSlot) {
  auto scheduler = make({.n_slots = 2, .kv = {.n_ctx = 4096}, .step_tokens = 64});
  ASSERT_TRUE(scheduler);
  const auto prompt = [&](const char* text) { return loaded_.tokenizer->encode(text, {}); };
  // A long task in slot 0 (until its context is full); it runs until cancelled.
  auto t1 = submit(*scheduler, {.prompt = prompt("The first request holds slot zero."),
                                .sampling = {.temperature = 0.0f},
                                .max_tokens = -1,
                                .ignore_eos = true,
                                .id_slot = 0});
  ASSERT_FALSE(next_events(*t1).empty());  // it is generating
  // t2 wants slot 0 (busy): it waits; t3, behind it in the queue, takes slot 1 meanwhile.
  auto t2 = submit(*scheduler, {.prompt = prompt("The second request wants slot zero too."),
                                .sampling = {.temperature = 0.0f},
                                .max_tokens = 2,
                                .ignore_eos = true,
                                .id_slot = 0});
  auto t3 = submit(*scheduler, {.prompt = prompt("The third request takes any slot."),
                                .sampling = {.temperature = 0.0f},
                                .max_tokens = 1,
                                .ignore_eos = true});
  const std::vector<TaskEvent> e3 = all_events(*t3);
  EXPECT_EQ(e3.back().finish, server::FinishReason::kLength);
  EXPECT_EQ(e3.back().slot, 1);
  std::vector<TaskEvent> e2;
  t2->wait(e2, std::chrono::milliseconds(0));
  EXPECT_TRUE(e2.empty());  // still queued: no events before a slot takes it

  t1->cancel();
  const std::vector<TaskEvent> e1 = all_events(*t1);
  EXPECT_EQ(e1.back().finish, server::FinishReason::kCancelled);
  EXPECT_EQ(e1.back().stop_type, server::StopType::kNone);
  EXPECT_EQ(e1.back().slot, 0);
  const std::vector<TaskEvent> e2_all = all_events(*t2);
  EXPECT_EQ(e2_all.back().finish, server::FinishReason::kLength);
  EXPECT_EQ(e2_all.back().slot, 0);
  EXPECT_EQ(e2_all.back().timings.n_generated, 2);

  scheduler->stop();
  const server::SchedulerStats st = scheduler->stats();
  EXPECT_EQ(st.tasks_finished, 3u);
  EXPECT_EQ(st.tasks_cancelled, 1u);
  EXPECT_EQ(st.busy_slots, 0);
}

}  // namespace
}  // namespace moetier
