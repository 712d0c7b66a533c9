// What `moetier inspect` knows about a file, computed from its header alone (pure
// functions of a gguf::GgufFile, no I/O): the tensor census per type, the architecture's
// hyper-parameters, parameter and byte counts (total, active per token, routed experts),
// and remarks where the file does not look the way it claims.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/plan.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "tensor/dtype.h"

namespace moetier::inspect {

// One line of the census: all tensors of one type.
struct CensusRow {
  DType type = DType::F32;
  int64_t n_tensors = 0;
  int64_t n_params = 0;   // elements
  int64_t n_bytes = 0;
};

struct Census {
  std::vector<CensusRow> rows;  // by type id
  int64_t n_tensors = 0;
  int64_t n_params = 0;
  int64_t n_bytes = 0;
};

Census make_census(const gguf::GgufFile& file);

// Counts that need the architecture (which tensors are routed experts, how many experts
// a token uses).
struct MoeCounts {
  int64_t n_params_active = 0;         // non-expert params + routed expert params * used / total
  int64_t expert_params = 0;           // routed expert params
  int64_t expert_bytes_total = 0;      // routed expert bytes
  int64_t expert_bytes_per_token = 0;  // bytes of n_expert_used experts in every layer
  int64_t non_expert_bytes = 0;        // everything else
  // Weight bytes one generated token reads: everything else except the token embedding,
  // one embedding row, and the routed experts it uses.
  int64_t bytes_per_token = 0;
};

struct Summary {
  std::string arch;                       // general.architecture ("" if absent)
  std::string name;                       // general.name
  std::optional<uint32_t> file_type;      // general.file_type
  Census census;

  // Declared file type vs content: set when the declared type's main tensor type holds
  // less than half of the weight matrices (one line for the user).
  std::optional<std::string> file_type_mismatch;

  const ArchInfo* arch_info = nullptr;    // nullptr: unsupported architecture
  std::optional<HParams> hparams;         // when the architecture is supported and valid
  std::string hparams_error;              // why hparams is empty (supported arch, bad metadata)
  std::vector<TensorRole> roles;          // parallel to file.tensors (kOther without arch_info)
  std::optional<MoeCounts> moe;           // with hparams

  std::vector<std::string> notes;         // remarks: unsupported arch, missing tensors, ...
};

Summary summarize(const gguf::GgufFile& file);

// The planner's view of a file's tensors (roles from the architecture).
std::vector<PlanTensor> plan_tensors(const gguf::GgufFile& file, const Summary& summary);

// "49.0%" style percentage of part in whole (0 when whole is 0).
double percent(int64_t part, int64_t whole);

}  // namespace moetier::inspect
