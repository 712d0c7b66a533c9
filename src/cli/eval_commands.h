// The `moetier eval` suites (see docs/evaluation.md).
#pragma once

namespace moetier {

int cmd_eval_longcontext(int argc, char** argv);

}  // namespace moetier
