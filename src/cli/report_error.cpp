#include <cstdio>

#include "cli/commands.h"
#include "core/status.h"

namespace moetier {

int report_error(const Status& status) {
  std::fprintf(stderr, "moetier: error: %s\n", status.message().c_str());
  return status.exit_code();
}

}  // namespace moetier
