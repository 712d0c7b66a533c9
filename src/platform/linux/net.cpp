#include "platform/net.h"

#include <sys/socket.h>

namespace moetier::platform {

bool set_listen_backlog(int64_t socket, int backlog) {
  return ::listen(static_cast<int>(socket), backlog) == 0;
}

}  // namespace moetier::platform
