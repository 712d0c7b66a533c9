# The Windows build's dependencies, under the target names the Linux build gets from its
# packages (fmt::fmt, nlohmann_json::nlohmann_json, PkgConfig::PCRE2, PkgConfig::HTTPLIB), so
# the layers link them the same way. scripts/build-windows.sh prepares one prefix (added to
# CMAKE_FIND_ROOT_PATH) with:
#   include/fmt, include/nlohmann   Debian's headers (libfmt-dev, nlohmann-json3-dev); fmt is
#                                    used header-only (FMT_HEADER_ONLY)
#   include/httplib.h               the whole header from Debian's cpp-httplib source package
#                                    (libcpp-httplib-dev ships it split, for its shared library)
#   include/pcre2.h, lib/libpcre2-8.a   PCRE2 cross-built from Debian's pcre2 source package
#   lib/cmake/GTest                 GoogleTest cross-built from Debian's googletest sources
# SHA-256 comes from Windows (CNG: bcrypt), not OpenSSL (platform/windows/sha256.cpp).

find_path(MOETIER_FMT_INCLUDE fmt/format.h REQUIRED)
add_library(fmt::fmt INTERFACE IMPORTED)
set_target_properties(fmt::fmt PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${MOETIER_FMT_INCLUDE}"
                                          INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)

find_path(MOETIER_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${MOETIER_JSON_INCLUDE}")

find_path(MOETIER_PCRE2_INCLUDE pcre2.h REQUIRED)
find_library(MOETIER_PCRE2_LIBRARY NAMES pcre2-8-static pcre2-8 REQUIRED)
add_library(PkgConfig::PCRE2 INTERFACE IMPORTED)
# PCRE2_STATIC: the declarations without __declspec(dllimport).
set_target_properties(PkgConfig::PCRE2 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${MOETIER_PCRE2_INCLUDE}"
                                                  INTERFACE_COMPILE_DEFINITIONS PCRE2_STATIC
                                                  INTERFACE_LINK_LIBRARIES "${MOETIER_PCRE2_LIBRARY}")

# cpp-httplib header-only, plain HTTP (no OpenSSL, zlib or brotli), on Winsock.
find_path(MOETIER_HTTPLIB_INCLUDE httplib.h REQUIRED)
add_library(PkgConfig::HTTPLIB INTERFACE IMPORTED)
set_target_properties(PkgConfig::HTTPLIB PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${MOETIER_HTTPLIB_INCLUDE}"
                                                    INTERFACE_LINK_LIBRARIES "ws2_32")

# Windows 10 APIs (PrefetchVirtualMemory, console virtual-terminal mode, ...); no min/max
# macros from <windows.h>, and its lean variant (httplib.h includes it too).
add_compile_definitions(_WIN32_WINNT=0x0A00 NOMINMAX WIN32_LEAN_AND_MEAN)
# The C runtime's thread-safe gmtime_r/localtime_r (MinGW-w64 wraps gmtime_s/localtime_s).
add_compile_definitions(_POSIX_THREAD_SAFE_FUNCTIONS=200112L)
