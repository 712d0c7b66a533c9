// Parser: lexer segments -> statement tree. Every construct outside the supported subset is
// rejected here with its line:col (unknown or unsupported tags such as `{% include %}`,
// unknown filters and tests, `break` outside a loop), so rendering never meets it.
#pragma once

#include <vector>

#include "core/status.h"
#include "text/template/ast.h"
#include "text/template/lexer.h"

namespace moetier::text::jinja {

Result<StmtList> parse_template(const std::vector<Segment>& segments);

}  // namespace moetier::text::jinja
