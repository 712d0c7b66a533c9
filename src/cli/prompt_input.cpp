#include "cli/prompt_input.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/args.h"
#include "core/utf8_path.h"

namespace moetier {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(utf8_path(path), std::ios::binary);
  if (!in) return Status::bad_input(fmt::format("cannot open '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<std::vector<int32_t>> parse_token_list(const std::string& list) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    item.erase(0, item.find_first_not_of(' '));
    if (!item.empty()) item.erase(item.find_last_not_of(' ') + 1);
    ASSIGN_OR_RETURN(int64_t v, parse_int(item, "--tokens"));
    if (v < 0 || v > INT32_MAX) return Status::bad_input(fmt::format("--tokens: {} is not a token id", v));
    ids.push_back(static_cast<int32_t>(v));
    start = end + 1;
  }
  return ids;
}

}  // namespace moetier
