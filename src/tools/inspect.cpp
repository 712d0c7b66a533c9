// PLACEHOLDER: replaced by the real implementation.
#include "tools/commands.h"
namespace moetier { int cmd_inspect(int, char**) { return 1; } }
