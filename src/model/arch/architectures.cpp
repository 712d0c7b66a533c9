// The architectures this build runs, listed once: adding a model is its files under
// model/arch/ plus one line here (docs/adding-a-model.md); nothing else names an architecture.
#include "model/arch.h"

namespace moetier {

const ArchInfo& qwen3moe_arch();   // model/arch/qwen3moe.cpp
const ArchInfo& qwen35moe_arch();  // model/arch/qwen35moe.cpp

std::span<const ArchInfo* const> architectures() {
  static const ArchInfo* const kArchitectures[] = {&qwen3moe_arch(), &qwen35moe_arch()};
  return kArchitectures;
}

}  // namespace moetier
