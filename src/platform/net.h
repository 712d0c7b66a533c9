// Sockets the server's HTTP library opened, where it leaves an OS setting at a value that
// fails under load. The OS side lives in platform/<os>/net.cpp.
#pragma once

#include <cstdint>

namespace moetier::platform {

// Lets the listening socket `socket` (a POSIX descriptor or a Windows SOCKET, as an integer)
// hold up to `backlog` connections that are not accepted yet (the OS caps it: Linux at
// net.core.somaxconn). cpp-httplib listens with a backlog of 5; when more clients connect at
// once than that while the accept thread waits for a core, Linux drops their handshakes or
// answers with SYN cookies, and now and then a client's connection is reset before its request
// is read. Linux applies a second listen() on an open socket; Windows keeps the first
// backlog and gains nothing from it (its listen() ignores a later one), so there this returns
// false and changes nothing.
bool set_listen_backlog(int64_t socket, int backlog);

}  // namespace moetier::platform
