// Presentation of `moetier inspect`: the human-readable report and the JSON object that
// scripts depend on (field names in docs/architecture.md, "inspect --json").
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/plan.h"
#include "engine/summary.h"
#include "gguf/gguf.h"

namespace moetier::inspect {

struct ReportInput {
  const gguf::GgufFile& file;
  const Summary& summary;
  std::optional<std::string> sha256;   // --sha256
  bool list_tensors = false;           // --tensors
  const Plan* plan = nullptr;          // --plan
  const PlanParams* plan_params = nullptr;
};

std::string render_text(const ReportInput& in);
nlohmann::ordered_json render_json(const ReportInput& in);

// The plan section alone (text table / JSON object), shared by both renderers.
std::string render_plan_text(const Plan& plan, const PlanParams& params, const HParams& hp);
nlohmann::ordered_json render_plan_json(const Plan& plan, const PlanParams& params);

}  // namespace moetier::inspect
