// Memory plan on the Qwen3.6-35B-A3B shape, against figures computed by hand (no file).
//
// Shape (synth preset qwen3.6-35b-a3b): 40 blocks, every 4th full attention
// (10 attention, 30 Gated DeltaNet); n_embd 2048; 16 Q / 2 KV heads x 256; GDN 16 K /
// 32 V heads x 128, conv 4; 256 experts, 8 used, expert FFN 512, shared FFN 512;
// vocab 248,320.
//
// Tensor types: a UD-Q4_K_XL-like mix — routed gate/up Q4_K, routed down Q5_K, every other
// matrix Q8_0 except ssm_alpha/ssm_beta, conv and the router (F32), token_embd and output
// Q6_K, all 1-D tensors F32. Bytes per block: Q8_0 34 per 32, Q4_K 144 per 256, Q5_K 176
// per 256, Q6_K 210 per 256.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "engine/placement.h"
#include "engine/plan.h"
#include "model/arch.h"
#include "tensor/dtype.h"

namespace moetier {
namespace {

HParams qwen36_35b_shape() {
  HParams hp;
  hp.arch = "qwen35moe";
  hp.n_layer = 40;
  hp.n_embd = 2048;
  hp.n_vocab = 248320;
  hp.n_ctx_train = 262144;
  hp.n_head = 16;
  hp.n_head_kv = 2;
  hp.head_dim_k = 256;
  hp.head_dim_v = 256;
  hp.attn_output_gate = true;
  hp.n_rot = 64;
  hp.rope_base = 1e7f;
  hp.rope_sections = {11, 11, 10, 0};
  hp.n_expert = 256;
  hp.n_expert_used = 8;
  hp.n_expert_shared = 1;
  hp.n_ff_exp = 512;
  hp.n_ff_shexp = 512;
  hp.ssm_d_conv = 4;
  hp.ssm_d_state = 128;
  hp.ssm_n_group = 16;
  hp.ssm_dt_rank = 32;
  hp.ssm_d_inner = 4096;
  hp.full_attention_interval = 4;
  for (int il = 0; il < 40; ++il) {
    hp.layer_kinds.push_back((il + 1) % 4 == 0 ? LayerKind::kAttention : LayerKind::kDeltaNet);
  }
  return hp;
}

DType ud_mix_type(const TensorSpec& s) {
  if (s.ne.size() == 1) return DType::F32;
  switch (s.role) {
    case TensorRole::kExpertGate:
    case TensorRole::kExpertUp: return DType::Q4_K;
    case TensorRole::kExpertDown: return DType::Q5_K;
    case TensorRole::kTokenEmbedding:
    case TensorRole::kOutput: return DType::Q6_K;
    case TensorRole::kRouter: return DType::F32;
    default: break;
  }
  if (s.name.find("ssm_alpha") != std::string::npos || s.name.find("ssm_beta") != std::string::npos ||
      s.name.find("ssm_conv1d") != std::string::npos) {
    return DType::F32;
  }
  return DType::Q8_0;
}

std::vector<PlanTensor> ud_mix_tensors(const HParams& hp) {
  std::vector<PlanTensor> out;
  for (const TensorSpec& s : find_arch("qwen35moe")->tensor_specs(hp)) {
    int64_t rows = 1;
    for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
    out.push_back({.name = s.name, .role = s.role, .layer = s.layer,
                   .bytes = dtype_row_bytes(ud_mix_type(s), s.ne[0]) * rows});
  }
  return out;
}

// --- hand-computed figures -----------------------------------------------------------

// Routed experts of one block:
//   ffn_gate_exps {2048, 512, 256} Q4_K: 512*256 rows * (2048/256 * 144 B) = 131072 * 1152 = 150,994,944
//   ffn_up_exps   same                                                                    = 150,994,944
//   ffn_down_exps {512, 2048, 256} Q5_K: 2048*256 rows * (512/256 * 176 B) = 524288 * 352  = 184,549,376
//   sum = 486,539,264 B per block; x 40 blocks = 19,461,570,560 B.
constexpr int64_t kExpertBytesPerLayer = 486539264;
constexpr int64_t kExpertBytesTotal = 40 * kExpertBytesPerLayer;

// Dense weights of one DeltaNet block (Q8_0 = 1.0625 B/element):
//   attn_norm + post_attention_norm   2 * 2048 * 4            =     16,384
//   attn_qkv   {2048, 8192} Q8_0      16,777,216 * 1.0625     = 17,825,792
//   attn_gate  {2048, 4096} Q8_0       8,388,608 * 1.0625     =  8,912,896
//   ssm_conv1d {4, 8192} F32          32,768 * 4              =    131,072
//   ssm_dt.bias, ssm_a {32} F32       2 * 128                 =        256
//   ssm_beta, ssm_alpha {2048, 32} F32  2 * 65,536 * 4        =    524,288
//   ssm_norm {128} F32                                        =        512
//   ssm_out {4096, 2048} Q8_0                                 =  8,912,896
//   ffn_gate_inp {2048, 256} F32      524,288 * 4             =  2,097,152
//   ffn_gate_inp_shexp {2048} F32                             =      8,192
//   shared gate/up/down {2048x512} Q8_0  3 * 1,114,112        =  3,342,336
//   sum                                                       = 41,771,776
constexpr int64_t kDeltaNetDenseBytes = 41771776;
// Dense weights of one attention block:
//   norms 16,384; attn_q {2048, 8192} 17,825,792; attn_k, attn_v {2048, 512} 2 * 1,114,112;
//   attn_output {4096, 2048} 8,912,896; q/k norms {256} F32 2,048; router 2,097,152;
//   shared gate 8,192; shared expert 3,342,336               sum = 34,433,024
constexpr int64_t kAttentionDenseBytes = 34433024;
// 30 * 41,771,776 + 10 * 34,433,024 = 1,253,153,280 + 344,330,240 = 1,597,483,520
constexpr int64_t kDenseBytes = 1597483520;
// token_embd / output {2048, 248320} Q6_K: 248,320 rows * (8 * 210 B) = 417,177,600 each.
constexpr int64_t kEmbeddingBytes = 417177600;
constexpr int64_t kOutputNormBytes = 2048 * 4;

// KV cache, f16 K and V, 65,536 cells, attention blocks only:
//   per block 65,536 * 2 KV heads * (256 * 2 B + 256 * 2 B) = 65,536 * 2 * 1,024 = 134,217,728
//   x 10 blocks = 1,342,177,280 B (1.25 GiB)
constexpr int64_t kKvF16PerLayer = 134217728;
constexpr int64_t kKvF16 = 1342177280;

// Recurrent state per sequence and DeltaNet block, f32:
//   conv: (4 - 1) * (2 * 16*128 + 4096) = 3 * 8,192 = 24,576 floats =    98,304 B
//   ssm:  32 V heads * 128 * 128        = 524,288 floats           = 2,097,152 B
//   2,195,456 B per block; x 30 blocks = 65,863,680 B per sequence.
constexpr int64_t kStatePerSeq = 65863680;

// Scratch (plan.cpp's estimate), ubatch 512, per token in f32:
//   3 * 2048 + max(attention 2*16*256 + 2*2*256 + 16*256 = 13,312,
//                  DeltaNet 2*(2*2048 + 4096) + 2*4096 + 2*32 = 24,640,
//                  MoE 256 + 8*(3*512 + 2048) + 3*512 = 30,464) = 36,608 floats
//   without the output layer: 512 * 36,608 * 4 = 74,973,184 B
//   with it (+ 248,320 logits): 512 * 284,928 * 4 = 583,532,544 B
constexpr int64_t kScratchBlocks = 74973184;
constexpr int64_t kScratchWithOutput = 583532544;

constexpr int64_t kMiB = 1 << 20;

class PlanQwen36 : public ::testing::Test {
 protected:
  HParams hp = qwen36_35b_shape();
  const ArchInfo& arch = *find_arch("qwen35moe");
  std::vector<PlanTensor> tensors = ud_mix_tensors(hp);

  Plan plan(const PlanParams& p) {
    auto r = make_plan(hp, arch, tensors, p);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? std::move(r).value() : Plan{};
  }
};

TEST_F(PlanQwen36, SyntheticTensorListHasTheHandComputedSizes) {
  int64_t experts = 0, dense = 0, global = 0;
  for (const auto& t : tensors) {
    if (t.layer < 0) {
      global += t.bytes;
    } else if (is_routed_expert(t.role)) {
      experts += t.bytes;
    } else {
      dense += t.bytes;
    }
  }
  EXPECT_EQ(experts, kExpertBytesTotal);
  EXPECT_EQ(dense, kDenseBytes);
  EXPECT_EQ(dense, 30 * kDeltaNetDenseBytes + 10 * kAttentionDenseBytes);
  EXPECT_EQ(global, 2 * kEmbeddingBytes + kOutputNormBytes);
}

TEST_F(PlanQwen36, KvCacheAndStateSizes) {
  const Plan p = plan({.n_ctx = 65536});
  EXPECT_EQ(p.kv_bytes_per_layer, kKvF16PerLayer);
  EXPECT_EQ(p.kv_bytes, kKvF16);
  EXPECT_EQ(p.state_bytes_per_seq, kStatePerSeq);
  EXPECT_EQ(p.state_bytes, kStatePerSeq);
  EXPECT_EQ(arch.recurrent_state_bytes(hp, LayerKind::kDeltaNet), 2195456);
  for (const auto& l : p.layers) {
    EXPECT_EQ(l.kv_bytes, l.kind == LayerKind::kAttention ? kKvF16PerLayer : 0) << l.layer;
    EXPECT_EQ(l.state_bytes, l.kind == LayerKind::kDeltaNet ? 2195456 : 0) << l.layer;
  }

  // Quantized KV by whole blocks: a 256-wide head row is 8 blocks.
  //   q8_0: 8 * 34 = 272 B per row -> 65,536 * 2 * (272 + 272) * 10 = 713,031,680
  //   q4_0: 8 * 18 = 144 B per row -> 65,536 * 2 * (144 + 144) * 10 = 377,487,360
  //   f32:  1,024 B per row        -> 2 * 1,342,177,280           = 2,684,354,560
  //   k f16 (512 B) + v q8_0 (272 B) -> 65,536 * 2 * 784 * 10      = 1,027,604,480
  // The model's whole context, 262,144 tokens: 4 × the 65,536-token figures (5 GiB of f16 KV
  // for the 10 attention layers; the DeltaNet state does not grow with the context).
  const Plan full = plan({.n_ctx = 262144});
  EXPECT_EQ(full.kv_bytes, 4 * kKvF16);
  EXPECT_EQ(full.kv_bytes, int64_t{5} << 30);
  EXPECT_EQ(full.state_bytes, kStatePerSeq);
  EXPECT_EQ(plan({.n_ctx = 65536, .type_k = DType::Q8_0, .type_v = DType::Q8_0}).kv_bytes, 713031680);
  EXPECT_EQ(plan({.n_ctx = 65536, .type_k = DType::Q4_0, .type_v = DType::Q4_0}).kv_bytes, 377487360);
  EXPECT_EQ(plan({.n_ctx = 65536, .type_k = DType::F32, .type_v = DType::F32}).kv_bytes, 2684354560);
  EXPECT_EQ(plan({.n_ctx = 65536, .type_k = DType::F16, .type_v = DType::Q8_0}).kv_bytes, 1027604480);

  // -np 4: four state copies; the KV cache is the same n_ctx cells in total.
  const Plan p4 = plan({.n_ctx = 65536, .n_seq = 4});
  EXPECT_EQ(p4.state_bytes, 4 * kStatePerSeq);  // 263,454,720
  EXPECT_EQ(p4.kv_bytes, kKvF16);

  // Speculative decoding with --spec-draft-n-max 3: each sequence's rollback journal covers
  // 4 positions, on the layers' device. On a GPU (the default -ngl, or 99), where an 8 GB
  // card feels them, 4 more copies of the state. On the CPU (-ngl 0), per DeltaNet layer:
  // the conv state per position (4 × 98,304 B), one more SSM state (2,097,152 B) and two
  // buffers of 8 + 4 per-token records of 32 heads × (128 + 128 + 1) floats (789,504 B):
  // 3,279,872 B.
  const Plan spec = plan({.n_ctx = 65536, .n_seq = 2, .journal_tokens = 4});
  EXPECT_EQ(spec.state_bytes, 2 * 5 * kStatePerSeq);
  const Plan spec_cpu = plan({.n_ctx = 65536, .n_seq = 2, .journal_tokens = 4, .n_gpu_layers = 0});
  EXPECT_EQ(spec_cpu.state_bytes, 2 * (kStatePerSeq + 30 * 3279872));
  const Plan spec_gpu = plan({.n_ctx = 65536, .journal_tokens = 4, .n_gpu_layers = 99, .cpu_moe = true});
  ASSERT_NE(spec_gpu.device(kGpuDevice), nullptr);
  EXPECT_EQ(spec_gpu.device(kGpuDevice)->state_bytes, 5 * kStatePerSeq);
  EXPECT_FALSE(make_plan(hp, arch, tensors, {.journal_tokens = -1}).is_ok());
}

TEST_F(PlanQwen36, MtpBlockIsPlacedLikeABlockWithItsKvCacheOnlyWhenDrafting) {
  HParams with_mtp = hp;
  with_mtp.n_layer_mtp = 1;
  const std::vector<PlanTensor> t = ud_mix_tensors(with_mtp);
  auto off = make_plan(with_mtp, arch, t, {.n_ctx = 65536, .n_gpu_layers = 99});
  auto on = make_plan(with_mtp, arch, t, {.n_ctx = 65536, .mtp = true, .n_gpu_layers = 99});
  ASSERT_TRUE(off.is_ok() && on.is_ok());
  const LayerPlan& mtp_off = off->layers.back();
  const LayerPlan& mtp_on = on->layers.back();
  EXPECT_TRUE(mtp_off.mtp && mtp_on.mtp);
  EXPECT_EQ(mtp_off.dense, kCpuDevice);  // not drafting: not run, nothing uploaded
  EXPECT_EQ(mtp_on.dense, kGpuDevice);   // -ngl 99 counts the MTP block, as in llama.cpp
  EXPECT_EQ(mtp_on.experts, kGpuDevice);
  auto cmoe = make_plan(with_mtp, arch, t, {.n_ctx = 65536, .mtp = true, .n_gpu_layers = 99, .cpu_moe = true});
  ASSERT_TRUE(cmoe.is_ok());
  EXPECT_EQ(cmoe->layers.back().dense, kGpuDevice);
  EXPECT_EQ(cmoe->layers.back().experts, kCpuDevice);  // -cmoe: its experts stay on the CPU too
  EXPECT_EQ(cmoe->device(kGpuDevice)->kv_bytes, on->device(kGpuDevice)->kv_bytes);
  EXPECT_EQ(mtp_off.kv_bytes, 0);
  EXPECT_EQ(mtp_on.kv_bytes, kKvF16PerLayer);
  EXPECT_EQ(on->kv_bytes, off->kv_bytes + kKvF16PerLayer);
}

TEST_F(PlanQwen36, AllLayersOnGpuWithAllExpertsOnCpu) {
  // -ngl 99 -ncmoe 40 and -ngl all --cpu-moe give the same plan.
  for (const PlanParams& params : {PlanParams{.n_ctx = 65536, .n_gpu_layers = 99, .n_cpu_moe = 40},
                                   PlanParams{.n_ctx = 65536, .n_gpu_layers = -1, .cpu_moe = true}}) {
    const Plan p = plan(params);
    ASSERT_EQ(p.devices.size(), 2u);
    const DevicePlan& cpu = *p.device(kCpuDevice);
    const DevicePlan& gpu = *p.device(kGpuDevice);
    // CPU: every routed expert + token_embd (llama.cpp never offloads the input layer).
    EXPECT_EQ(cpu.weight_bytes, kExpertBytesTotal + kEmbeddingBytes);  // 19,878,748,160
    EXPECT_EQ(cpu.kv_bytes, 0);
    EXPECT_EQ(cpu.state_bytes, 0);
    EXPECT_EQ(cpu.scratch_bytes, kScratchBlocks);
    // GPU: all dense block weights + output + output_norm, the KV cache and the state.
    EXPECT_EQ(gpu.weight_bytes, kDenseBytes + kEmbeddingBytes + kOutputNormBytes);  // 2,014,669,312
    EXPECT_EQ(gpu.kv_bytes, kKvF16);
    EXPECT_EQ(gpu.state_bytes, kStatePerSeq);
    EXPECT_EQ(gpu.scratch_bytes, kScratchWithOutput);
    for (const auto& l : p.layers) {
      EXPECT_EQ(l.dense, kGpuDevice) << l.layer;
      EXPECT_EQ(l.experts, kCpuDevice) << l.layer;
      EXPECT_EQ(l.expert_bytes, kExpertBytesPerLayer);
    }
    EXPECT_EQ(p.output_device, kGpuDevice);
    EXPECT_FALSE(p.fits.has_value());  // no --vram-budget: not judged
    for (size_t i = 0; i < tensors.size(); ++i) {
      const std::string want = is_routed_expert(tensors[i].role) || tensors[i].role == TensorRole::kTokenEmbedding
                                   ? kCpuDevice
                                   : kGpuDevice;
      EXPECT_EQ(p.tensor_devices[i], want) << tensors[i].name;
    }
  }
}

TEST_F(PlanQwen36, SixGigabyteBudgetFitsDenseOnGpuExpertsOnCpu) {
  // The users' setup: 6 GiB GPU, 65,536 context, -ngl all -cmoe.
  //   GPU total = 2,014,669,312 weights + 1,342,177,280 KV + 65,863,680 state
  //             + 583,532,544 scratch = 4,006,242,816 B
  //   free      = 6,442,450,944 - 4,006,242,816 = 2,436,208,128 B (~2323 MiB)
  const Plan p = plan({.n_ctx = 65536, .cpu_moe = true, .vram_budget_bytes = 6144 * kMiB});
  EXPECT_EQ(p.device(kGpuDevice)->total_bytes(), 4006242816);
  ASSERT_TRUE(p.fits.has_value());
  EXPECT_TRUE(*p.fits);
  EXPECT_EQ(*p.gpu_free_bytes, 2436208128);

  // Everything on the GPU does not fit: +19.5 GB of experts.
  const Plan all = plan({.n_ctx = 65536, .vram_budget_bytes = 6144 * kMiB});
  EXPECT_EQ(all.device(kGpuDevice)->weight_bytes, kDenseBytes + kEmbeddingBytes + kOutputNormBytes + kExpertBytesTotal);
  EXPECT_FALSE(*all.fits);
  EXPECT_EQ(*all.gpu_free_bytes, 2436208128 - kExpertBytesTotal);
  EXPECT_LT(*all.gpu_free_bytes, 0);
}

TEST_F(PlanQwen36, NCpuMoeKeepsOnlyTheFirstLayersExpertsOnCpu) {
  const Plan p = plan({.n_ctx = 65536, .n_gpu_layers = 99, .n_cpu_moe = 2});
  for (const auto& l : p.layers) {
    EXPECT_EQ(l.dense, kGpuDevice);
    EXPECT_EQ(l.experts, l.layer < 2 ? kCpuDevice : kGpuDevice) << l.layer;
  }
  EXPECT_EQ(p.device(kCpuDevice)->weight_bytes, 2 * kExpertBytesPerLayer + kEmbeddingBytes);
  EXPECT_EQ(p.device(kGpuDevice)->weight_bytes,
            kDenseBytes + kEmbeddingBytes + kOutputNormBytes + 38 * kExpertBytesPerLayer);
}

TEST_F(PlanQwen36, NglCountsTheOutputLayerFirst) {
  // llama.cpp: -ngl N offloads the last N of the 41 layers (40 blocks + output).
  // -ngl 1: only the output layer.
  Plan p = plan({.n_ctx = 65536, .n_gpu_layers = 1});
  EXPECT_EQ(p.output_device, kGpuDevice);
  for (const auto& l : p.layers) EXPECT_EQ(l.dense, kCpuDevice) << l.layer;
  EXPECT_EQ(p.device(kGpuDevice)->weight_bytes, kEmbeddingBytes + kOutputNormBytes);
  EXPECT_EQ(p.device(kGpuDevice)->kv_bytes, 0);
  EXPECT_EQ(p.device(kCpuDevice)->kv_bytes, kKvF16);

  // -ngl 10: output + blocks 31..39 (9 blocks: 3 attention (31, 35, 39), 6 DeltaNet).
  p = plan({.n_ctx = 65536, .n_gpu_layers = 10, .cpu_moe = true});
  for (const auto& l : p.layers) EXPECT_EQ(l.dense, l.layer >= 31 ? kGpuDevice : kCpuDevice) << l.layer;
  EXPECT_EQ(p.device(kGpuDevice)->weight_bytes,
            6 * kDeltaNetDenseBytes + 3 * kAttentionDenseBytes + kEmbeddingBytes + kOutputNormBytes);
  EXPECT_EQ(p.device(kGpuDevice)->kv_bytes, 3 * kKvF16PerLayer);
  EXPECT_EQ(p.device(kGpuDevice)->state_bytes, 6 * 2195456);

  // -ngl 41 is the whole model, like -ngl 99 and -1.
  p = plan({.n_ctx = 65536, .n_gpu_layers = 41});
  EXPECT_EQ(p.device(kCpuDevice)->weight_bytes, kEmbeddingBytes);
  // -ngl 40: block 0 stays on the CPU.
  p = plan({.n_ctx = 65536, .n_gpu_layers = 40});
  EXPECT_EQ(p.layers[0].dense, kCpuDevice);
  EXPECT_EQ(p.layers[1].dense, kGpuDevice);
}

TEST_F(PlanQwen36, CpuOnly) {
  const Plan p = plan({.n_ctx = 4096, .n_gpu_layers = 0, .ram_budget_bytes = 16384 * kMiB});
  ASSERT_EQ(p.devices.size(), 1u);
  const DevicePlan& cpu = p.devices[0];
  EXPECT_EQ(cpu.weight_bytes, kDenseBytes + kExpertBytesTotal + 2 * kEmbeddingBytes + kOutputNormBytes);
  EXPECT_EQ(cpu.weight_bytes, 21893417472);
  // 4,096 cells: 4,096 * 2 * 1,024 * 10 = 83,886,080
  EXPECT_EQ(cpu.kv_bytes, 83886080);
  EXPECT_EQ(cpu.scratch_bytes, kScratchWithOutput);
  EXPECT_FALSE(p.fits.has_value());
  ASSERT_TRUE(p.fits_ram.has_value());
  EXPECT_FALSE(*p.fits_ram);  // 21.9 GB of weights do not fit 16 GiB
  // So the routed experts go in tiers: the same share of all 40 layers in RAM, the rest read
  // from the file (engine/expert_tiers.h): 16 GiB less the dense weights, KV cache and
  // scratch, over the experts' bytes.
  ASSERT_TRUE(p.expert_tiers.has_value());
  const ExpertTiers& t = *p.expert_tiers;
  EXPECT_TRUE(t.stream);
  EXPECT_TRUE(t.error.is_ok()) << t.error.message();
  EXPECT_EQ(t.expert_bytes, kExpertBytesTotal);
  ASSERT_EQ(t.capacity.size(), 40u);
  const int64_t for_experts = 16384 * kMiB - (cpu.weight_bytes - kExpertBytesTotal) - cpu.kv_bytes - cpu.state_bytes -
                              cpu.scratch_bytes;
  const int per_layer = static_cast<int>(256 * for_experts / kExpertBytesTotal);
  for (int c : t.capacity) EXPECT_EQ(c, per_layer);
  EXPECT_GT(per_layer, 150);  // ~70% of each layer on a 16 GiB budget
  EXPECT_LT(per_layer, 256);
}

TEST_F(PlanQwen36, BadParametersAreBadInput) {
  for (const PlanParams& bad : {PlanParams{.n_ctx = 0}, PlanParams{.n_seq = 0}, PlanParams{.n_gpu_layers = -2},
                                PlanParams{.n_cpu_moe = -1}, PlanParams{.vram_budget_bytes = -1}}) {
    auto r = make_plan(hp, arch, tensors, bad);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  }
  // A KV type whose block does not divide the head width.
  HParams odd = hp;
  odd.head_dim_k = odd.head_dim_v = 80;  // not a multiple of 32
  auto r = make_plan(odd, arch, tensors, {.type_k = DType::Q8_0});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("-ctk"), std::string::npos) << r.status().message();
}

// --fit on the Qwen3.6-35B-A3B shape (header only), 65,536 context, the users' cards.
// GPU part of -ngl all -cmoe (SixGigabyteBudgetFitsDenseOnGpuExpertsOnCpu): 4,006,242,816 B;
// each block's routed experts add kExpertBytesPerLayer = 486,539,264 B (464 MiB).
constexpr int64_t kDenseGpuTotal = 4006242816;

// Every block's experts on the CPU up to `n_cpu_moe`, on the GPU from there on.
void expect_experts_from(const Plan& p, int64_t n_cpu_moe, const std::string& what) {
  for (const auto& l : p.layers) {
    EXPECT_EQ(l.dense, kGpuDevice) << what << ", layer " << l.layer;
    EXPECT_EQ(l.experts, l.layer < n_cpu_moe ? kCpuDevice : kGpuDevice) << what << ", layer " << l.layer;
  }
}

TEST_F(PlanQwen36, FitPutsTheLastLayersExpertsOnTheGpuWhileTheyFit) {
  constexpr int64_t kMargin = 1536 * kMiB;
  // 8 GiB: budget 8192 - 1536 = 6656 MiB = 6,979,321,856 B; after the dense part
  // 2,973,079,040 B are left = 6.11 blocks' experts: 6 blocks (34-39), -ncmoe 34 (a user's
  // best measured setting on 8 GB), 2,973,079,040 - 6 * 486,539,264 = 53,843,456 B left.
  // 6 GiB: budget 4608 MiB = 4,831,838,208 B; 825,595,392 B left = 1.7 blocks: 1 block (39),
  // -ncmoe 39, 825,595,392 - 486,539,264 = 339,056,128 B left.
  struct Case {
    int64_t vram_mib, n_cpu_moe, free_bytes;
  };
  for (const Case c : {Case{8192, 34, 53843456}, Case{6144, 39, 339056128}}) {
    const std::string what = fmt::format("{} MiB", c.vram_mib);
    auto r = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, c.vram_mib * kMiB, kMargin);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const Plan& p = r->plan;
    expect_experts_from(p, c.n_cpu_moe, what);
    EXPECT_EQ(p.output_device, kGpuDevice);
    ASSERT_TRUE(p.fits.has_value());
    EXPECT_TRUE(*p.fits);
    // The budget is the card minus the margin; what is left of it is said, and is less than
    // one more block's experts.
    EXPECT_EQ(p.device(kGpuDevice)->budget_bytes, c.vram_mib * kMiB - kMargin);
    EXPECT_EQ(p.device(kGpuDevice)->total_bytes(), kDenseGpuTotal + (40 - c.n_cpu_moe) * kExpertBytesPerLayer);
    EXPECT_EQ(*p.gpu_free_bytes, c.free_bytes);
    EXPECT_LT(*p.gpu_free_bytes, kExpertBytesPerLayer);
    // The choice as flags: -ngl counts the 40 blocks and the output layer.
    EXPECT_EQ(r->n_gpu_layers, 41);
    EXPECT_EQ(r->n_cpu_moe, c.n_cpu_moe);
    EXPECT_EQ(r->expert_layers_on_gpu, 40 - c.n_cpu_moe);
    EXPECT_EQ(r->flags, fmt::format("-ngl 41 -ncmoe {}", c.n_cpu_moe));
    EXPECT_EQ(r->params.n_gpu_layers, -1);
    EXPECT_EQ(r->params.n_cpu_moe, c.n_cpu_moe);
    EXPECT_FALSE(r->params.cpu_moe);
    EXPECT_NE(r->choice.find(r->flags), std::string::npos) << r->choice;
    EXPECT_NE(r->choice.find("left of the " + std::to_string(c.vram_mib - 1536) + " MiB budget after the 1536 MiB margin"),
              std::string::npos)
        << r->choice;
  }
  auto eight = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, 8192 * kMiB, kMargin);
  ASSERT_TRUE(eight.is_ok());
  // 6 x 464 MiB = 2784 MiB of experts; 53,843,456 B = 51 MiB left.
  EXPECT_NE(eight->choice.find("6 layers' experts (2784 MiB, blocks 34-39); 51 MiB left"), std::string::npos)
      << eight->choice;
}

TEST_F(PlanQwen36, ExplicitPlacementSuggestsTheNCpuMoeThatKeepsTheMargin) {
  // -ngl all -ncmoe 30 on an 8 GiB card (6656 MiB after the margin): -ncmoe 34 is the first
  // that fits, as --fit chooses from scratch.
  const int64_t limit = (8192 - 1536) * kMiB;
  auto fit = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, 8192 * kMiB, 1536 * kMiB);
  ASSERT_TRUE(fit.is_ok());
  EXPECT_EQ(n_cpu_moe_within(hp, arch, tensors, {.n_ctx = 65536, .n_gpu_layers = -1, .n_cpu_moe = 30}, limit),
            fit->n_cpu_moe);
  EXPECT_EQ(fit->n_cpu_moe, 34);
  // Its plan fits, one fewer does not.
  EXPECT_LE(plan({.n_ctx = 65536, .n_gpu_layers = -1, .n_cpu_moe = 34}).device(kGpuDevice)->total_bytes(), limit);
  EXPECT_GT(plan({.n_ctx = 65536, .n_gpu_layers = -1, .n_cpu_moe = 33}).device(kGpuDevice)->total_bytes(), limit);
  // Not a layout -ncmoe shrinks: partial -ngl, -cmoe, -ot; nothing fits at all.
  EXPECT_FALSE(n_cpu_moe_within(hp, arch, tensors, {.n_ctx = 65536, .n_gpu_layers = 20}, limit));
  EXPECT_FALSE(n_cpu_moe_within(hp, arch, tensors, {.n_ctx = 65536, .n_gpu_layers = -1, .cpu_moe = true}, limit));
  EXPECT_FALSE(n_cpu_moe_within(hp, arch, tensors,
                                {.n_ctx = 65536, .n_gpu_layers = -1, .override_tensor = {"exps=CPU"}}, limit));
  EXPECT_FALSE(n_cpu_moe_within(hp, arch, tensors, {.n_ctx = 65536, .n_gpu_layers = -1}, 512 * kMiB));
}

TEST(VramHeadroom, WarnsWhenAnExplicitPlacementLeavesLessThanTheMargin) {
  const int64_t margin = 1536 * kMiB;
  // Enough left: no warning; unknown free memory: none either.
  EXPECT_EQ(vram_headroom_warning({.gpu_bytes = 6000 * kMiB, .free_bytes = 7600 * kMiB, .margin_bytes = margin}), "");
  EXPECT_EQ(vram_headroom_warning({.gpu_bytes = 6064 * kMiB, .free_bytes = 7600 * kMiB, .margin_bytes = margin}), "");
  EXPECT_EQ(vram_headroom_warning({.gpu_bytes = 9000 * kMiB, .free_bytes = 0, .margin_bytes = margin}), "");
  // 740 MiB left, with the -ncmoe that keeps the margin.
  EXPECT_EQ(vram_headroom_warning(
                {.gpu_bytes = 6860 * kMiB, .free_bytes = 7600 * kMiB, .margin_bytes = margin, .n_cpu_moe = 37}),
            "warning: this placement leaves 740 MiB of VRAM free; drivers that run out spill to system RAM and "
            "generation can drop several-fold; keep >= 1536 MiB free: -ncmoe 37 or --fit");
  // More than the GPU has; no -ncmoe to offer.
  EXPECT_EQ(vram_headroom_warning({.gpu_bytes = 8000 * kMiB, .free_bytes = 7600 * kMiB, .margin_bytes = margin}),
            "warning: this placement needs 8000 MiB of VRAM, 400 MiB more than the 7600 MiB free; drivers that run "
            "out spill to system RAM and generation can drop several-fold; keep >= 1536 MiB free: --fit");
  // --fit-margin 0: only running out warns.
  EXPECT_EQ(vram_headroom_warning({.gpu_bytes = 7600 * kMiB, .free_bytes = 7600 * kMiB, .margin_bytes = 0}), "");
}

TEST_F(PlanQwen36, FitKeepsEveryExpertOnTheCpuWhenNoBlocksExpertsFit) {
  // 5632 MiB: budget 4096 MiB = 4,294,967,296 B; 288,724,480 B left after the dense part,
  // less than one block's experts: the -cmoe choice.
  auto r = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, 5632 * kMiB, 1536 * kMiB);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  expect_experts_from(r->plan, 40, "5632 MiB");
  EXPECT_EQ(*r->plan.gpu_free_bytes, 288724480);
  EXPECT_TRUE(r->params.cpu_moe);
  EXPECT_EQ(r->n_cpu_moe, 40);
  EXPECT_EQ(r->expert_layers_on_gpu, 0);
  EXPECT_EQ(r->flags, "-ngl 41 -ncmoe 40");
  EXPECT_NE(r->choice.find("every routed expert on the CPU"), std::string::npos) << r->choice;
}

TEST_F(PlanQwen36, FitNeverExceedsTheBudgetAndItsFlagsReproduceThePlan) {
  // From below the dense part to more than everything, in 256 MiB steps: the GPU part stays
  // within free - margin, more memory never means fewer blocks' experts on the GPU, a
  // partial choice leaves less than one block's experts unused, and make_plan with the
  // printed -ngl/-ncmoe gives the same placement (what a tuner starts from).
  int64_t last_gpu_layers = -1;
  for (int64_t vram_mib = 2048; vram_mib <= 28 * 1024; vram_mib += 256) {
    const std::string what = fmt::format("{} MiB", vram_mib);
    auto r = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, vram_mib * kMiB, 1536 * kMiB);
    ASSERT_TRUE(r.is_ok()) << what << ": " << r.status().message();
    const DevicePlan* gpu = r->plan.device(kGpuDevice);
    if (gpu != nullptr) {
      EXPECT_LE(gpu->total_bytes(), (vram_mib - 1536) * kMiB) << what;
      if (r->expert_layers_on_gpu > 0 && r->expert_layers_on_gpu < 40) {
        EXPECT_LT(*r->plan.gpu_free_bytes, kExpertBytesPerLayer) << what;
      }
    }
    const int64_t gpu_layers = gpu == nullptr ? -1 : r->expert_layers_on_gpu;
    EXPECT_GE(gpu_layers, last_gpu_layers) << what;
    last_gpu_layers = gpu_layers;
    auto again = make_plan(hp, arch, tensors, {.n_ctx = 65536, .n_gpu_layers = r->n_gpu_layers, .n_cpu_moe = r->n_cpu_moe});
    ASSERT_TRUE(again.is_ok()) << what;
    EXPECT_EQ(again->tensor_devices, r->plan.tensor_devices) << what << " (" << r->flags << ")";
  }
  EXPECT_EQ(last_gpu_layers, 40);  // 28 GiB holds everything
}

TEST_F(PlanQwen36, FitCountsTheMtpBlockOnlyWhenItRuns) {
  HParams with_mtp = hp;
  with_mtp.n_layer_mtp = 1;
  const std::vector<PlanTensor> t = ud_mix_tensors(with_mtp);
  // Not drafting: the MTP block (41st) stays on the CPU whatever -ncmoe says; the same six
  // blocks' experts fit 8 GiB, spelled -ngl 42 -ncmoe 34.
  auto off = fit_plan(with_mtp, arch, t, {.n_ctx = 65536}, 8192 * kMiB, 1536 * kMiB);
  ASSERT_TRUE(off.is_ok()) << off.status().message();
  EXPECT_EQ(off->flags, "-ngl 42 -ncmoe 34");
  EXPECT_EQ(off->expert_layers_on_gpu, 6);
  EXPECT_EQ(off->plan.layers.back().experts, kCpuDevice);
  // draft-mtp: the MTP block's dense part and KV cache take GPU memory, and its experts are
  // the first to go to the GPU (the last block, as -ncmoe counts).
  auto on = fit_plan(with_mtp, arch, t, {.n_ctx = 65536, .mtp = true}, 8192 * kMiB, 1536 * kMiB);
  ASSERT_TRUE(on.is_ok()) << on.status().message();
  EXPECT_EQ(on->plan.layers.back().experts, kGpuDevice);
  EXPECT_LE(on->plan.device(kGpuDevice)->total_bytes(), (8192 - 1536) * kMiB);
  EXPECT_EQ(on->n_cpu_moe, 41 - on->expert_layers_on_gpu);
}

TEST_F(PlanQwen36, FitUsesTheWholeGpuWhenEverythingFitsAndTheCpuWhenNothingDoes) {
  // Everything: 21.9 GB of weights + KV + state + scratch fits 40 GiB.
  auto big = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, 40960 * kMiB, 1536 * kMiB);
  ASSERT_TRUE(big.is_ok());
  for (const auto& l : big->plan.layers) EXPECT_EQ(l.experts, kGpuDevice) << l.layer;
  EXPECT_NE(big->choice.find("everything on the GPU"), std::string::npos);
  EXPECT_EQ(big->n_cpu_moe, 0);
  EXPECT_EQ(big->expert_layers_on_gpu, 40);
  // 3 GiB minus the margin holds not even the 4 GB dense part: no partial offload (the users
  // found partial dense offload slower than none).
  auto small = fit_plan(hp, arch, tensors, {.n_ctx = 65536}, 3072 * kMiB, 1536 * kMiB);
  ASSERT_TRUE(small.is_ok());
  EXPECT_EQ(small->plan.device(kGpuDevice), nullptr);
  for (const auto& l : small->plan.layers) EXPECT_EQ(l.dense, kCpuDevice);
  EXPECT_EQ(small->params.n_gpu_layers, 0);
  EXPECT_EQ(small->n_gpu_layers, 0);
  EXPECT_EQ(small->flags, "-ngl 0");
  EXPECT_NE(small->choice.find("not even the dense part fits"), std::string::npos) << small->choice;
  EXPECT_FALSE(fit_plan(hp, arch, tensors, {.n_ctx = 65536}, 8192 * kMiB, -1).is_ok());
}

TEST_F(PlanQwen36, OverrideTensorRulesPlaceBlocksParts) {
  // -ot exps=CPU is -cmoe.
  const Plan a = plan({.n_ctx = 65536, .override_tensor = {"exps=CPU"}});
  const Plan b = plan({.n_ctx = 65536, .cpu_moe = true});
  EXPECT_EQ(a.device(kGpuDevice)->weight_bytes, b.device(kGpuDevice)->weight_bytes);
  for (const auto& l : a.layers) EXPECT_EQ(l.experts, kCpuDevice);
  // One dense tensor of block 5 on the CPU takes block 5's dense part (and its experts) there.
  const Plan c = plan({.n_ctx = 65536, .override_tensor = {"blk\\.5\\.attn_qkv=CPU"}});
  EXPECT_EQ(c.layers[5].dense, kCpuDevice);
  EXPECT_EQ(c.layers[5].experts, kCpuDevice);
  EXPECT_EQ(c.layers[4].dense, kGpuDevice);
  // Several rules in one flag, GPU device spellings; the first match wins.
  const Plan d = plan({.n_ctx = 65536, .n_gpu_layers = 0,
                       .override_tensor = {"blk\\.(0|1)\\.=Vulkan0,output=GPU0", "blk\\.0\\.=CPU"}});
  EXPECT_EQ(d.layers[0].dense, kGpuDevice);
  EXPECT_EQ(d.layers[1].dense, kGpuDevice);
  EXPECT_EQ(d.layers[2].dense, kCpuDevice);
  EXPECT_EQ(d.output_device, kGpuDevice);
  // Bad rules are bad input, naming the rule.
  for (const std::string bad : {"exps", "exps=TPU", "=CPU", "exps(=CPU"}) {
    auto r = make_plan(hp, arch, tensors, {.override_tensor = {bad}});
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
    EXPECT_NE(r.status().message().find("-ot"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace moetier
