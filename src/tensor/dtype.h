// Tensor element types, numbered exactly as ggml's `enum ggml_type` (the ids stored in GGUF).
// The traits table knows the block geometry of every type a GGUF file may name, so a file
// can be described (inspect) even when moetier cannot compute with one of its types;
// `has_kernels` says which ones moetier can dequantize/quantize.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace moetier {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
};

struct DTypeTraits {
  DType type;
  std::string_view name;   // ggml's name: "F32", "Q4_K", "IQ4_XS", ...
  int64_t block_elems;     // elements per block (1 for plain types)
  int64_t block_bytes;     // bytes per block
  bool quantized;          // block-quantized (not a plain float/int type)
  bool has_kernels;        // moetier has scalar dequantize + quantize for it
};

// nullptr for an id no GGUF writer uses (unknown or removed types).
const DTypeTraits* dtype_traits(uint32_t type_id);
const DTypeTraits& dtype_traits(DType type);
std::string_view dtype_name(DType type);
// Case-insensitive lookup by ggml name ("q4_k" -> Q4_K).
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of one row of `n_elems` elements. `n_elems` must be a multiple of the block size
// (callers validate user-provided shapes with dtype_row_bytes_checked first).
int64_t dtype_row_bytes(DType type, int64_t n_elems);
// The same for lengths that come from a file or a user: a bad_input error (not a CHECK) for a
// type id without traits, a negative length, a length that is not a whole number of blocks,
// or a byte count that overflows int64.
Result<int64_t> dtype_row_bytes_checked(DType type, int64_t n_elems);

// llama.cpp's `general.file_type` (enum llama_ftype) names, e.g. 15 -> "MOSTLY_Q4_K_M".
// Returns an empty view for unknown values.
std::string_view file_type_name(uint32_t file_type);
// The tensor type a file type declares for its bulk weights (15 -> Q4_K), if known.
std::optional<DType> file_type_main_dtype(uint32_t file_type);

}  // namespace moetier
