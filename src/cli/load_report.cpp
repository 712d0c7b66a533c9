#include "cli/load_report.h"

#include <cstdio>

#include "cli/inspect_render.h"
#include "engine/placement.h"

namespace moetier {

void StderrLoadReporter::note(std::string_view line) {
  std::fprintf(stderr, "%s: %.*s\n", prefix_.c_str(), static_cast<int>(line.size()), line.data());
}

void StderrLoadReporter::plan(const PlacementDecision& decision, const HParams& hp) {
  std::fputs(inspect::render_plan_text(decision.plan, decision.params, hp).c_str(), stderr);
}

}  // namespace moetier
