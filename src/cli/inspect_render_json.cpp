// `moetier inspect --json`: one object. Stable fields scripts rely on (design.md): arch,
// file_type_declared, file_type_name, census [{type, n_tensors, n_params, n_bytes}],
// n_params_total, n_params_active, expert_bytes_total, expert_bytes_per_token, sha256
// (with --sha256) and plan (with --plan). Counts the file's architecture is needed
// for are null when it is not supported.
#include "cli/inspect_render.h"

namespace moetier::inspect {

namespace {

using json = nlohmann::ordered_json;

json hparams_json(const HParams& hp) {
  json kinds = json::array();
  for (LayerKind k : hp.layer_kinds) kinds.push_back(std::string(layer_kind_name(k)));
  json j = {
      {"n_layer", hp.n_layer},
      {"n_layer_mtp", hp.n_layer_mtp},
      {"layer_kinds", kinds},
      {"n_embd", hp.n_embd},
      {"n_vocab", hp.n_vocab},
      {"n_ctx_train", hp.n_ctx_train},
      {"rms_eps", hp.rms_eps},
      {"n_head", hp.n_head},
      {"n_head_kv", hp.n_head_kv},
      {"head_dim_k", hp.head_dim_k},
      {"head_dim_v", hp.head_dim_v},
      {"attn_output_gate", hp.attn_output_gate},
      {"n_rot", hp.n_rot},
      {"rope_base", hp.rope_base},
      {"rope_sections", hp.rope_sections},
      {"n_expert", hp.n_expert},
      {"n_expert_used", hp.n_expert_used},
      {"n_expert_shared", hp.n_expert_shared},
      {"n_ff_exp", hp.n_ff_exp},
      {"n_ff_shexp", hp.n_ff_shexp},
  };
  if (hp.n_deltanet_layers() > 0) {
    j["ssm"] = {{"d_conv", hp.ssm_d_conv},   {"d_state", hp.ssm_d_state}, {"n_group", hp.ssm_n_group},
                {"dt_rank", hp.ssm_dt_rank}, {"d_inner", hp.ssm_d_inner},
                {"full_attention_interval", hp.full_attention_interval}};
  }
  return j;
}

json tensors_json(const ReportInput& in) {
  json list = json::array();
  for (size_t i = 0; i < in.file.tensors.size(); ++i) {
    const auto& t = in.file.tensors[i];
    json j = {{"name", t.name},
              {"type", std::string(dtype_name(t.type))},
              {"shape", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
              {"n_params", t.n_elements},
              {"n_bytes", t.n_bytes},
              {"offset", t.file_offset},
              {"role", std::string(tensor_role_name(in.summary.roles[i]))}};
    if (in.plan != nullptr) j["device"] = in.plan->tensor_devices[i];
    list.push_back(std::move(j));
  }
  return list;
}

}  // namespace

nlohmann::ordered_json render_json(const ReportInput& in) {
  const Summary& s = in.summary;
  json j;
  j["file"] = in.file.path;
  j["file_size"] = in.file.file_size;
  j["gguf_version"] = in.file.version;
  j["n_tensors"] = in.file.tensors.size();
  j["n_kv"] = in.file.metadata.size();
  j["name"] = s.name;
  j["arch"] = s.arch;
  j["arch_supported"] = s.arch_info != nullptr;
  if (s.file_type) {
    j["file_type_declared"] = *s.file_type;
    const std::string_view n = file_type_name(*s.file_type);
    j["file_type_name"] = n.empty() ? json(nullptr) : json(std::string(n));
    j["file_type_matches_content"] = !s.file_type_mismatch.has_value();
  } else {
    j["file_type_declared"] = nullptr;
    j["file_type_name"] = nullptr;
    j["file_type_matches_content"] = nullptr;
  }
  if (in.sha256) j["sha256"] = *in.sha256;

  json census = json::array();
  for (const auto& r : s.census.rows) {
    census.push_back({{"type", std::string(dtype_name(r.type))},
                      {"n_tensors", r.n_tensors},
                      {"n_params", r.n_params},
                      {"n_bytes", r.n_bytes}});
  }
  j["census"] = census;
  j["n_params_total"] = s.census.n_params;
  j["tensor_bytes_total"] = s.census.n_bytes;

  if (s.hparams) {
    const HParams& hp = *s.hparams;
    j["layers"] = {{"total", hp.n_layer},
                   {"attention", hp.n_attention_layers()},
                   {"deltanet", hp.n_deltanet_layers()},
                   {"mtp", hp.n_layer_mtp}};
    j["hparams"] = hparams_json(hp);
  } else {
    j["layers"] = nullptr;
    j["hparams"] = nullptr;
  }
  const auto moe_field = [&](const char* name, auto member) {
    j[name] = s.moe ? json((*s.moe).*member) : json(nullptr);
  };
  moe_field("n_params_active", &MoeCounts::n_params_active);
  moe_field("expert_params", &MoeCounts::expert_params);
  moe_field("expert_bytes_total", &MoeCounts::expert_bytes_total);
  moe_field("expert_bytes_per_token", &MoeCounts::expert_bytes_per_token);
  moe_field("non_expert_bytes", &MoeCounts::non_expert_bytes);
  moe_field("bytes_per_token", &MoeCounts::bytes_per_token);

  j["notes"] = s.notes;
  if (s.file_type_mismatch) j["notes"].push_back(*s.file_type_mismatch);
  if (in.list_tensors) j["tensors"] = tensors_json(in);
  if (in.plan != nullptr) j["plan"] = render_plan_json(*in.plan, *in.plan_params);
  return j;
}

}  // namespace moetier::inspect
