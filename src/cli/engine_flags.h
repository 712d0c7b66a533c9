// The llama.cpp-compatible flags of the commands that run a model, bound to the engine's
// option structs (engine/session.h, engine/speculation.h, runtime/sampler.h).
#pragma once

#include "core/args.h"
#include "engine/session.h"
#include "engine/speculation.h"
#include "runtime/sampler.h"

namespace moetier {

// -m, -c, -t, -b, -ub, -ctk, -ctv, --no-mmap, --mlock, --expert-pages, -fa, -ngl, -ncmoe,
// -cmoe, -ot, -dev, --list-devices, --fit, --fit-margin, --vram-budget, -nr, --no-op-offload,
// --gpu-kernels, -v
void add_engine_flags(ArgParser& parser, EngineOptions& options);
// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --presence-penalty, --frequency-penalty, --seed
void add_sampling_flags(ArgParser& parser, SamplerParams& params);
// Speculative decoding flags in llama.cpp's spelling (--spec-type, --spec-draft-n-max/-min,
// --spec-draft-p-min, --spec-ngram-simple-*, --spec-ngram-mod-*), plus --draft-max/--draft-min/
// --draft-p-min as aliases (llama.cpp's older names, which ik_llama.cpp still uses) and
// --spec-adaptive. -md FILE: a draft model (draft-simple) or an MTP-only GGUF (draft-mtp);
// -ngld N puts the draft model's last N layers on the model's GPU (llama.cpp's numbering,
// the LM head first).
void add_spec_flags(ArgParser& parser, SpecOptions& options);

// --list-devices: prints the Vulkan devices (or why there are none) and returns the exit status;
// verbose (-v): also each device's subgroups and the fast kernels' vendor defaults.
int print_gpu_devices(bool verbose = false);

}  // namespace moetier
