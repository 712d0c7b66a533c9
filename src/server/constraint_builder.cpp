#include "server/constraint_builder.h"

#include "server/server_state.h"

namespace moetier::server {

bool output_constrained(const GenerationRequest& r) {
  const bool forced_tools = !r.tools.is_null() && (r.tool_choice == "required" || r.tool_choice == "function");
  return r.grammar || r.json_schema || r.json_object || forced_tools;
}

std::optional<ApiError> build_constraint(const ServerState&, const GenerationRequest& r,
                                         std::shared_ptr<const ConstraintFactory>& out) {
  out = nullptr;
  if (!output_constrained(r)) return std::nullopt;
  return ApiError{.http_status = 400, .message = "constrained output is not available yet", .param = "grammar"};
}

std::unique_ptr<ChatOutputParser> make_chat_output_parser(const ServerState&, const GenerationRequest&) {
  return nullptr;
}

}  // namespace moetier::server
