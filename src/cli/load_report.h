// The load's notes and placement table on stderr, as every command that loads a model
// shows them ("moetier: ..." lines; the plan as inspect --plan prints it).
#pragma once

#include <string>
#include <string_view>

#include "engine/session.h"

namespace moetier {

class StderrLoadReporter final : public LoadReporter {
 public:
  explicit StderrLoadReporter(std::string prefix = "moetier") : prefix_(std::move(prefix)) {}
  void note(std::string_view line) override;
  void plan(const PlacementDecision& decision, const HParams& hp) override;

 private:
  std::string prefix_;
};

}  // namespace moetier
