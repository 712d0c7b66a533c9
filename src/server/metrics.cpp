#include "server/metrics.h"

#include <string_view>

#include <fmt/format.h>

namespace moetier::server {

namespace {

// llama-server's metric set keeps its names (llamacpp: prefix), so dashboards built for it
// work unchanged; moetier's extra metrics carry the moetier: prefix.
constexpr const char* kLlamaCppNames[] = {
    "prompt_tokens_total", "prompt_tokens_cached_total", "prompt_seconds_total", "tokens_predicted_total",
    "tokens_predicted_seconds_total", "n_decode_total", "n_tokens_max", "spec_decode_num_draft_tokens_total",
    "spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total", "prompt_tokens_seconds",
    "predicted_tokens_seconds", "requests_processing", "requests_deferred", "n_busy_slots_per_decode"};

void metric(std::string& out, const char* type, const char* name, const char* help, double value) {
  const char* prefix = "moetier";
  for (const char* n : kLlamaCppNames) {
    if (std::string_view(n) == name) prefix = "llamacpp";
  }
  out += fmt::format("# HELP {0}:{1} {2}\n# TYPE {0}:{1} {3}\n{0}:{1} {4}\n", prefix, name, help, type, value);
}

}  // namespace

std::string render_metrics(const ServerState& st) {
  const SchedulerStats s = st.scheduler.stats();
  std::string out;
  metric(out, "counter", "prompt_tokens_total", "Prompt tokens computed (cache hits excluded).",
         static_cast<double>(s.prompt_tokens));
  metric(out, "counter", "prompt_tokens_cached_total", "Prompt tokens reused from a slot's cache.",
         static_cast<double>(s.prompt_tokens_cached));
  metric(out, "counter", "prompt_seconds_total", "Time spent reading prompts, summed over requests.",
         s.prompt_seconds);
  metric(out, "counter", "tokens_predicted_total", "Tokens generated.", static_cast<double>(s.generated_tokens));
  metric(out, "counter", "tokens_predicted_seconds_total", "Time spent generating, summed over requests.",
         s.generation_seconds);
  metric(out, "gauge", "prompt_tokens_seconds", "Average prompt throughput per request in tokens/s.",
         s.prompt_seconds > 0 ? static_cast<double>(s.prompt_tokens) / s.prompt_seconds : 0.0);
  metric(out, "gauge", "predicted_tokens_seconds", "Average generation throughput per request in tokens/s.",
         s.generation_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.generation_seconds : 0.0);
  metric(out, "counter", "n_decode_total", "Forward passes (engine steps).", static_cast<double>(s.steps));
  metric(out, "counter", "batch_tokens_total", "Tokens through those forward passes.",
         static_cast<double>(s.step_tokens));
  metric(out, "counter", "decode_seconds_total", "Time in forward passes.", s.step_seconds);
  metric(out, "gauge", "engine_tokens_seconds", "Tokens per second of forward-pass time (all slots together).",
         s.step_seconds > 0 ? static_cast<double>(s.step_tokens) / s.step_seconds : 0.0);
  metric(out, "gauge", "n_busy_slots_per_decode", "Average number of slots batched per forward pass.",
         s.steps > 0 ? static_cast<double>(s.step_busy_slots) / static_cast<double>(s.steps) : 0.0);
  metric(out, "counter", "n_tokens_max", "Largest number of tokens a slot has held.",
         static_cast<double>(s.n_tokens_max));
  metric(out, "gauge", "requests_processing", "Requests running in a slot.", s.busy_slots);
  metric(out, "gauge", "requests_deferred", "Requests waiting for a free slot.", s.queued);
  metric(out, "gauge", "requests_in_flight", "Generation requests received and not yet answered.",
         static_cast<double>(st.counters.generations_in_flight.load()));
  metric(out, "gauge", "slots_total", "Parallel slots (-np).", s.n_slots);
  metric(out, "gauge", "kv_cache_tokens", "Positions held in the slots' KV caches.",
         static_cast<double>(s.kv_tokens_used));
  metric(out, "gauge", "kv_cache_usage_ratio", "Share of the slots' KV capacity in use.",
         s.kv_tokens_capacity > 0 ? static_cast<double>(s.kv_tokens_used) / static_cast<double>(s.kv_tokens_capacity)
                                  : 0.0);
  metric(out, "counter", "spec_decode_num_draft_tokens_total", "Speculative: drafted tokens verified.",
         static_cast<double>(s.draft_tokens));
  metric(out, "counter", "spec_decode_num_accepted_tokens_total", "Speculative: drafted tokens the target kept.",
         static_cast<double>(s.draft_accepted));
  metric(out, "counter", "spec_decode_num_drafts_total", "Speculative: verify passes with at least one draft.",
         static_cast<double>(s.draft_steps));
  metric(out, "counter", "requests_finished_total", "Generation requests finished.",
         static_cast<double>(s.tasks_finished));
  metric(out, "counter", "requests_cancelled_total", "Generation requests cancelled (client went away).",
         static_cast<double>(s.tasks_cancelled));
  metric(out, "counter", "http_requests_total", "HTTP requests answered.",
         static_cast<double>(st.counters.requests.load()));
  metric(out, "counter", "http_client_errors_total", "HTTP requests answered with 4xx.",
         static_cast<double>(st.counters.client_errors.load()));
  metric(out, "counter", "http_server_errors_total", "HTTP requests answered with 5xx.",
         static_cast<double>(st.counters.server_errors.load()));
  if (st.experts != nullptr) {
    // A model bigger than RAM (routed experts read from the file on demand).
    const ExpertStoreStats e = st.experts->stats();
    metric(out, "counter", "expert_requests_total", "Routed experts the MoE layers needed (one per expert and batch).",
           static_cast<double>(e.requests));
    metric(out, "counter", "expert_hits_total", "Of them, already in RAM.", static_cast<double>(e.hits));
    metric(out, "counter", "expert_read_ahead_hits_total", "Of them, read ahead by the next-layer prediction.",
           static_cast<double>(e.read_ahead_hits));
    metric(out, "counter", "expert_misses_total", "Of them, read from the file on demand.", static_cast<double>(e.misses));
    metric(out, "counter", "expert_bytes_read_total", "Bytes of experts read from the model file.",
           static_cast<double>(e.bytes_read));
    metric(out, "counter", "expert_read_seconds_total", "Wall time with at least one expert read in flight.",
           e.read_busy_seconds);
    metric(out, "counter", "expert_wait_seconds_total", "Time the forward pass waited for expert reads.", e.wait_seconds);
    metric(out, "gauge", "expert_hit_ratio", "Share of the needed experts that were in RAM.", e.hit_rate());
    metric(out, "gauge", "expert_prediction_accuracy", "Share of the experts used that the next-layer prediction named.",
           e.prediction_accuracy());
  }
  if (const GpuExpertCacheStats& c = s.gpu_expert_cache; c.pairs > 0) {
    // The VRAM expert cache (--gpu-expert-cache).
    metric(out, "counter", "expert_gpu_pairs_total", "Routed (token, expert) pairs of the layers with a VRAM expert cache.",
           static_cast<double>(c.pairs));
    metric(out, "counter", "expert_gpu_hits_total", "Of them, computed from a copy in VRAM.",
           static_cast<double>(c.gpu_pairs));
    metric(out, "counter", "expert_gpu_copies_total", "Experts copied to VRAM.", static_cast<double>(c.uploads));
    metric(out, "counter", "expert_gpu_copy_bytes_total", "Bytes copied to VRAM for the cache.",
           static_cast<double>(c.upload_bytes));
    metric(out, "gauge", "expert_gpu_hit_ratio", "Share of those pairs computed from a copy in VRAM.", c.hit_rate());
  }
  return out;
}

}  // namespace moetier::server
