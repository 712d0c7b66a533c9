#include "engine/summary.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace moetier::inspect {

double percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

Census make_census(const gguf::GgufFile& file) {
  std::map<uint32_t, CensusRow> by_type;
  Census c;
  for (const auto& t : file.tensors) {
    CensusRow& row = by_type[static_cast<uint32_t>(t.type)];
    row.type = t.type;
    row.n_tensors += 1;
    row.n_params += static_cast<int64_t>(t.n_elements);
    row.n_bytes += static_cast<int64_t>(t.n_bytes);
    c.n_tensors += 1;
    c.n_params += static_cast<int64_t>(t.n_elements);
    c.n_bytes += static_cast<int64_t>(t.n_bytes);
  }
  for (auto& [id, row] : by_type) c.rows.push_back(row);
  return c;
}

namespace {

std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string first_names(const std::vector<std::string>& names, size_t max_shown = 3) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max_shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max_shown) s += fmt::format(", ... ({} more)", names.size() - max_shown);
  return s;
}

// The declared type describes the file when its main tensor type holds at least half of
// the weight matrices (tensors of 2 or more dimensions; 1-D norms and biases stay F32 in
// every file type). llama.cpp's own mixes (Q4_K_M: Q6_K for some down/v projections)
// keep most matrices in the main type; hand-made mixes (Unsloth's UD) often do not.
std::optional<std::string> check_file_type(uint32_t file_type, const gguf::GgufFile& file, const Census& census) {
  const std::optional<DType> main = file_type_main_dtype(file_type);
  if (!main || census.n_tensors == 0) return std::nullopt;
  int64_t matrices = 0, main_matrices = 0;
  for (const auto& t : file.tensors) {
    if (t.n_dims < 2) continue;
    matrices += 1;
    if (t.type == *main) main_matrices += 1;
  }
  if (matrices == 0 || 2 * main_matrices >= matrices) return std::nullopt;
  int64_t main_tensors = 0, main_bytes = 0;
  for (const auto& r : census.rows) {
    if (r.type == *main) {
      main_tensors = r.n_tensors;
      main_bytes = r.n_bytes;
    }
  }
  std::vector<CensusRow> rows = census.rows;
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.n_tensors > b.n_tensors; });
  std::string shares;
  for (const auto& r : rows) {
    shares += fmt::format("{}{} {:.1f}%", shares.empty() ? "" : ", ", dtype_name(r.type),
                          percent(r.n_tensors, census.n_tensors));
  }
  return fmt::format(
      "declared {}, but {} holds only {:.1f}% of tensors ({:.1f}% of weight matrices, {:.1f}% of bytes); "
      "tensors: {}",
      file_type_name(file_type), dtype_name(*main), percent(main_tensors, census.n_tensors),
      percent(main_matrices, matrices), percent(main_bytes, census.n_bytes), shares);
}

// Compare the file's tensor table with the architecture's complete layout.
void check_layout(const gguf::GgufFile& file, const ArchInfo& arch, const HParams& hp,
                  std::vector<std::string>& notes) {
  std::unordered_map<std::string, std::vector<int64_t>> expected;
  for (const auto& s : arch.tensor_specs(hp)) expected.emplace(s.name, s.ne);
  std::vector<std::string> unexpected, wrong_shape;
  for (const auto& t : file.tensors) {
    auto it = expected.find(t.name);
    if (it == expected.end()) {
      unexpected.push_back(t.name);
      continue;
    }
    const std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (ne != it->second) {
      wrong_shape.push_back(fmt::format("{} {} (expected {})", t.name, shape_string(ne), shape_string(it->second)));
    }
    expected.erase(it);
  }
  std::vector<std::string> missing;
  for (const auto& s : arch.tensor_specs(hp)) {
    if (expected.count(s.name) && !s.optional) missing.push_back(s.name);
  }
  if (!missing.empty()) {
    notes.push_back(fmt::format("{} tensor(s) of the {} layout are missing: {}", missing.size(), hp.arch,
                                first_names(missing)));
  }
  if (!unexpected.empty()) {
    notes.push_back(fmt::format("{} tensor(s) are not part of the {} layout: {}", unexpected.size(), hp.arch,
                                first_names(unexpected)));
  }
  if (!wrong_shape.empty()) {
    notes.push_back(fmt::format("{} tensor(s) have an unexpected shape: {}", wrong_shape.size(),
                                first_names(wrong_shape, 2)));
  }
}

MoeCounts count_moe(const gguf::GgufFile& file, const std::vector<TensorRole>& roles, const HParams& hp) {
  MoeCounts m;
  int64_t non_expert_params = 0, expert_params_active = 0;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& t = file.tensors[i];
    const auto params = static_cast<int64_t>(t.n_elements);
    const auto bytes = static_cast<int64_t>(t.n_bytes);
    if (!is_routed_expert(roles[i])) {
      non_expert_params += params;
      m.non_expert_bytes += bytes;
      if (roles[i] == TensorRole::kTokenEmbedding) {
        // A token reads one row of the embedding, not the whole table.
        const int64_t rows = t.n_dims >= 2 ? t.ne[1] : 1;
        m.bytes_per_token += rows > 0 ? bytes / rows : 0;
      } else {
        m.bytes_per_token += bytes;
      }
      continue;
    }
    // {in, out, n_expert}: expert e is the contiguous slice e, so one expert is 1/ne[2].
    const int64_t n_expert_in_tensor = t.n_dims == 3 && t.ne[2] > 0 ? t.ne[2] : hp.n_expert;
    const int64_t used = std::min(hp.n_expert_used, n_expert_in_tensor);
    m.expert_params += params;
    m.expert_bytes_total += bytes;
    expert_params_active += params / n_expert_in_tensor * used;
    m.expert_bytes_per_token += bytes / n_expert_in_tensor * used;
  }
  m.n_params_active = non_expert_params + expert_params_active;
  m.bytes_per_token += m.expert_bytes_per_token;
  return m;
}

}  // namespace

Summary summarize(const gguf::GgufFile& file) {
  Summary s;
  s.arch = architecture_of(file);
  s.name = file.get_string_or("general.name", "");
  if (const gguf::Value* ft = file.find("general.file_type"); ft != nullptr) {
    if (auto v = ft->as_int(); v && *v >= 0 && *v <= 0xffffffffll) s.file_type = static_cast<uint32_t>(*v);
  }
  s.census = make_census(file);
  if (s.file_type) s.file_type_mismatch = check_file_type(*s.file_type, file, s.census);

  s.arch_info = find_arch(s.arch);
  s.roles.assign(file.tensors.size(), TensorRole::kOther);
  if (s.arch_info == nullptr) {
    std::string supported;
    for (auto n : registered_arch_names()) supported += (supported.empty() ? "" : ", ") + std::string(n);
    s.notes.push_back(fmt::format("architecture '{}' is not supported (supported: {}); identity and census only",
                                  s.arch.empty() ? "(none)" : s.arch, supported));
    return s;
  }
  for (size_t i = 0; i < file.tensors.size(); ++i) s.roles[i] = s.arch_info->tensor_role(file.tensors[i].name);
  auto hp = s.arch_info->read_hparams(file);
  if (!hp) {
    s.hparams_error = hp.status().message();
    s.notes.push_back(fmt::format("invalid {} metadata: {}", s.arch, s.hparams_error));
    return s;
  }
  s.hparams = std::move(hp).value();
  check_layout(file, *s.arch_info, *s.hparams, s.notes);
  s.moe = count_moe(file, s.roles, *s.hparams);
  return s;
}

std::vector<PlanTensor> plan_tensors(const gguf::GgufFile& file, const Summary& summary) {
  std::vector<PlanTensor> out;
  out.reserve(file.tensors.size());
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& t = file.tensors[i];
    out.push_back({.name = t.name,
                   .role = summary.roles[i],
                   .layer = tensor_layer_index(t.name),
                   .bytes = static_cast<int64_t>(t.n_bytes)});
  }
  return out;
}

}  // namespace moetier::inspect
