#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install what the build needs, build, then
# answer "how fast would this machine run Qwen3.6-35B-A3B's experts on the CPU?".
#
# With no model given it synthesizes a random-weight model with the exact tensor shapes of
# Qwen3.6-35B-A3B but 8 of its 40 layers (the same 3 DeltaNet : 1 attention mix), in an
# Unsloth-UD-Q4_K_XL-like quant mix (4.7 GB; ~6 minutes on 2 cores, once), prints its
# memory plan for a 6 GB GPU at 64K context, measures the machine's memory bandwidth, and
# runs `moetier bench` (llama-bench's pp512 and tg128, --no-mmap) on it. The figures for the full 40
# layers are extrapolated from the measured per-layer time and printed as an ESTIMATE.
#
#   scripts/run.sh                 # synthetic model
#   scripts/run.sh MODEL.gguf      # your own GGUF file (measured only, no estimate)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DMOETIER_TESTS=OFF
model="${1:-}"
scale=()
if [ -z "$model" ]; then
  mkdir -p out
  model=out/qwen3.6-35b-a3b-8layers-ud-q4_k_xl.gguf
  if [ ! -f "$model" ]; then
    ./build/moetier synth --preset qwen3.6-35b-a3b --layers 8 --quant ud-q4_k_xl --seed 1 -o "$model.tmp"
    mv "$model.tmp" "$model"
  fi
  scale=(--scale-layers 40)
fi
./build/moetier inspect "$model" --plan -c 65536 -ctk f16 -ctv f16 -ngl all --cpu-moe --vram-budget 6144
# --no-mmap (-mmp 0): weights read into RAM (transparent huge pages), as users run it.
./build/moetier bench -m "$model" -p 512 -n 128 -r 3 -mmp 0 --membw --profile "${scale[@]}"
