// `moetier synth`: command-line front end of synth/synth_model.h.
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/args.h"
#include "core/format.h"
#include "synth/presets.h"
#include "synth/synth_model.h"

namespace moetier {
namespace {

std::string synth_epilog() {
  std::string text = "presets (default --quant in brackets):\n";
  for (const auto& p : synth::presets()) {
    text += fmt::format("  {:<18} {} [{}]\n", p.name, p.description, synth::quant_mix_name(p.default_mix));
  }
  text += "\nquant mixes (general.file_type):\n";
  for (auto mix : {synth::QuantMix::kF32, synth::QuantMix::kF16, synth::QuantMix::kQ8_0, synth::QuantMix::kQ4_K_M,
                   synth::QuantMix::kUdQ4_K_XL, synth::QuantMix::kIQ4_XS}) {
    text += fmt::format("  {:<11} ({:>2}) {}\n", synth::quant_mix_name(mix), synth::quant_mix_file_type(mix),
                        synth::quant_mix_summary(mix));
  }
  text +=
      "  Norms, 1-D tensors, the router and ssm_conv1d stay F32 in every mix. A row length that is not a\n"
      "  multiple of the type's block falls back like llama-quantize: Q4_K/IQ4_XS -> Q4_0, Q5_K/Q6_K -> Q8_0,\n"
      "  then F16.\n"
      "\nnotes:\n"
      "  --layers N keeps the preset's layer pattern from layer 0; for qwen35moe presets every 4th layer is\n"
      "  full attention, so use a multiple of 4 to keep attention layers (any N >= 1 is accepted).\n"
      "  --vocab copies every tokenizer.* key of that GGUF and sets n_vocab to its token count (token_embd\n"
      "  and output get that many rows; a note is printed when it differs from the preset). Without it a\n"
      "  byte-level BPE vocabulary of the preset's size is generated (256 byte tokens, merges, then\n"
      "  <|endoftext|> (bos) <|im_start|> <|im_end|> (eos) <think> </think>).\n"
      "  --experts, --n-vocab and --attention-every make small files that keep every other dimension of\n"
      "  the preset (tests use a 2-layer 35B-shape file with 16 experts and an attention layer).\n"
      "  The qwen3.6-35b-a3b preset writes one MTP block after the last layer (blk.<n_layer>.nextn.*), as\n"
      "  the real files do (--spec-type draft-mtp runs it); --mtp-layers 0 leaves it out.\n"
      "  The same --seed always gives the same bytes, whatever -t.\n"
      "\nrouting:\n"
      "  Random weights route every token to experts independently of the previous ones: the worst case for\n"
      "  an expert cache. --routing locality writes weights (qwen35moe presets) whose routers read a state\n"
      "  the DeltaNet layers carry across tokens (moving averages over 2..--locality-memory tokens), so\n"
      "  consecutive tokens share experts as in trained models. Measured on the 35B shape with random\n"
      "  tokens: median reuse distance 2 tokens, 70% of selections recur within 8, an LRU cache holding 40%\n"
      "  of a layer's experts hits 86% (uniform: 21 tokens, 25%, 43%; docs/benchmarking.md). It is a\n"
      "  property of the file, so any engine routes it the same way, for random token ids (bench) and for\n"
      "  generated text alike. Only real files say how a real model routes: use this to compare cache\n"
      "  policies, not to predict a real model's hit rate. The parameters are recorded in the file\n"
      "  (moetier.synth.* keys).\n"
      "\nexamples:\n"
      "  moetier synth --preset tiny -o tiny.gguf\n"
      "  moetier synth --preset qwen3.6-35b-a3b --layers 8 --quant ud-q4_k_xl -o q36-8l.gguf\n"
      "  moetier synth --preset qwen3.6-35b-a3b --layers 2 --attention-every 2 --experts 16 --n-vocab 4096 -o t.gguf\n"
      "  moetier synth --preset qwen3.6-35b-a3b --layers 8 --quant ud-q4_k_xl --routing locality -o q36-8l-loc.gguf\n";
  return text;
}

}  // namespace

int cmd_synth(int argc, char** argv) {
  synth::SynthOptions options;
  std::string quant;
  int64_t seed = 0;
  int64_t n_layer = 0;
  bool quiet = false;
  ArgParser p("synth", "Write a random-weight GGUF model with the exact tensor shapes of a real one.");
  p.option({"--preset"}, "NAME", "model shape (see the list below)", &options.preset);
  p.option({"--layers"}, "N", "number of layers (default: the preset's); keeps the layer pattern", &n_layer);
  p.option({"--quant"}, "MIX", "tensor types: f32, f16, q8_0, q4_k_m, ud-q4_k_xl, iq4_xs", &quant);
  p.option({"--seed"}, "S", "random seed (default 0)", &seed);
  p.option({"--vocab"}, "VOCAB.gguf", "copy the tokenizer from this GGUF (sets n_vocab)", &options.vocab_path);
  p.option({"--n-vocab"}, "N", "synthetic vocabulary of N tokens instead of the preset's (smaller test files)",
           &options.n_vocab);
  p.option({"--experts"}, "N", "N routed experts per layer instead of the preset's (smaller test files)",
           &options.n_expert);
  p.option({"--attention-every"}, "N", "qwen35moe: every Nth layer is full attention (preset: 4)",
           &options.full_attention_interval);
  p.option({"--mtp-layers"}, "N", "qwen35moe: trailing MTP (nextn) blocks, 0 or 1 (preset: 1 for qwen3.6-35b-a3b, else 0)",
           &options.n_layer_mtp);
  p.flag({"--mtp-only"}, &options.mtp_only,
         "write only the MTP draft (token_embd, output_norm, output, the MTP block), as llama.cpp's converter does "
         "with --mtp; use it with -md");
  std::string routing;
  p.option({"--routing"}, "MODE",
           "uniform (default: random routing, new experts every token) or locality (experts reused from token to "
           "token, like trained models; qwen35moe presets)",
           &routing);
  p.option({"--locality-state"}, "F", "locality: router logit std from the state carried across tokens (default 1.4)",
           &options.locality.state);
  p.option({"--locality-token"}, "F", "locality: router logit std from the current token alone (default 0.35)",
           &options.locality.token);
  p.option({"--locality-skew"}, "F", "locality: std of a fixed per-expert logit offset, the popularity skew (default 0.1)",
           &options.locality.skew);
  p.option({"--locality-memory"}, "N", "locality: longest time scale of the state in tokens, 2..2000 (default 100)",
           &options.locality.memory);
  p.option({"-o", "--output"}, "OUT.gguf", "output file", &options.out_path);
  p.option({"-t", "--threads"}, "N", "threads (default: all cores)", &options.n_threads);
  p.flag({"-q", "--quiet"}, &quiet, "no progress bar");
  p.epilog(synth_epilog());
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (options.preset.empty()) return report_error(Status::bad_input("missing --preset NAME (see 'moetier synth --help')"));
  if (options.out_path.empty()) return report_error(Status::bad_input("missing -o OUT.gguf (see 'moetier synth --help')"));
  if (p.given("--layers") && n_layer < 1) {
    return report_error(Status::bad_input(fmt::format("--layers must be at least 1, got {}", n_layer)));
  }
  if (p.given("--mtp-layers") && options.n_layer_mtp < 0) {
    return report_error(Status::bad_input(fmt::format("--mtp-layers must be 0 or 1, got {}", options.n_layer_mtp)));
  }
  if (seed < 0) return report_error(Status::bad_input(fmt::format("--seed must be >= 0, got {}", seed)));
  if (options.n_threads < 0) {
    return report_error(Status::bad_input(fmt::format("-t must be >= 1, got {}", options.n_threads)));
  }
  options.n_layer = n_layer;
  options.seed = static_cast<uint64_t>(seed);
  options.progress = !quiet;
  if (!quant.empty()) {
    auto mix = synth::parse_quant_mix(quant);
    if (!mix) return report_error(mix.status());
    options.mix = *mix;
  }

  if (routing == "locality") {
    options.routing = synth::SynthOptions::Routing::kLocality;
  } else if (!routing.empty() && routing != "uniform") {
    return report_error(Status::bad_input(fmt::format("--routing must be uniform or locality, got '{}'", routing)));
  }
  for (const char* flag : {"--locality-state", "--locality-token", "--locality-skew", "--locality-memory"}) {
    if (p.given(flag) && options.routing != synth::SynthOptions::Routing::kLocality) {
      return report_error(Status::bad_input(fmt::format("{} needs --routing locality", flag)));
    }
  }

  auto plan = synth::plan_synth(options);
  if (!plan) return report_error(plan.status());
  for (const auto& note : plan->notes) std::fprintf(stderr, "moetier: note: %s\n", note.c_str());
  std::fprintf(stderr, "synth: %s, %lld layers, %s, seed %llu, %zu tensors -> %s\n", options.preset.c_str(),
               static_cast<long long>(plan->hparams.n_layer), std::string(synth::quant_mix_name(plan->mix)).c_str(),
               static_cast<unsigned long long>(options.seed), plan->tensors.size(), options.out_path.c_str());

  auto summary = synth::write_synth(*plan, options);
  if (!summary) return report_error(summary.status());
  std::printf("wrote %s: %s (%llu bytes), %zu tensors, %.1f s\n", options.out_path.c_str(),
              format_bytes(summary->file_bytes).c_str(), static_cast<unsigned long long>(summary->file_bytes),
              summary->n_tensors, summary->seconds);
  return 0;
}

}  // namespace moetier
