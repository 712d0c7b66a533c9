#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine: install what the build needs, build, then
# show what moetier does today on a model. With no model given it synthesizes a
# random-weight model with the exact tensor shapes of Qwen3.6-35B-A3B (4 of its 40 layers,
# an Unsloth-UD-Q4_K_XL-like quant mix, ~2.8 GB, a few minutes), inspects it with a memory
# plan for a 6 GB GPU at 64K context, and generates a few tokens on the CPU (the text is
# noise: the weights are random).
#
#   scripts/run.sh                 # synthetic model
#   scripts/run.sh MODEL.gguf      # your own GGUF file
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh -DMOETIER_TESTS=OFF
model="${1:-}"
if [ -z "$model" ]; then
  mkdir -p out
  model=out/qwen3.6-35b-a3b-4layers-ud-q4_k_xl.gguf
  if [ ! -f "$model" ]; then
    ./build/moetier synth --preset qwen3.6-35b-a3b --layers 4 --quant ud-q4_k_xl --seed 1 -o "$model.tmp"
    mv "$model.tmp" "$model"
  fi
fi
./build/moetier inspect "$model" --plan -c 65536 -ctk f16 -ctv f16 -ngl all --cpu-moe --vram-budget 6144
./build/moetier run -m "$model" -p "The quick brown fox" -n 16 --temp 0 --no-mmap
