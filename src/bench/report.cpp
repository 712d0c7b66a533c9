#include "bench/report.h"
#include "engine/expert_streaming.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/cpu_load.h"
#include "core/utf8_path.h"
#include "engine/cpu_threads.h"

namespace moetier::bench {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sample_stddev(const std::vector<double>& v) {
  if (v.size() <= 1) return 0;
  const double m = mean(v);
  double sq = 0;
  for (double x : v) sq += (x - m) * (x - m);  // two-pass: no cancellation for large ns values
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

namespace {

std::vector<double> as_doubles(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

}  // namespace

int64_t TestResult::avg_ns() const { return static_cast<int64_t>(std::llround(mean(as_doubles(samples_ns)))); }
int64_t TestResult::stddev_ns() const {
  return static_cast<int64_t>(std::llround(sample_stddev(as_doubles(samples_ns))));
}

std::vector<double> TestResult::samples_ts() const {
  // An e2e turn's speed is that of its answer: generated tokens over the whole turn.
  const double n_tokens = static_cast<double>(test_tokens(spec));
  std::vector<double> ts;
  ts.reserve(samples_ns.size());
  for (int64_t ns : samples_ns) ts.push_back(ns > 0 ? 1e9 * n_tokens / static_cast<double>(ns) : 0.0);
  return ts;
}

double TestResult::avg_ts() const { return mean(samples_ts()); }
double TestResult::stddev_ts() const { return sample_stddev(samples_ts()); }

Summary TestResult::ts_summary() const {
  const auto ts = samples_ts();
  return summarize(ts);
}

std::optional<double> TestResult::drift_percent() const {
  const auto ts = samples_ts();
  return bench::drift_percent(ts);
}

std::optional<int64_t> TestResult::rss_peak_minus_idle_bytes(const Environment& env) const {
  if (!peak_rss_bytes || !env.idle_rss_bytes) return std::nullopt;
  return *peak_rss_bytes - *env.idle_rss_bytes;
}

std::string describe_comparison(const Comparison& c) {
  std::string text = c.a_name == c.b_name ? fmt::format("{}: {}: ", c.a_name, c.what)
                                          : fmt::format("{} vs {}: {}: ", c.b_name, c.a_name, c.what);
  if (!c.ci) return text + "no interval (needs at least 2 repetitions)";
  text += fmt::format("t/s ratio {:.3f}, 95% CI [{:.3f}, {:.3f}]", c.ci->ratio, c.ci->low, c.ci->high);
  text += c.ci->includes_one() ? ": no difference" : c.ci->ratio > 1 ? ": faster" : ": slower";
  // Drift between two separate runs is not in the interval (users saw ~15% between sittings).
  return c.interleaved ? text : text + " (not interleaved: drift between the runs is not accounted for)";
}

std::optional<double> TestResult::bandwidth_fraction() const {
  const auto achieved = achieved_gbps();
  if (!achieved || !machine_read_gbps || *machine_read_gbps <= 0) return std::nullopt;
  return *achieved / *machine_read_gbps;
}

double spec_expected_tokens_per_step(double acceptance, int64_t k) {
  double tokens = 1, run = 1;
  for (int64_t i = 0; i < k; ++i) tokens += run *= acceptance;
  return tokens;
}

double step_ms(const TestResult& r) {
  if (r.spec.n_step <= 0 || r.spec.n_gen <= 0) return 0;
  return static_cast<double>(r.avg_ns()) / 1e6 / static_cast<double>(r.spec.n_gen);
}

std::optional<double> TestResult::achieved_gbps() const {
  if (spec.n_prompt != 0 || spec.n_gen == 0 || spec.e2e) return std::nullopt;
  // A verify pass, and a step of several tokens or of several sequences' tokens, reads the
  // dense weights once for all of them: tokens × bytes per token is not what was read.
  if (spec.n_step > 1 || spec.n_step_seqs > 1) return std::nullopt;
  if (spec.spec && spec.spec_draft_max > 0) return std::nullopt;
  return static_cast<double>(model.weight_bytes_per_token) * avg_ts() / 1e9;
}

namespace {

enum class Kind { kString, kInt, kBool, kFloat, kNull };

// One scalar field of a record, its value already formatted for its kind.
struct Field {
  std::string name;
  Kind kind;
  std::string text;  // kString: raw text; kBool: "0"/"1"; numbers: their digits
};

Field str(std::string name, std::string v) { return {std::move(name), Kind::kString, std::move(v)}; }
Field num(std::string name, int64_t v) { return {std::move(name), Kind::kInt, fmt::format("{}", v)}; }
Field boolean(std::string name, bool v) { return {std::move(name), Kind::kBool, v ? "1" : "0"}; }
Field real(std::string name, double v) { return {std::move(name), Kind::kFloat, fmt::format("{:.6f}", v)}; }
Field opt_real(std::string name, std::optional<double> v) {
  return v ? real(std::move(name), *v) : Field{std::move(name), Kind::kNull, ""};
}
Field opt_num(std::string name, std::optional<int64_t> v) {
  return v ? num(std::move(name), *v) : Field{std::move(name), Kind::kNull, ""};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The scalar fields of a record in output order (llama-bench's, then moetier's own).
std::vector<Field> record_fields(const TestResult& r, const Environment& env) {
  const TestSpec& t = r.spec;
  const Summary s = r.ts_summary();
  return {
      str("build_commit", env.build_commit),
      num("build_number", env.build_number),
      str("cpu_info", env.cpu_info),
      str("gpu_info", r.gpu_info.empty() ? env.gpu_info : r.gpu_info),
      str("backends", r.backend),
      str("model_filename", r.model.filename),
      str("model_type", r.model.type),
      num("model_size", r.model.size_bytes),
      num("model_n_params", r.model.n_params),
      num("n_batch", t.n_batch),
      num("n_ubatch", t.n_ubatch),
      num("n_threads", t.n_threads),
      str("type_k", lower(dtype_name(t.type_k))),
      str("type_v", lower(dtype_name(t.type_v))),
      num("n_gpu_layers", t.n_gpu_layers),
      num("n_cpu_moe", t.n_cpu_moe),
      num("flash_attn", t.flash_attn),
      str("tensor_buft_overrides", t.tensor_overrides.empty() ? "none" : t.tensor_overrides),
      boolean("use_mmap", t.use_mmap),
      num("n_prompt", t.n_prompt),
      num("n_gen", t.n_gen),
      num("n_depth", t.n_depth),
      str("test_time", r.test_time),
      num("avg_ns", r.avg_ns()),
      num("stddev_ns", r.stddev_ns()),
      real("avg_ts", r.avg_ts()),
      real("stddev_ts", r.stddev_ts()),
      num("weight_bytes_per_token", r.model.weight_bytes_per_token),
      num("repacked_bytes", r.model.repacked_bytes),
      opt_real("achieved_gbps", r.achieved_gbps()),
      opt_num("peak_rss_bytes", r.peak_rss_bytes),
      str("cpu_isa", env.cpu_isa),
      // The CPUs the threads ran on (engine/cpu_threads.h): all, performance (a hybrid CPU's
      // P-cores) or mask (--cpu-mask), and their list.
      str("cpu_cores", r.cpu_cores),
      str("cpus", r.cpus),
      opt_real("machine_read_gbps", r.machine_read_gbps),
      opt_real("disk_read_gbps", r.disk_read_gbps),
      opt_real("bandwidth_fraction", r.bandwidth_fraction()),
      opt_num("estimate_n_layer", r.estimate ? std::optional<int64_t>(r.estimate->n_layer) : std::nullopt),
      opt_real("estimate_ts", r.estimate ? std::optional<double>(r.estimate->ts) : std::nullopt),
      r.gpu ? str("gpu_device", r.gpu->device) : Field{"gpu_device", Kind::kNull, ""},
      opt_num("gpu_weight_bytes", r.gpu ? std::optional<int64_t>(r.gpu->weight_bytes) : std::nullopt),
      opt_num("gpu_kv_bytes", r.gpu ? std::optional<int64_t>(r.gpu->kv_bytes) : std::nullopt),
      opt_num("gpu_state_bytes", r.gpu ? std::optional<int64_t>(r.gpu->state_bytes) : std::nullopt),
      opt_num("gpu_scratch_bytes", r.gpu ? std::optional<int64_t>(r.gpu->scratch_bytes) : std::nullopt),
      opt_num("vram_used_delta_bytes", r.vram_used_delta_bytes),
      r.gpu_backend.empty() ? Field{"gpu_backend", Kind::kNull, ""} : str("gpu_backend", r.gpu_backend),
      // --spec-replay tests (null otherwise): "none" is the greedy loop without drafts.
      t.spec ? str("spec_type", t.spec_draft_max == 0 ? "none" : t.spec_mtp ? "draft-mtp" : "replay")
             : Field{"spec_type", Kind::kNull, ""},
      opt_real("spec_acceptance_target", t.spec && t.spec_draft_max > 0 && !t.spec_mtp
                                             ? std::optional<double>(t.spec_acceptance)
                                             : std::nullopt),
      opt_num("spec_draft_max", t.spec ? std::optional<int64_t>(t.spec_draft_max) : std::nullopt),
      opt_num("spec_n_drafted", t.spec ? std::optional<int64_t>(r.spec_n_drafted) : std::nullopt),
      opt_num("spec_n_accepted", t.spec ? std::optional<int64_t>(r.spec_n_accepted) : std::nullopt),
      opt_real("spec_acceptance", t.spec && r.spec_n_drafted > 0
                                      ? std::optional<double>(static_cast<double>(r.spec_n_accepted) /
                                                              static_cast<double>(r.spec_n_drafted))
                                      : std::nullopt),
      // What a verify step yields: expected at the target acceptance (replay), and measured.
      opt_real("spec_expected_tokens_per_step",
               t.spec && t.spec_draft_max > 0 && !t.spec_mtp
                   ? std::optional<double>(spec_expected_tokens_per_step(t.spec_acceptance, t.spec_draft_max))
                   : std::nullopt),
      opt_real("spec_tokens_per_step", t.spec && r.spec_n_steps > 0
                                           ? std::optional<double>(static_cast<double>(r.spec_n_accepted + r.spec_n_steps) /
                                                                   static_cast<double>(r.spec_n_steps))
                                           : std::nullopt),
      // Step tests (--step): tokens per step and the mean time of one step.
      opt_num("step_tokens", t.n_step > 0 ? std::optional<int64_t>(t.n_step) : std::nullopt),
      opt_num("step_seqs", t.n_step > 0 ? std::optional<int64_t>(t.n_step_seqs) : std::nullopt),
      opt_real("step_ms", t.n_step > 0 ? std::optional<double>(step_ms(r)) : std::nullopt),
      // draft-mtp: the head's own time per drafted token (catch-up rows included).
      opt_real("spec_draft_ms_per_token", t.spec && t.spec_mtp ? std::optional<double>(r.spec_draft_ms_per_token)
                                                               : std::nullopt),
      // Models bigger than RAM: the expert cache over the timed repetitions (null otherwise).
      opt_real("expert_hit_rate", r.experts ? std::optional<double>(r.experts->hit_rate()) : std::nullopt),
      opt_real("expert_read_ahead_rate",
               r.experts && r.experts->requests > 0
                   ? std::optional<double>(static_cast<double>(r.experts->read_ahead_hits) /
                                           static_cast<double>(r.experts->requests))
                   : std::nullopt),
      opt_num("expert_bytes_read_per_token",
              r.experts && r.expert_tokens > 0
                  ? std::optional<int64_t>(static_cast<int64_t>(r.experts->bytes_read) / r.expert_tokens)
                  : std::nullopt),
      opt_real("expert_read_gbps", r.experts && r.experts->read_busy_seconds > 0
                                       ? std::optional<double>(r.experts->disk_gb_per_second())
                                       : std::nullopt),
      opt_real("expert_prediction_accuracy", r.experts && r.experts->used_after_prediction > 0
                                                 ? std::optional<double>(r.experts->prediction_accuracy())
                                                 : std::nullopt),
      opt_real("expert_wait_fraction", r.experts && r.expert_seconds > 0
                                           ? std::optional<double>(r.experts->wait_seconds / r.expert_seconds)
                                           : std::nullopt),
      // The VRAM expert cache: the share of the routed pairs computed from copies on the GPU,
      // and the copies made per token.
      opt_real("expert_gpu_hit_rate", r.gpu_expert_cache ? std::optional<double>(r.gpu_expert_cache->hit_rate()) : std::nullopt),
      opt_real("expert_gpu_copies_per_token",
               r.gpu_expert_cache && r.gpu_expert_cache_tokens > 0
                   ? std::optional<double>(static_cast<double>(r.gpu_expert_cache->uploads) /
                                           static_cast<double>(r.gpu_expert_cache_tokens))
                   : std::nullopt),
      // Provenance ("cite what was measured").
      str("moetier_version", env.version),
      str("date", env.date),
      str("model_file", path_utf8(utf8_path(r.model.filename).filename())),
      num("model_file_bytes", r.model.file_bytes),
      r.model.sha256.empty() ? Field{"model_sha256", Kind::kNull, ""} : str("model_sha256", r.model.sha256),
      // Statistics of the repetitions' t/s (stats.h).
      real("min_ts", s.min),
      real("max_ts", s.max),
      real("cv_ts", s.cv),
      opt_real("drift_pct", r.drift_percent()),
      boolean("interleaved", r.interleaved),
      opt_real("other_busy_cpus", r.other_busy_cpus),
      // Memory: peak - idle (RSS: idle = before loading; VRAM: see vram_source).
      opt_num("idle_rss_bytes", env.idle_rss_bytes),
      str("peak_rss_scope", r.peak_rss_scope),
      opt_num("rss_peak_minus_idle_bytes", r.rss_peak_minus_idle_bytes(env)),
      opt_num("vram_peak_minus_idle_bytes", r.vram_peak_minus_idle_bytes),
      r.vram_source.empty() ? Field{"vram_source", Kind::kNull, ""} : str("vram_source", r.vram_source),
      // --e2e: "in-process" or "http" (null for the pure tests), the server, time to first token.
      t.e2e ? str("e2e", t.e2e_url.empty() ? "in-process" : "http") : Field{"e2e", Kind::kNull, ""},
      t.e2e_url.empty() ? Field{"e2e_url", Kind::kNull, ""} : str("e2e_url", t.e2e_url),
      opt_real("avg_ttft_ms", r.ttft_ns.empty() ? std::nullopt : std::optional<double>(mean(as_doubles(r.ttft_ns)) / 1e6)),
      opt_real("stddev_ttft_ms", r.ttft_ns.empty() ? std::nullopt
                                                   : std::optional<double>(sample_stddev(as_doubles(r.ttft_ns)) / 1e6)),
  };
}

std::string json_string(const std::string& s) {
  // Replace invalid UTF-8 (a file name can hold any bytes) instead of throwing.
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_value(const Field& f) {
  switch (f.kind) {
    case Kind::kString: return json_string(f.text);
    case Kind::kBool: return f.text == "1" ? "true" : "false";
    case Kind::kNull: return "null";
    case Kind::kInt:
    case Kind::kFloat: return f.text;
  }
  return "null";
}

std::string join_ns(const std::vector<int64_t>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

std::string join_ts(const std::vector<double>& v) {
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(fmt::format("{:.6g}", x));  // llama-bench prints 6 significant digits
  return fmt::format("{}", fmt::join(parts, ", "));
}

// "profile": {"wall_ms": W, "blocks": [{"block": ..., "ms": ..., "percent": ..., "calls": ...}, ...]}
std::string json_profile(const std::vector<ProfileRow>& rows, double wall_ms) {
  std::vector<std::string> items;
  for (const auto& row : rows) {
    items.push_back(fmt::format("{{\"block\": {}, \"ms\": {:.4f}, \"percent\": {:.2f}, \"calls\": {:g}}}",
                                json_string(row.block), row.ms, row.percent, row.calls));
  }
  return fmt::format("{{\"wall_ms\": {:.4f}, \"blocks\": [ {} ]}}", wall_ms, fmt::join(items, ", "));
}

// "gpu_census": {"tokens": N, "per_token": {...}, "timed": b, "ops": [{"shader", "dispatches", "gpu_ms"}]}
// (per-token figures over the timed repetitions; ops in total over them).
std::string json_census(const GpuCensus& c, int64_t tokens) {
  const double n = static_cast<double>(std::max<int64_t>(tokens, 1));
  std::vector<std::string> ops;
  for (const auto& [name, op] : c.ops) {
    ops.push_back(fmt::format("{{\"shader\": {}, \"dispatches\": {}, \"gpu_ms\": {:.4f}, \"weight_bytes\": {}}}",
                              json_string(name), op.dispatches, op.gpu_ns / 1e6, op.weight_bytes));
  }
  return fmt::format(
      "{{\"tokens\": {}, \"per_token\": {{\"dispatches\": {:.2f}, \"barriers\": {:.2f}, \"transfers\": {:.2f}, "
      "\"submits\": {:.2f}, \"host_waits\": {:.2f}, \"syncs\": {:.2f}, \"bytes_up\": {:.0f}, \"bytes_down\": {:.0f}, "
      "\"weight_bytes\": {:.0f}}}, \"timed\": {}, \"ops\": [ {} ]}}",
      tokens, c.dispatches / n, c.barriers / n, c.transfers / n, c.submits / n, c.host_waits / n, c.syncs / n, c.bytes_up / n,
      c.bytes_down / n, c.weight_bytes / n, c.timed ? "true" : "false", fmt::join(ops, ", "));
}

class JsonPrinter : public Printer {
 public:
  JsonPrinter(const Environment& env, std::FILE* out, bool lines) : env_(env), out_(out), lines_(lines) {}
  void header() override {
    if (!lines_) std::fputs("[\n", out_);
  }
  void test(const TestResult& r) override {
    const auto fields = record_fields(r, env_);
    std::vector<std::string> members;
    for (const auto& f : fields) members.push_back(fmt::format("\"{}\": {}", f.name, json_value(f)));
    members.push_back(fmt::format("\"samples_ns\": [ {} ]", join_ns(r.samples_ns)));
    members.push_back(fmt::format("\"samples_ts\": [ {} ]", join_ts(r.samples_ts())));
    if (!r.profile.empty()) {
      members.push_back(fmt::format("\"profile\": {}", json_profile(r.profile, static_cast<double>(r.avg_ns()) / 1e6)));
    }
    if (r.gpu_census) members.push_back(fmt::format("\"gpu_census\": {}", json_census(*r.gpu_census, r.census_tokens)));
    if (lines_) {
      fmt::print(out_, "{{{}}}\n", fmt::join(members, ", "));
    } else {
      fmt::print(out_, "{}  {{\n    {}\n  }}", first_ ? "" : ",\n", fmt::join(members, ",\n    "));
      first_ = false;
    }
    std::fflush(out_);
  }
  void footer() override {
    if (!lines_) std::fputs(first_ ? "]\n" : "\n]\n", out_);
  }

 private:
  const Environment& env_;
  std::FILE* out_;
  bool lines_;
  bool first_ = true;
};

class CsvPrinter : public Printer {
 public:
  CsvPrinter(const Environment& env, std::FILE* out) : env_(env), out_(out) {}
  void header() override {
    // The names do not depend on the values: take them from an empty record.
    std::vector<std::string> names;
    for (const auto& f : record_fields(TestResult{}, env_)) names.push_back(f.name);
    fmt::print(out_, "{}\n", fmt::join(names, ","));
  }
  void test(const TestResult& r) override {
    std::vector<std::string> values;
    for (const auto& f : record_fields(r, env_)) values.push_back(quote(f.text));
    fmt::print(out_, "{}\n", fmt::join(values, ","));
    std::fflush(out_);
  }

 private:
  // Every value quoted, quotes doubled (RFC 4180), as llama-bench writes it.
  static std::string quote(const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"') q += '"';
      q += c;
    }
    return q + "\"";
  }
  const Environment& env_;
  std::FILE* out_;
};

// Display width of UTF-8 text in terminal columns (one per code point; "±" is two bytes).
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::vector<std::string> provenance_lines(const Environment& env) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("moetier {} (commit {}), run {}", env.version, env.build_commit, env.date));
  for (const ModelFile& m : env.model_files) {
    lines.push_back(fmt::format("model: {} ({} bytes, sha256 {})", m.path, m.file_bytes,
                                m.sha256.empty() ? "not computed" : m.sha256));
  }
  const platform::CpuTopology& t = env.cpu_topology;
  const std::string cores =
      t.performance.empty()
          ? fmt::format("{} cores, {} CPUs", t.physical, t.logical)
          : fmt::format("hybrid: performance CPUs {}, efficiency CPUs {}", format_cpu_list(t.performance),
                        format_cpu_list(t.efficiency));
  lines.push_back(fmt::format("CPU: {} ({}), ISA {}, threads {}", env.cpu_info.empty() ? "unknown" : env.cpu_info, cores,
                              env.cpu_isa, fmt::join(env.n_threads, ",")));
  if (!env.gpu_info.empty()) lines.push_back(fmt::format("GPU: {}", env.gpu_info));
  lines.push_back(fmt::format("memory: idle RSS {} before loading; peak = {}", 
                              env.idle_rss_bytes ? fmt::format("{:.1f} MiB", static_cast<double>(*env.idle_rss_bytes) / 1048576.0)
                                                 : std::string("unknown"),
                              env.peak_rss_resettable ? "VmHWM of the test (reset before each repetition)"
                                                      : "VmHWM since start (could not be reset: cumulative)"));
  lines.push_back(env.interleaved ? "repetitions: interleaved round-robin over the tests of each model load"
                                  : "repetitions: each test's in a row");
  return lines;
}

namespace {

class MarkdownPrinter : public Printer {
 public:
  MarkdownPrinter(const BenchParams& params, const Environment& env, std::FILE* out)
      : env_(env), out_(out) {
    // llama-bench's columns: always model, size, params, backend, threads (CPU backend),
    // test, t/s; a parameter's column only when its list differs from the default.
    add("model", "model", -30);
    add("size", "size", 10);
    add("params", "params", 10);
    add("backend", "backend", -10);
    if (params.n_cpu_moe != std::vector<int64_t>{0}) add("n_cpu_moe", "n_cpu_moe", 10);
    add("n_threads", "threads", 7);
    // Which cores, where there is a choice: a hybrid CPU, or --cpu-mask.
    if (!env.cpu_topology.performance.empty() || params.cpu_mask) add("cores", "cores", -16);
    if (params.n_batch != std::vector<int64_t>{2048}) add("n_batch", "n_batch", 7);
    if (params.n_ubatch != std::vector<int64_t>{512}) add("n_ubatch", "n_ubatch", 8);
    if (params.type_k != std::vector<DType>{DType::F16}) add("type_k", "type_k", 6);
    if (params.type_v != std::vector<DType>{DType::F16}) add("type_v", "type_v", 6);
    if (params.flash_attn != std::vector<int>{-1}) add("flash_attn", "fa", 3);
    if (params.tensor_overrides != std::vector<std::string>{""}) add("tensor_buft_overrides", "ot", -21);
    if (params.use_mmap != std::vector<bool>{true}) add("use_mmap", "mmap", 4);
    add("test", "test", 15);
    add("t/s", "t/s", 20);
    add("cv", "cv", 7);
    if (env.interleaved) add("drift", "drift", 7);
    add("mem", "peak-idle MiB", 13);
  }

  void header() override {
    for (const std::string& line : provenance_lines(env_)) fmt::print(out_, "{}\n", line);
    fmt::print(out_, "\n");
    std::string names = "|", rule = "|";
    for (const auto& c : columns_) {
      const size_t w = static_cast<size_t>(std::abs(c.width));
      // fmt instead of operator+ chains: g++ 12 warns falsely (-Wrestrict) on those.
      names += fmt::format(" {} |", pad(c.title, c.width));
      rule += fmt::format(" {}{} |", std::string(w - 1, '-'), c.width > 0 ? ':' : '-');
    }
    fmt::print(out_, "{}\n{}\n", names, rule);
  }

  void test(const TestResult& r) override {
    const auto fields = record_fields(r, env_);
    if (!r.gpu_info.empty() && std::find(gpus_.begin(), gpus_.end(), r.gpu_info) == gpus_.end()) gpus_.push_back(r.gpu_info);
    std::string line = "|";
    for (const auto& c : columns_) {
      std::string value;
      if (c.field == "model") {
        value = r.model.type;
      } else if (c.field == "size") {
        const double mib = static_cast<double>(r.model.size_bytes) / 1024.0 / 1024.0;
        value = mib < 1024.0 ? fmt::format("{:.2f} MiB", mib) : fmt::format("{:.2f} GiB", mib / 1024.0);
      } else if (c.field == "params") {
        const double n = static_cast<double>(r.model.n_params);
        value = n < 1e9 ? fmt::format("{:.2f} M", n / 1e6) : fmt::format("{:.2f} B", n / 1e9);
      } else if (c.field == "backend") {
        value = r.backend;
      } else if (c.field == "cores") {
        value = r.cpu_cores == "performance" ? fmt::format("P {}", r.cpus)
                : r.cpu_cores == "mask"      ? fmt::format("mask {}", r.cpus)
                                             : std::string("all");
      } else if (c.field == "test") {
        value = test_name(r.spec);
      } else if (c.field == "t/s") {
        value = fmt::format("{:.2f} ± {:.2f}", r.avg_ts(), r.stddev_ts());
      } else if (c.field == "cv") {
        const Summary s = r.ts_summary();
        value = fmt::format("{:.1f}%{}", 100 * s.cv, s.cv > kNoisyCv ? " !" : "");
        if (s.cv > kNoisyCv) noisy_.push_back(fmt::format("{} ({:.1f}%)", test_name(r.spec), 100 * s.cv));
      } else if (c.field == "drift") {
        const auto d = r.drift_percent();
        value = d ? fmt::format("{:+.1f}%", *d) : "-";
      } else if (c.field == "mem") {
        const auto rss = r.rss_peak_minus_idle_bytes(env_);
        value = rss ? fmt::format("{:.1f}", static_cast<double>(*rss) / 1048576.0) : "-";
        if (r.vram_peak_minus_idle_bytes) {
          value += fmt::format(" + {:.1f} GPU", static_cast<double>(*r.vram_peak_minus_idle_bytes) / 1048576.0);
        }
      } else {
        for (const auto& f : fields) {
          if (f.name == c.field) value = f.text;
        }
      }
      line += fmt::format(" {} |", pad(value, c.width));
    }
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
    if (r.other_busy_cpus && oversubscribed(*r.other_busy_cpus, r.spec.n_threads, env_.usable_cpus)) {
      contended_.push_back(oversubscribed_warning(test_name(r.spec), *r.other_busy_cpus, r.spec.n_threads, env_.usable_cpus));
    }
    if (r.gpu_expert_cache) {
      experts_.push_back(fmt::format("{}: {}", test_name(r.spec),
                                     describe_gpu_expert_cache(*r.gpu_expert_cache, r.gpu_expert_cache_tokens)));
    }
    if (r.experts) {
      std::string line = fmt::format("{}: {}", test_name(r.spec),
                                     describe_expert_stats(*r.experts, r.expert_tokens, r.expert_seconds));
      if (r.disk_read_gbps && *r.disk_read_gbps > 0 && r.expert_tokens > 0 && r.experts->bytes_read > 0) {
        // What the storage alone allows at this many bytes per token, against what was measured.
        const double per_token = static_cast<double>(r.experts->bytes_read) / static_cast<double>(r.expert_tokens);
        const double disk_bound = *r.disk_read_gbps * 1e9 / per_token;
        line += fmt::format("; the disk ({:.2f} GB/s, --diskbw) allows {:.1f} t/s at that many bytes per token: this "
                            "test ran at {:.0f}% of it",
                            *r.disk_read_gbps, disk_bound, 100.0 * r.avg_ts() / disk_bound);
      }
      experts_.push_back(std::move(line));
    }
    if (r.spec.spec && r.spec.spec_draft_max == 0) greedy_ = {test_name(r.spec), r.avg_ts()};
    if (r.spec.spec && r.spec.spec_draft_max > 0 && greedy_.second > 0) spec_.push_back(describe_spec(r));
    if (r.spec.n_step > 0) {
      const TestSpec& t = r.spec;
      const std::string key =
          fmt::format("{}, {} thread{}{}{}", r.model.type, t.n_threads, t.n_threads == 1 ? "" : "s",
                      t.n_depth > 0 ? fmt::format(", depth {}", t.n_depth) : "",
                      r.backend == "CPU" ? "" : fmt::format(", -ngl {} -ncmoe {}", t.n_gpu_layers, t.n_cpu_moe));
      auto it = std::find_if(steps_.begin(), steps_.end(), [&](const StepGroup& g) { return g.key == key; });
      if (it == steps_.end()) it = steps_.insert(steps_.end(), StepGroup{.key = key});
      StepRow row{.n_step = t.n_step,
                  .n_seqs = t.n_step_seqs,
                  .ms = step_ms(r),
                  .experts = r.moe_experts_per_call,
                  .pairs = r.moe_pairs_per_call};
      for (const ProfileRow& p : r.profile) row.blocks.emplace_back(p.block, p.ms / static_cast<double>(t.n_gen));
      it->rows.push_back(std::move(row));
    }
    if (r.spec.e2e) {
      e2e_.push_back(fmt::format("{} on {}: time to first token {:.1f} ± {:.1f} ms, whole turn {:.1f} ± {:.1f} ms for {} "
                                 "prompt and {} generated tokens",
                                 test_name(r.spec), r.model.type, mean(as_doubles(r.ttft_ns)) / 1e6,
                                 sample_stddev(as_doubles(r.ttft_ns)) / 1e6, static_cast<double>(r.avg_ns()) / 1e6,
                                 static_cast<double>(r.stddev_ns()) / 1e6, r.spec.n_prompt, r.spec.n_gen));
    }
  }

  void comparisons(const std::vector<Comparison>& list) override { comparisons_ = list; }

  void footer() override {
    // The GPU is known once a test placed layers there (opening a device before the tests
    // would put its driver's memory into every CPU test's peak).
    for (const std::string& gpu : gpus_) fmt::print(out_, "\nGPU: {}\n", gpu);
    if (!noisy_.empty()) {
      fmt::print(out_, "\nwarning: coefficient of variation above {:.0f}% in the rows marked ! (too noisy to compare "
                       "differences of that size; rerun with more -r or a quieter machine): {}\n",
                 100 * kNoisyCv, fmt::join(noisy_, ", "));
    }
    for (const std::string& w : contended_) fmt::print(out_, "\nwarning: {}\n", w);
    if (!experts_.empty()) {
      fmt::print(out_, "\nRouted experts in tiers (copies in VRAM; read from the file when the model does not fit in RAM):\n");
      for (const std::string& line : experts_) fmt::print(out_, "- {}\n", line);
    }
    if (!e2e_.empty()) {
      fmt::print(out_, "\ne2e: a chat turn through the chat template, tokenization, prefill, sampling (end-of-generation "
                       "ignored) and detokenization{}; its t/s is generated tokens / whole turn:\n",
                 std::any_of(e2e_.begin(), e2e_.end(), [](const std::string& s) { return s.find("(HTTP)") != std::string::npos; })
                     ? ", over HTTP for a server" : "");
      for (const std::string& line : e2e_) fmt::print(out_, "- {}\n", line);
    }
    for (const StepGroup& g : steps_) print_steps(g);
    if (!spec_.empty()) {
      fmt::print(out_, "\nspeculative decoding: speed-up over greedy = tokens per verify step / (verify step time / decode "
                       "step time); expected tokens per step at acceptance a with k drafts = 1 + a + ... + a^k:\n");
      for (const std::string& line : spec_) fmt::print(out_, "- {}\n", line);
    }
    if (!comparisons_.empty()) {
      fmt::print(out_, "\ncomparisons (ratio of mean t/s with a 95% Welch interval on the log ratio):\n");
      for (const Comparison& c : comparisons_) fmt::print(out_, "- {}\n", describe_comparison(c));
    }
    fmt::print(out_, "\nbuild: {} ({})\n", env_.build_commit, env_.build_number);
  }

 private:
  struct Column {
    std::string field, title;
    int width;  // > 0 right-aligned, < 0 left-aligned
  };
  void add(std::string field, std::string title, int width) {
    columns_.push_back({std::move(field), std::move(title), width});
  }
  static std::string pad(const std::string& s, int width) {
    const size_t w = static_cast<size_t>(std::abs(width));
    const size_t len = display_width(s);
    if (len >= w) return s;
    const std::string fill(w - len, ' ');
    return width > 0 ? fill + s : s + fill;
  }
  // One speculative test against the greedy run before it: the speed-up, what a verify step
  // yields (expected at the target acceptance, measured), and so what a verify step cost.
  std::string describe_spec(const TestResult& r) const {
    const double speedup = r.avg_ts() / greedy_.second;
    std::string line = fmt::format("{}: {:.2f}x {}", test_name(r.spec), speedup, greedy_.first);
    if (!r.spec.spec_mtp) {
      line += fmt::format("; expected {:.2f} tokens per verify step of {}",
                          spec_expected_tokens_per_step(r.spec.spec_acceptance, r.spec.spec_draft_max),
                          r.spec.spec_draft_max + 1);
    }
    if (r.spec_n_steps > 0) {
      const double measured = static_cast<double>(r.spec_n_accepted + r.spec_n_steps) / static_cast<double>(r.spec_n_steps);
      // The share of drafted tokens kept is below a: drafts after a rejection are not kept.
      line += fmt::format(", measured {:.2f} ({:.0f}% of the drafted tokens kept)", measured,
                          r.spec_n_drafted > 0
                              ? 100.0 * static_cast<double>(r.spec_n_accepted) / static_cast<double>(r.spec_n_drafted)
                              : 0.0);
      // Steps without drafts (the sequence's end) are decode steps; with nearly every step a
      // verify, tokens per step / speed-up is the verify step's cost in decode steps.
      if (speedup > 0) line += fmt::format("; a verify step cost {:.2f} decode steps", measured / speedup);
    }
    return line;
  }

  struct StepRow {
    int64_t n_step = 0;
    int64_t n_seqs = 1;  // sequences in the step, n_step tokens each
    double ms = 0;
    double experts = 0, pairs = 0;  // --profile: routed experts read and pairs per MoE layer
    std::vector<std::pair<std::string, double>> blocks;  // --profile: ms per step by block
  };
  struct StepGroup {
    std::string key;
    std::vector<StepRow> rows;
  };
  // The step tests of one configuration: each size's time per step and per block, and the
  // ratio to the smallest size's.
  void print_steps(const StepGroup& g) const {
    if (g.rows.size() < 2) return;
    std::vector<StepRow> rows = g.rows;
    // By tokens in the step, one sequence's before several sequences' of the same count.
    std::sort(rows.begin(), rows.end(), [](const StepRow& a, const StepRow& b) {
      return std::pair(a.n_step * a.n_seqs, a.n_seqs) < std::pair(b.n_step * b.n_seqs, b.n_seqs);
    });
    const StepRow& base = rows.front();
    const bool several = std::any_of(rows.begin(), rows.end(), [](const StepRow& r) { return r.n_seqs > 1; });
    const auto label = [](const StepRow& r) {
      return r.n_seqs == 1 ? fmt::format("{}", r.n_step) : fmt::format("{} seqs x {}", r.n_seqs, r.n_step);
    };
    fmt::print(out_, "\nstep cost ({}): ms per step of N tokens (each a verify step; N = 1 a decode step{}) and its ratio "
                     "to the {} step{}\n",
               g.key, several ? "; S seqs x N: S sequences in one call, N tokens each" : "",
               base.n_seqs == 1 ? fmt::format("{}-token", base.n_step) : label(base),
               base.blocks.empty() ? " (per block with --profile)" : "");
    std::string head = "| tokens in the step |", rule = "| --- |";
    for (const StepRow& r : rows) {
      head += fmt::format(" {} |", label(r));
      rule += " ---: |";
    }
    fmt::print(out_, "{}\n{}\n", head, rule);
    const auto cell = [](double ms, double base_ms) {
      return base_ms > 0 ? fmt::format(" {:.2f} ({:.2f}x) |", ms, ms / base_ms) : fmt::format(" {:.2f} |", ms);
    };
    std::string line = "| step |";
    for (const StepRow& r : rows) line += cell(r.ms, base.ms);
    fmt::print(out_, "{}\n", line);
    for (size_t b = 0; b < base.blocks.size(); ++b) {
      const auto& [name, base_ms] = base.blocks[b];
      double largest = 0;
      for (const StepRow& r : rows) largest = std::max(largest, b < r.blocks.size() ? r.blocks[b].second : 0.0);
      if (largest < 0.005) continue;  // blocks this model does not have
      line = fmt::format("| {} |", name);
      for (const StepRow& r : rows) line += cell(b < r.blocks.size() ? r.blocks[b].second : 0.0, base_ms);
      fmt::print(out_, "{}\n", line);
    }
    if (!base.blocks.empty()) {
      // What the step's tokens share: everything but the experts (routed and shared, one
      // region), whose routed reads grow with the union of the experts the tokens pick.
      const auto shared = [](const StepRow& r) {
        double ms = r.ms;
        for (const auto& [name, v] : r.blocks) {
          if (name == "moe_experts" || name == "expert_wait") ms -= v;
        }
        return ms;
      };
      line = "| all but moe_experts |";
      for (const StepRow& r : rows) line += cell(shared(r), shared(base));
      fmt::print(out_, "{}\n", line);
    }
    if (base.experts > 0) {
      // The expert union: each distinct expert is read once for all its tokens.
      line = "| routed experts read per layer (pairs) |";
      for (const StepRow& r : rows) line += fmt::format(" {:.1f} ({:.0f}) |", r.experts, r.pairs);
      fmt::print(out_, "{}\n", line);
    }
  }

  const Environment& env_;
  std::FILE* out_;
  std::vector<Column> columns_;
  std::pair<std::string, double> greedy_{"", 0.0};  // the last greedy test: name, t/s
  std::vector<std::string> spec_;                    // speculative tests' lines, for the footer
  std::vector<StepGroup> steps_;                     // step tests by configuration
  std::vector<std::string> noisy_;          // tests with cv > 5%, for the footer
  std::vector<std::string> contended_;      // oversubscribed tests' warnings (cpu_load.h)
  std::vector<std::string> experts_;        // tests' expert cache figures, for the footer
  std::vector<std::string> e2e_;            // e2e tests' time to first token and turn time, for the footer
  std::vector<std::string> gpus_;           // the devices tests ran on, with their drivers
  std::vector<Comparison> comparisons_;
};

}  // namespace

std::unique_ptr<Printer> make_printer(const BenchParams& params, const Environment& env, std::FILE* out) {
  switch (params.output) {
    case OutputFormat::kJson: return std::make_unique<JsonPrinter>(env, out, false);
    case OutputFormat::kJsonl: return std::make_unique<JsonPrinter>(env, out, true);
    case OutputFormat::kCsv: return std::make_unique<CsvPrinter>(env, out);
    case OutputFormat::kMarkdown: break;
  }
  return std::make_unique<MarkdownPrinter>(params, env, out);
}

}  // namespace moetier::bench
