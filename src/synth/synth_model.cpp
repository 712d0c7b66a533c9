#include "synth/synth_model.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "console/progress.h"
#include "core/utf8_path.h"
#include "gguf/writer.h"
#include "synth/presets.h"
#include "synth/weights.h"
#include "tensor/type_ops.h"

namespace moetier::synth {
namespace {

// About 1 M values (4 MiB of f32) per work item: big enough to amortise thread start-up,
// small enough that n_threads of them stay far below the RSS budget.
constexpr int64_t kValuesPerTask = 1 << 20;

int64_t rows_of(const TensorSpec& t) {
  int64_t rows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
  return rows;
}

// Generates rows [first, first + n) of one tensor in f32 and converts them to `type`
// into dst (n * row_bytes bytes). `scratch` holds the f32 rows.
void make_rows(const TensorInit& init, DType type, int64_t first, int64_t n, std::vector<float>& scratch,
               uint8_t* dst) {
  const int64_t row_elems = init.row_elems;
  scratch.resize(static_cast<size_t>(n * row_elems));
  fill_rows(init, first, n, scratch.data());
  const TypeOps* ops = type_ops(type);
  CHECK_MSG(ops != nullptr, "no quantizer for {}", dtype_name(type));
  const int64_t row_bytes = dtype_row_bytes(type, row_elems);
  for (int64_t r = 0; r < n; ++r) {
    ops->quantize_row(scratch.data() + r * row_elems, dst + r * row_bytes, row_elems);
  }
}

// Writes one tensor's data in batches of n_threads work items.
Status write_tensor(gguf::Writer& writer, const TensorInit& init, DType type, int64_t n_rows, int n_threads,
                    ProgressBar& progress, std::vector<std::vector<float>>& scratch, std::vector<uint8_t>& out) {
  const int64_t row_elems = init.row_elems;
  const int64_t row_bytes = dtype_row_bytes(type, row_elems);
  const int64_t rows_per_task = std::max<int64_t>(1, kValuesPerTask / std::max<int64_t>(row_elems, 1));
  const int64_t rows_per_batch = rows_per_task * n_threads;
  for (int64_t first = 0; first < n_rows; first += rows_per_batch) {
    const int64_t batch_rows = std::min(rows_per_batch, n_rows - first);
    out.resize(static_cast<size_t>(batch_rows * row_bytes));
    const int64_t n_tasks = (batch_rows + rows_per_task - 1) / rows_per_task;
    auto run_task = [&](int64_t task) {
      const int64_t task_first = task * rows_per_task;
      const int64_t task_rows = std::min(rows_per_task, batch_rows - task_first);
      make_rows(init, type, first + task_first, task_rows, scratch[static_cast<size_t>(task)],
                out.data() + task_first * row_bytes);
    };
    if (n_tasks == 1) {
      run_task(0);
    } else {
      std::vector<std::thread> workers;
      for (int64_t t = 1; t < n_tasks; ++t) workers.emplace_back(run_task, t);
      run_task(0);
      for (auto& w : workers) w.join();
    }
    RETURN_IF_ERROR(writer.write_tensor_data(out.data(), out.size()));
    progress.add(out.size());
  }
  return Status::ok();
}

std::string ordinal(int64_t n) {
  if (n == 1) return "1st";
  if (n == 2) return "2nd";
  if (n == 3) return "3rd";
  return fmt::format("{}th", n);
}

std::string tokenizer_pre_for(const std::string& arch) { return arch == "qwen35moe" ? "qwen35" : "qwen2"; }

Result<SynthSummary> write_file(const SynthPlan& plan, const SynthOptions& options);

}  // namespace

Result<SynthPlan> plan_synth(const SynthOptions& options) {
  ASSIGN_OR_RETURN(const Preset* preset, find_preset(options.preset));
  SynthPlan plan;
  plan.hparams = preset->hparams;
  HParams& hp = plan.hparams;
  plan.mix = options.mix.value_or(preset->default_mix);
  if (options.full_attention_interval != 0) {
    if (hp.arch != "qwen35moe") {
      return Status::bad_input(fmt::format("--attention-every applies to qwen35moe presets, not {}", hp.arch));
    }
    if (options.full_attention_interval < 1 || options.full_attention_interval > 4096) {
      return Status::bad_input(
          fmt::format("--attention-every must be in 1..4096, got {}", options.full_attention_interval));
    }
    hp.full_attention_interval = options.full_attention_interval;
    hp.layer_kinds = layer_pattern(hp, hp.n_layer);
    plan.notes.push_back(fmt::format("every {} layer is full attention (the preset has every {})",
                                     ordinal(options.full_attention_interval), ordinal(preset->hparams.full_attention_interval)));
  }
  if (options.n_layer != 0) RETURN_IF_ERROR(set_depth(hp, options.n_layer));
  if (options.n_layer_mtp >= 0) {
    if (options.n_layer_mtp > 0 && hp.arch != "qwen35moe") {
      return Status::bad_input(fmt::format("--mtp-layers applies to qwen35moe presets, not {}", hp.arch));
    }
    // llama.cpp runs one MTP block (qwen35moe); more would be written but never used.
    if (options.n_layer_mtp > 1) {
      return Status::bad_input(fmt::format("--mtp-layers must be 0 or 1, got {}", options.n_layer_mtp));
    }
    hp.n_layer_mtp = options.n_layer_mtp;
  }
  if (options.n_expert != 0) {
    if (options.n_expert < hp.n_expert_used || options.n_expert > 4096) {
      return Status::bad_input(fmt::format("--experts must be in {}..4096 (the preset uses {} per token), got {}",
                                           hp.n_expert_used, hp.n_expert_used, options.n_expert));
    }
    plan.notes.push_back(fmt::format("{} routed experts (the preset has {})", options.n_expert, hp.n_expert));
    hp.n_expert = options.n_expert;
  }
  if (options.n_vocab != 0) {
    if (!options.vocab_path.empty()) return Status::bad_input("--n-vocab and --vocab exclude each other");
    // 256 byte tokens + 5 special tokens at least; 4 M keeps the tensors' row counts sane.
    if (options.n_vocab < 262 || options.n_vocab > (int64_t{1} << 22)) {
      return Status::bad_input(fmt::format("--n-vocab must be in 262..4194304, got {}", options.n_vocab));
    }
    plan.notes.push_back(fmt::format("n_vocab {} (the preset has {})", options.n_vocab, hp.n_vocab));
    hp.n_vocab = options.n_vocab;
  }

  MetadataList tokenizer;
  if (!options.vocab_path.empty()) {
    ASSIGN_OR_RETURN(CopiedVocab copied, copy_vocab_metadata(options.vocab_path));
    if (copied.n_tokens != hp.n_vocab) {
      plan.notes.push_back(fmt::format("n_vocab {} taken from {} (the preset has {})", copied.n_tokens,
                                       options.vocab_path, hp.n_vocab));
      hp.n_vocab = copied.n_tokens;
    }
    tokenizer = std::move(copied.metadata);
  } else {
    ASSIGN_OR_RETURN(SyntheticVocab vocab, make_synthetic_vocab(hp.n_vocab));
    tokenizer = synthetic_vocab_metadata(vocab, tokenizer_pre_for(hp.arch));
  }

  const ArchInfo* arch = find_arch(hp.arch);
  if (arch == nullptr) return Status::runtime(fmt::format("architecture '{}' is not registered", hp.arch));
  plan.tensors = arch->tensor_specs(hp);
  if (options.mtp_only) {
    if (hp.n_layer_mtp == 0) return Status::bad_input("--mtp-only needs an MTP block (--mtp-layers 1)");
    std::erase_if(plan.tensors, [&](const TensorSpec& t) { return t.layer >= 0 && t.layer < hp.n_layer; });
    plan.notes.push_back("MTP-only file: token_embd, output_norm, output and the MTP block (a draft for -md)");
  }
  plan.types = choose_tensor_types(plan.mix, hp, plan.tensors);

  plan.metadata.emplace_back("general.architecture", gguf::Value::make_string(hp.arch));
  plan.metadata.emplace_back("general.name", gguf::Value::make_string(hp.name));
  plan.metadata.emplace_back("general.file_type", gguf::Value::make_u32(quant_mix_file_type(plan.mix)));
  if (quant_mix_is_quantized(plan.mix)) {
    plan.metadata.emplace_back("general.quantization_version", gguf::Value::make_u32(2));
  }
  for (auto& kv : tokenizer) plan.metadata.push_back(std::move(kv));
  if (options.routing == SynthOptions::Routing::kLocality) {
    RETURN_IF_ERROR(check_locality(hp, options.locality));
    plan.metadata.emplace_back("moetier.synth.routing", gguf::Value::make_string("locality"));
    for (const auto& [key, value] : locality_metadata(options.locality)) {
      plan.metadata.emplace_back(key, gguf::Value::make_f32(static_cast<float>(value)));
    }
    plan.notes.push_back(locality_summary(options.locality));
  }
  return plan;
}

Result<SynthSummary> synthesize(const SynthOptions& options) {
  ASSIGN_OR_RETURN(SynthPlan plan, plan_synth(options));
  return write_synth(plan, options);
}

Result<SynthSummary> write_synth(const SynthPlan& plan, const SynthOptions& options) {
  auto result = write_file(plan, options);
  if (!result) {
    std::error_code ec;  // best effort: do not leave a truncated model behind
    std::filesystem::remove(utf8_path(options.out_path), ec);
  }
  return result;
}

namespace {

Result<SynthSummary> write_file(const SynthPlan& plan, const SynthOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const HParams& hp = plan.hparams;
  const ArchInfo* arch = find_arch(hp.arch);
  CHECK(arch != nullptr);  // plan_synth checked it

  auto created = gguf::Writer::create(options.out_path);
  if (!created) return Status::runtime(created.status().message());
  gguf::Writer& writer = **created;
  // general.* first, then the architecture's keys, then the tokenizer (llama.cpp's order).
  size_t next_md = 0;
  for (; next_md < plan.metadata.size() && plan.metadata[next_md].first.rfind("general.", 0) == 0; ++next_md) {
    writer.set(plan.metadata[next_md].first, plan.metadata[next_md].second);
  }
  arch->write_hparams(hp, writer);
  for (; next_md < plan.metadata.size(); ++next_md) writer.set(plan.metadata[next_md].first, plan.metadata[next_md].second);
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    RETURN_IF_ERROR(writer.add_tensor(plan.tensors[i].name, plan.types[i], plan.tensors[i].ne));
  }
  if (auto st = writer.write_header(); !st) return Status::runtime(st.message());

  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int n_threads = std::clamp(options.n_threads > 0 ? options.n_threads : hw, 1, 256);
  ProgressBar progress(ProgressOptions{.label = "synth", .total = writer.total_data_bytes(), .bytes = true,
                                       .enabled = options.progress});
  std::vector<std::vector<float>> scratch(static_cast<size_t>(n_threads));
  std::vector<uint8_t> out;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorSpec& spec = plan.tensors[i];
    TensorInit init = tensor_init(spec, hp, options.seed);
    if (options.routing == SynthOptions::Routing::kLocality) apply_locality(spec, hp, options.locality, options.seed, init);
    if (auto st = write_tensor(writer, init, plan.types[i], rows_of(spec), n_threads, progress, scratch, out); !st) {
      return Status::runtime(st.message());
    }
  }
  if (auto st = writer.finish(); !st) return Status::runtime(st.message());
  progress.finish();

  SynthSummary summary;
  std::error_code ec;
  summary.file_bytes = std::filesystem::file_size(utf8_path(options.out_path), ec);
  summary.n_tensors = plan.tensors.size();
  summary.data_bytes = writer.total_data_bytes();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace

}  // namespace moetier::synth
