#include "platform/net.h"

namespace moetier::platform {

// Winsock's listen() on a socket that already listens succeeds without changing the backlog.
bool set_listen_backlog(int64_t /*socket*/, int /*backlog*/) { return false; }

}  // namespace moetier::platform
