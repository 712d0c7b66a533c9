// The dtype traits table and llama.cpp's file-type names.
//
// Block geometry follows ggml's block structs (ggml-common.h) and its type_traits table;
// the bytes per block are written out as sums of the struct fields so each entry can be
// checked by eye against the format.
#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <cstdint>

#include "core/status.h"

namespace moetier {
namespace {

constexpr int64_t kSuper = 256;  // QK_K: super-block of K-quants and most IQ types
constexpr int64_t kHalf = 2;     // bytes of an fp16 scale

// Every type id a GGUF file may name, in id order. Ids 4, 5 and 31..33, 36..38 were
// removed from ggml and are absent (dtype_traits(id) returns nullptr for them).
constexpr DTypeTraits kTable[] = {
    // type            name       elems   bytes per block                                quant  kernels
    {DType::F32, "F32", 1, 4, false, true},
    {DType::F16, "F16", 1, 2, false, true},
    {DType::Q4_0, "Q4_0", 32, kHalf + 32 / 2, true, true},
    {DType::Q4_1, "Q4_1", 32, 2 * kHalf + 32 / 2, true, false},
    {DType::Q5_0, "Q5_0", 32, kHalf + 4 + 32 / 2, true, false},
    {DType::Q5_1, "Q5_1", 32, 2 * kHalf + 4 + 32 / 2, true, false},
    {DType::Q8_0, "Q8_0", 32, kHalf + 32, true, true},
    {DType::Q8_1, "Q8_1", 32, 2 * kHalf + 32, true, false},
    {DType::Q2_K, "Q2_K", kSuper, 2 * kHalf + kSuper / 16 + kSuper / 4, true, false},
    {DType::Q3_K, "Q3_K", kSuper, kHalf + kSuper / 4 + kSuper / 8 + 12, true, false},
    {DType::Q4_K, "Q4_K", kSuper, 2 * kHalf + 12 + kSuper / 2, true, true},
    {DType::Q5_K, "Q5_K", kSuper, 2 * kHalf + 12 + kSuper / 8 + kSuper / 2, true, true},
    {DType::Q6_K, "Q6_K", kSuper, kHalf + kSuper / 16 + 3 * kSuper / 4, true, true},
    {DType::Q8_K, "Q8_K", kSuper, 4 + kSuper + (kSuper / 16) * 2, true, true},
    {DType::IQ2_XXS, "IQ2_XXS", kSuper, kHalf + (kSuper / 8) * 2, true, false},
    {DType::IQ2_XS, "IQ2_XS", kSuper, kHalf + (kSuper / 8) * 2 + kSuper / 32, true, false},
    {DType::IQ3_XXS, "IQ3_XXS", kSuper, kHalf + 3 * (kSuper / 8), true, false},
    {DType::IQ1_S, "IQ1_S", kSuper, kHalf + kSuper / 8 + kSuper / 16, true, false},
    {DType::IQ4_NL, "IQ4_NL", 32, kHalf + 32 / 2, true, false},
    {DType::IQ3_S, "IQ3_S", kSuper, kHalf + 13 * (kSuper / 32) + kSuper / 64, true, false},
    {DType::IQ2_S, "IQ2_S", kSuper, kHalf + kSuper / 4 + kSuper / 16, true, false},
    {DType::IQ4_XS, "IQ4_XS", kSuper, kHalf + 2 + kSuper / 64 + kSuper / 2, true, true},
    {DType::I8, "I8", 1, 1, false, false},
    {DType::I16, "I16", 1, 2, false, false},
    {DType::I32, "I32", 1, 4, false, false},
    {DType::I64, "I64", 1, 8, false, false},
    {DType::F64, "F64", 1, 8, false, false},
    {DType::IQ1_M, "IQ1_M", kSuper, kSuper / 8 + kSuper / 16 + kSuper / 32, true, false},
    {DType::BF16, "BF16", 1, 2, false, true},
    {DType::TQ1_0, "TQ1_0", kSuper, kHalf + kSuper / 64 + (kSuper - 4 * kSuper / 64) / 5, true, false},
    {DType::TQ2_0, "TQ2_0", kSuper, kHalf + kSuper / 4, true, false},
    {DType::MXFP4, "MXFP4", 32, 1 + 32 / 2, true, false},             // E8M0 scale + nibbles
    {DType::NVFP4, "NVFP4", 64, 64 / 16 + 64 / 2, true, false},       // 4 E4M3 scales + nibbles
    {DType::Q1_0, "Q1_0", 128, kHalf + 128 / 8, true, false},
    {DType::Q2_0, "Q2_0", 64, kHalf + 64 / 4, true, false},
};

constexpr uint32_t kMaxTypeId = 42;

// Index of each type id in kTable, or -1; built at compile time from the table itself.
constexpr std::array<int, kMaxTypeId + 1> build_index() {
  std::array<int, kMaxTypeId + 1> index{};
  for (auto& slot : index) slot = -1;
  for (int i = 0; i < static_cast<int>(std::size(kTable)); ++i) {
    index[static_cast<uint32_t>(kTable[i].type)] = i;
  }
  return index;
}
constexpr std::array<int, kMaxTypeId + 1> kIndexById = build_index();

bool equals_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto ca = static_cast<unsigned char>(a[i]);
    const auto cb = static_cast<unsigned char>(b[i]);
    if (std::toupper(ca) != std::toupper(cb)) return false;
  }
  return true;
}

// llama.cpp's enum llama_ftype: the name is the enumerator without the LLAMA_FTYPE_ prefix;
// `main` is the tensor type the file type uses for its bulk weights
// (llama_ftype_get_default_type in llama-quant.cpp).
struct FileTypeInfo {
  uint32_t id;
  std::string_view name;
  std::optional<DType> main;
};

const FileTypeInfo kFileTypes[] = {
    {0, "ALL_F32", DType::F32},
    {1, "MOSTLY_F16", DType::F16},
    {2, "MOSTLY_Q4_0", DType::Q4_0},
    {3, "MOSTLY_Q4_1", DType::Q4_1},
    // 4 (Q4_1_SOME_F16), 5 (Q4_2), 6 (Q4_3) were removed from llama.cpp.
    {7, "MOSTLY_Q8_0", DType::Q8_0},
    {8, "MOSTLY_Q5_0", DType::Q5_0},
    {9, "MOSTLY_Q5_1", DType::Q5_1},
    {10, "MOSTLY_Q2_K", DType::Q2_K},
    {11, "MOSTLY_Q3_K_S", DType::Q3_K},
    {12, "MOSTLY_Q3_K_M", DType::Q3_K},
    {13, "MOSTLY_Q3_K_L", DType::Q3_K},
    {14, "MOSTLY_Q4_K_S", DType::Q4_K},
    {15, "MOSTLY_Q4_K_M", DType::Q4_K},
    {16, "MOSTLY_Q5_K_S", DType::Q5_K},
    {17, "MOSTLY_Q5_K_M", DType::Q5_K},
    {18, "MOSTLY_Q6_K", DType::Q6_K},
    {19, "MOSTLY_IQ2_XXS", DType::IQ2_XXS},
    {20, "MOSTLY_IQ2_XS", DType::IQ2_XS},
    {21, "MOSTLY_Q2_K_S", DType::Q2_K},
    {22, "MOSTLY_IQ3_XS", DType::IQ3_S},
    {23, "MOSTLY_IQ3_XXS", DType::IQ3_XXS},
    {24, "MOSTLY_IQ1_S", DType::IQ1_S},
    {25, "MOSTLY_IQ4_NL", DType::IQ4_NL},
    {26, "MOSTLY_IQ3_S", DType::IQ3_S},
    {27, "MOSTLY_IQ3_M", DType::IQ3_S},
    {28, "MOSTLY_IQ2_S", DType::IQ2_XS},  // llama.cpp's choice: IQ2_S files are mostly IQ2_XS
    {29, "MOSTLY_IQ2_M", DType::IQ2_S},
    {30, "MOSTLY_IQ4_XS", DType::IQ4_XS},
    {31, "MOSTLY_IQ1_M", DType::IQ1_M},
    {32, "MOSTLY_BF16", DType::BF16},
    // 33..35 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) were removed from GGUF files.
    {36, "MOSTLY_TQ1_0", DType::TQ1_0},
    {37, "MOSTLY_TQ2_0", DType::TQ2_0},
    {38, "MOSTLY_MXFP4_MOE", DType::MXFP4},
    {39, "MOSTLY_NVFP4", DType::NVFP4},
    {40, "MOSTLY_Q1_0", DType::Q1_0},
    {41, "MOSTLY_Q2_0", DType::Q2_0},
    {1024, "GUESSED", std::nullopt},  // "not specified in the model file"
};

const FileTypeInfo* find_file_type(uint32_t file_type) {
  for (const auto& info : kFileTypes) {
    if (info.id == file_type) return &info;
  }
  return nullptr;
}

}  // namespace

const DTypeTraits* dtype_traits(uint32_t type_id) {
  if (type_id > kMaxTypeId) return nullptr;
  const int index = kIndexById[type_id];
  return index < 0 ? nullptr : &kTable[index];
}

const DTypeTraits& dtype_traits(DType type) {
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
  CHECK_MSG(traits != nullptr, "DType {} has no traits", static_cast<uint32_t>(type));
  return *traits;
}

std::string_view dtype_name(DType type) { return dtype_traits(type).name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& traits : kTable) {
    if (equals_ignore_case(traits.name, name)) return traits.type;
  }
  return std::nullopt;
}

int64_t dtype_row_bytes(DType type, int64_t n_elems) {
  const DTypeTraits& traits = dtype_traits(type);
  CHECK_MSG(n_elems >= 0 && n_elems % traits.block_elems == 0,
            "row of {} elements is not a whole number of {} blocks ({} elements)", n_elems, traits.name,
            traits.block_elems);
  return n_elems / traits.block_elems * traits.block_bytes;
}

Result<int64_t> dtype_row_bytes_checked(DType type, int64_t n_elems) {
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    return Status::bad_input(fmt::format("unknown tensor type id {}", static_cast<uint32_t>(type)));
  }
  if (n_elems < 0) return Status::bad_input(fmt::format("negative row length {}", n_elems));
  if (n_elems % traits->block_elems != 0) {
    return Status::bad_input(fmt::format("row of {} elements is not a multiple of the {} block size {}",
                                         n_elems, traits->name, traits->block_elems));
  }
  // n_elems / block_elems * block_bytes <= n_elems * 8 / 1 for every type, but guard anyway.
  const int64_t blocks = n_elems / traits->block_elems;
  if (blocks > INT64_MAX / traits->block_bytes) {
    return Status::bad_input(fmt::format("row of {} {} elements overflows 64-bit byte count", n_elems, traits->name));
  }
  return blocks * traits->block_bytes;
}

std::string_view file_type_name(uint32_t file_type) {
  const FileTypeInfo* info = find_file_type(file_type);
  return info ? info->name : std::string_view{};
}

std::optional<DType> file_type_main_dtype(uint32_t file_type) {
  const FileTypeInfo* info = find_file_type(file_type);
  return info ? info->main : std::nullopt;
}

}  // namespace moetier
