// GET /metrics: Prometheus text exposition (version 0.0.4) of the server's counters and
// gauges. Names mirror llama-server's (llamacpp:* → moetier:*) so dashboards carry over.
#pragma once

#include <string>

#include "server/server_state.h"

namespace moetier::server {

std::string render_metrics(const ServerState& state);

}  // namespace moetier::server
