// Checks on a lowered Grammar that the parser runs before returning it.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/gbnf.h"

namespace moetier::grammar {

// Rejects left recursion: a rule that can reach itself again, before any code point is
// consumed, through a reference that is not the last item of its alternative (expr ::= expr
// "+" term). Such a cycle would make the matcher's stacks grow without bound. A cycle made
// only of last-item references (R ::= x? R | "", from (x?)*) is a plain loop and is allowed.
// `where[r]` is the "LINE:COL" of rule r's definition, used in the message.
Status check_left_recursion(const Grammar& grammar, const std::vector<std::string>& where);

// nullable[r]: rule r can match the empty string.
std::vector<bool> nullable_rules(const Grammar& grammar);

}  // namespace moetier::grammar
