#include "tune/report.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace moetier::tune {

namespace {

constexpr double kMiB = 1048576.0;

// The path as a shell word: quoted when it holds anything but the usual path characters.
std::string shell_word(const std::string& s) {
  for (char c : s) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == ':' || c == '=';
    if (!plain) {
      std::string q = "'";
      for (char d : s) q += d == '\'' ? std::string("'\\''") : std::string(1, d);
      return q + "'";
    }
  }
  return s;
}

bench::Summary summary_of(const std::vector<double>& v) { return bench::summarize(std::span<const double>(v)); }

std::string mib(const std::optional<int64_t>& b) {
  return b ? fmt::format("{:.1f}", static_cast<double>(*b) / kMiB) : std::string("?");
}

std::string mean_sd(const std::vector<double>& v, int precision) {
  const bench::Summary s = summary_of(v);
  return fmt::format("{:.{}f} ± {:.{}f}", s.mean, precision, s.sd, precision);
}

// Turn seconds per repetition (serve's figure).
std::vector<double> turn_samples(const Measurement& m) {
  std::vector<double> out;
  for (int64_t i = 0; i < m.reps(); ++i) out.push_back(turn_seconds(m.pp_ts[static_cast<size_t>(i)], m.tg_ts[static_cast<size_t>(i)]));
  return out;
}

std::string score_text(const Measurement& m, Purpose p) {
  if (m.reps() == 0) return "-";
  return p == Purpose::kServe ? fmt::format("{} s", mean_sd(turn_samples(m), 3)) : fmt::format("{} t/s", mean_sd(m.tg_ts, 2));
}

std::string score_definition(Purpose p) {
  return p == Purpose::kServe
             ? fmt::format("chat turn time T = {:.0f}/pp + {:.0f}/tg seconds (a {:.0f}-token prompt and a {:.0f}-token "
                           "answer at the measured speeds), lower is better; ratios are of 1/T",
                           kTurnPromptTokens, kTurnGenTokens, kTurnPromptTokens, kTurnGenTokens)
             : std::string("generation speed (tg t/s), higher is better");
}

std::string memory_text(const Measurement& m) {
  std::string s = fmt::format("{} MiB RSS", mib(m.rss_bytes));
  if (m.vram_bytes) s += fmt::format(" + {} MiB VRAM", mib(m.vram_bytes));
  return s;
}

}  // namespace

std::string winner_command(const TuneReport& r) {
  const Candidate& c = r.result.candidates[r.result.winner].candidate;
  const std::string flags = candidate_flags(c, r.purpose, r.n_layer_all);
  if (r.purpose == Purpose::kServe) {
    return fmt::format("moetier serve -m {} -c {} {}", shell_word(r.model_path), r.n_ctx, flags);
  }
  return fmt::format("moetier bench -m {} {}", shell_word(r.model_path), flags);
}

std::string fit_verdict(const TuneReport& r) {
  if (r.fit_flags.empty() || r.result.candidates.empty()) return "";
  const Candidate& start = r.result.candidates.front().candidate;
  const Candidate& w = r.result.candidates[r.result.winner].candidate;
  if (w.n_gpu_layers == start.n_gpu_layers && w.n_cpu_moe == start.n_cpu_moe) {
    return fmt::format("--fit's placement ({}) confirmed by measurement", r.fit_flags);
  }
  return fmt::format("--fit's placement ({}) overruled by measurement: {} is faster", r.fit_flags,
                     r.result.candidates[r.result.winner].candidate.why);
}

std::string render_markdown(const TuneReport& r) {
  const SearchResult& res = r.result;
  std::string out = fmt::format("# moetier tune --for {}\n\n", purpose_name(r.purpose));
  for (const std::string& line : bench::provenance_lines(r.env)) out += fmt::format("- {}\n", line);
  if (!r.model_type.empty()) out += fmt::format("- model type: {}\n", r.model_type);
  out += fmt::format("- placement: {}\n", r.placement_note);
  out += fmt::format("- score: {}\n", score_definition(r.purpose));
  int64_t measured = 0;
  for (const CandidateResult& c : res.candidates) measured += c.measured ? 1 : 0;
  out += fmt::format("- search: {} candidates, {} measured, {} left out by --time-budget; {:.0f} s of {:.0f} s\n\n",
                     res.candidates.size(), measured, res.n_skipped, res.elapsed_s, r.time_budget_s);

  const std::string pp1 = fmt::format("pp{}", r.search.short_size.n_prompt), tg1 = fmt::format("tg{}", r.search.short_size.n_gen);
  out += fmt::format("## Phase 1: {} + {}, {} repetitions each, interleaved per model load\n\n", pp1, tg1, r.search.short_reps);
  out += fmt::format("| # | candidate | flags | {} t/s | {} t/s | score | peak − idle |\n", pp1, tg1);
  out += "|--:|:--|:--|--:|--:|--:|--:|\n";
  for (size_t i = 0; i < res.candidates.size(); ++i) {
    const CandidateResult& c = res.candidates[i];
    const std::string flags = candidate_flags(c.candidate, r.purpose, r.n_layer_all);
    if (!c.measured) {
      out += fmt::format("| {} | {} | `{}` | - | - | {} | - |\n", i + 1, c.candidate.why, flags,
                         c.failure.empty() ? std::string("not measured (time budget)") : "failed: " + c.failure);
      continue;
    }
    const Measurement& m = c.short_run;
    out += fmt::format("| {} | {} | `{}` | {} | {} | {} | {} |\n", i + 1, c.candidate.why, flags, mean_sd(m.pp_ts, 2),
                       mean_sd(m.tg_ts, 2), score_text(m, r.purpose), memory_text(m));
  }
  out += "\n";
  if (res.phase2) {
    const std::string pp2 = fmt::format("pp{}", r.search.full_size.n_prompt), tg2 = fmt::format("tg{}", r.search.full_size.n_gen);
    out += fmt::format("## Phase 2: the best two, {} + {}, {} repetitions each{}\n\n", pp2, tg2, res.phase2_reps,
                       res.phase2_interleaved ? ", interleaved" : ", one after the other (different model loads)");
    out += fmt::format("| candidate | flags | {} t/s | {} t/s | score | peak − idle |\n|:--|:--|--:|--:|--:|--:|\n", pp2, tg2);
    for (size_t i : {res.winner, res.runner_up.value_or(res.winner)}) {
      const CandidateResult& c = res.candidates[i];
      if (!c.full_run) continue;
      out += fmt::format("| {} | `{}` | {} | {} | {} | {} |\n", c.candidate.why,
                         candidate_flags(c.candidate, r.purpose, r.n_layer_all), mean_sd(c.full_run->pp_ts, 2),
                         mean_sd(c.full_run->tg_ts, 2), score_text(*c.full_run, r.purpose), memory_text(*c.full_run));
      if (i == res.runner_up.value_or(res.winner)) break;
    }
    out += "\n";
  }
  if (!res.phase2_note.empty()) out += fmt::format("{}\n\n", res.phase2_note);

  const Measurement& w = res.final_measurement(res.winner);
  out += "## Winner\n\n";
  out += fmt::format("    {}\n\n", winner_command(r));
  out += fmt::format("- speed ({}): pp {} t/s, tg {} t/s", res.phase2 ? "phase 2" : "phase 1", mean_sd(w.pp_ts, 2),
                     mean_sd(w.tg_ts, 2));
  if (r.purpose == Purpose::kServe) out += fmt::format(", chat turn {} s", mean_sd(turn_samples(w), 3));
  out += fmt::format("\n- memory, peak − idle: {} (at the measured sizes; the KV cache of -c {} comes on top)\n",
                     memory_text(w), r.n_ctx);
  if (res.runner_up) {
    const CandidateResult& u = res.candidates[*res.runner_up];
    const Measurement& um = res.final_measurement(*res.runner_up);
    out += fmt::format("- runner-up: {} (`{}`): {}\n", u.candidate.why, candidate_flags(u.candidate, r.purpose, r.n_layer_all),
                       score_text(um, r.purpose));
    if (res.ci) {
      out += fmt::format("- score ratio winner / runner-up {:.3f}, 95% CI [{:.3f}, {:.3f}]: {}\n", res.ci->ratio, res.ci->low,
                         res.ci->high,
                         res.no_difference
                             ? (res.chose_lighter
                                    ? fmt::format("no difference; the runner-up was faster on average, the winner is "
                                                  "preferred for {}", res.lighter_reason)
                                    : std::string("no difference (and the runner-up is not lighter or simpler)"))
                             : std::string("faster"));
    } else {
      out += "- no confidence interval (fewer than 2 repetitions)\n";
    }
  } else {
    out += "- only one candidate was measured: nothing to compare it with (raise --time-budget)\n";
  }
  if (const std::string v = fit_verdict(r); !v.empty()) out += fmt::format("- {}\n", v);
  return out;
}

std::string render_json(const TuneReport& r) {
  using nlohmann::ordered_json;
  const SearchResult& res = r.result;
  const auto measurement = [&](const Measurement& m) {
    ordered_json j = {{"pp_ts", m.pp_ts}, {"tg_ts", m.tg_ts}};
    const bench::Summary pp = summary_of(m.pp_ts), tg = summary_of(m.tg_ts);
    j["avg_pp_ts"] = pp.mean;
    j["stddev_pp_ts"] = pp.sd;
    j["avg_tg_ts"] = tg.mean;
    j["stddev_tg_ts"] = tg.sd;
    const std::vector<double> score = score_samples(m, r.purpose);
    j["score_samples"] = score;
    j["avg_score"] = summary_of(score).mean;
    if (r.purpose == Purpose::kServe) j["turn_s"] = turn_samples(m);
    j["rss_peak_minus_idle_bytes"] = m.rss_bytes ? ordered_json(*m.rss_bytes) : ordered_json(nullptr);
    j["vram_peak_minus_idle_bytes"] = m.vram_bytes ? ordered_json(*m.vram_bytes) : ordered_json(nullptr);
    return j;
  };
  ordered_json j;
  j["moetier_version"] = r.env.version;
  j["build_commit"] = r.env.build_commit;
  j["date"] = r.env.date;
  j["cpu_info"] = r.env.cpu_info;
  j["cpu_isa"] = r.env.cpu_isa;
  j["model_file"] = r.model_path;
  if (!r.env.model_files.empty()) {
    j["model_file_bytes"] = r.env.model_files.front().file_bytes;
    j["model_sha256"] = r.env.model_files.front().sha256;
  }
  j["model_type"] = r.model_type;
  j["purpose"] = purpose_name(r.purpose);
  j["score"] = score_definition(r.purpose);
  j["n_ctx"] = r.n_ctx;
  j["time_budget_s"] = r.time_budget_s;
  j["elapsed_s"] = res.elapsed_s;
  j["placement"] = r.placement_note;
  j["fit_flags"] = r.fit_flags;
  j["idle_rss_bytes"] = r.env.idle_rss_bytes ? ordered_json(*r.env.idle_rss_bytes) : ordered_json(nullptr);
  j["phase1"] = {{"n_prompt", r.search.short_size.n_prompt}, {"n_gen", r.search.short_size.n_gen},
                 {"repetitions", r.search.short_reps}};
  j["phase2"] = {{"ran", res.phase2}, {"n_prompt", r.search.full_size.n_prompt}, {"n_gen", r.search.full_size.n_gen},
                 {"repetitions", res.phase2_reps}, {"interleaved", res.phase2_interleaved}, {"note", res.phase2_note}};
  ordered_json cands = ordered_json::array();
  for (size_t i = 0; i < res.candidates.size(); ++i) {
    const CandidateResult& c = res.candidates[i];
    ordered_json e = {{"index", i},
                      {"why", c.candidate.why},
                      {"flags", candidate_flags(c.candidate, r.purpose, r.n_layer_all)},
                      {"n_gpu_layers", c.candidate.n_gpu_layers},
                      {"n_cpu_moe", c.candidate.n_cpu_moe},
                      {"n_ubatch", c.candidate.n_ubatch},
                      {"n_threads", c.candidate.n_threads},
                      {"use_mmap", c.candidate.use_mmap},
                      {"type_kv", std::string(dtype_name(c.candidate.type_kv))},
                      {"measured", c.measured},
                      {"failure", c.failure.empty() ? ordered_json(nullptr) : ordered_json(c.failure)}};
    e["phase1"] = c.measured ? measurement(c.short_run) : ordered_json(nullptr);
    e["phase2"] = c.full_run ? measurement(*c.full_run) : ordered_json(nullptr);
    cands.push_back(std::move(e));
  }
  j["candidates"] = std::move(cands);
  ordered_json win = {{"index", res.winner}, {"command", winner_command(r)}};
  win["measurement"] = measurement(res.final_measurement(res.winner));
  j["winner"] = std::move(win);
  j["runner_up"] = res.runner_up ? ordered_json(*res.runner_up) : ordered_json(nullptr);
  if (res.ci) {
    j["ratio"] = {{"winner_over_runner_up", res.ci->ratio}, {"ci95_low", res.ci->low}, {"ci95_high", res.ci->high},
                  {"df", std::isfinite(res.ci->df) ? ordered_json(res.ci->df) : ordered_json(nullptr)}};
  } else {
    j["ratio"] = nullptr;
  }
  j["no_difference"] = res.no_difference;
  j["chose_lighter"] = res.chose_lighter;
  j["lighter_reason"] = res.lighter_reason;
  j["fit_verdict"] = fit_verdict(r);
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace moetier::tune
