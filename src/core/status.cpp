#include "core/status.h"

namespace moetier {

void check_failed(const char* file, int line, const char* expr, const std::string& msg) {
  std::fprintf(stderr, "moetier: internal error (a bug, please report): %s:%d: CHECK(%s) failed%s%s\n", file,
               line, expr, msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

void check_failed(const char* file, int line, const char* expr) { check_failed(file, line, expr, std::string()); }

}  // namespace moetier
