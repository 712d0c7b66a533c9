// The GPU path on the real model's dimensions (tests/data/real_shape, support/real_shape.h):
// a Qwen3.6-35B-A3B-shaped Gated DeltaNet layer (d_state 128, 16 K / 32 V heads) and gated
// attention layer (16 / 2 heads of 256), Q4_K_M, on lavapipe in CI. The bug this guards
// against: the exact delta rule silently stopped after ~122 tokens of a micro-batch at
// d_state 128 (lavapipe ends an invocation's loops after 65,535 iterations), so prompts of
// ~128+ tokens gave logits ~10 off while the tiny test models (d_state 32) were fine.
//
// Prompts of 1, 109, 298 and 662 tokens at the default -ub (512: the longest spans two
// micro-batches; the 1113-token prompt would only add a third), and -ub 1 / -ub 7, in the users' placement (-ngl all -cmoe: dense
// layers on the GPU, routed experts on the CPU) and all on the GPU, with the fast kernels
// (the default) and the exact ones; every result against llama.cpp's logits within the same
// bound as the CPU path (real_shape.h: 1.5 × llama.cpp's own -ub 1 vs default noise).
#include <gtest/gtest.h>

#include "support/gpu.h"
#include "support/real_shape.h"

#if MOETIER_HAVE_VULKAN
#include "core/thread_pool.h"

namespace moetier {
namespace {

struct Run {
  std::string name;
  bool experts_on_gpu = false;
  bool exact_kernels = false;
  int64_t n_ubatch = 512;
  std::vector<std::string> prompts;
};

void run_case(const testing::RealShapeData& data, const Run& r) {
  SCOPED_TRACE(r.name);
  ThreadPool pool(2);
  auto m = testing::load_real_shape_model(data, r.n_ubatch);
  ASSERT_TRUE(m.model);
  const int64_t n_layer = m.model->hparams().n_layer;
  GpuPlacement placement{.create_backend = create_gpu_backend, .progress = false, .exact_kernels = r.exact_kernels};
  placement.layer_on_gpu.assign(static_cast<size_t>(n_layer), true);
  placement.experts_on_gpu.assign(static_cast<size_t>(n_layer), r.experts_on_gpu);
  placement.output_on_gpu = true;
  const Status placed = m.model->place_on_gpu(placement);
  ASSERT_TRUE(placed.is_ok()) << placed.message();
  for (const auto& name : r.prompts) {
    const auto& c = data.get(name);
    auto seq = m.model->new_sequence({.n_ctx = 2048, .type_k = DType::F32, .type_v = DType::F32});
    ASSERT_TRUE(seq.is_ok()) << seq.status().message();
    std::vector<float> logits;
    const Status st = m.model->forward(c.tokens, *seq, {}, logits, pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    testing::expect_real_shape_logits(logits, c, data.tolerance);
  }
}

TEST(RealShapeGpu, UsersPlacementAtTheDefaultMicroBatch) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const auto data = testing::load_real_shape();
  run_case(data, {.name = "-ngl all -cmoe, fast", .prompts = {"t1", "t100", "t300", "t700"}});
}

TEST(RealShapeGpu, SmallAndOddMicroBatches) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const auto data = testing::load_real_shape();
  run_case(data, {.name = "-ngl all -cmoe -ub 1, fast", .n_ubatch = 1, .prompts = {"t100"}});
  run_case(data, {.name = "-ngl all -cmoe -ub 7, fast", .n_ubatch = 7, .prompts = {"t100"}});
}

// The smallest cases all on the GPU (flash attention at head dim 256, the fast delta rule,
// the router and the expert mat-vecs and mat-mats): a 1-token and a 109-token prompt. The
// runs with emulated subgroups take this one (tests/CMakeLists.txt).
TEST(RealShapeGpu, ShortPromptsAllOnTheGpu) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const auto data = testing::load_real_shape();
  run_case(data, {.name = "-ngl all, fast, short prompts", .experts_on_gpu = true, .prompts = {"t1", "t100"}});
}

TEST(RealShapeGpu, AllOnTheGpuAndTheExactKernels) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const auto data = testing::load_real_shape();
  run_case(data, {.name = "-ngl all, fast", .experts_on_gpu = true, .prompts = {"t300", "t700"}});
  run_case(data, {.name = "-ngl all -cmoe, exact kernels", .exact_kernels = true, .prompts = {"t300"}});
}

}  // namespace
}  // namespace moetier
#endif
