// Facts of the build, for records that must say what was measured (bench).
#pragma once

namespace moetier {

// The git commit the binary was built from (12 hex digits, "-dirty" when tracked files
// had changes), or "" when it was not built from a git checkout. Generated at every build
// by cmake/build_info.cmake.
const char* build_git_commit();

}  // namespace moetier
