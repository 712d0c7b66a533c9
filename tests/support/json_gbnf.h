// A GBNF grammar of JSON (RFC 8259's shape, white space wherever JSON allows it), written for
// the grammar-engine tests: unbounded, unlike the server's own json_any_gbnf().
#pragma once

namespace moetier::testing {

inline constexpr const char* kJsonGbnf = R"(
root   ::= ws value ws
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" (
             [^"\\\x00-\x1F] |
             "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
           )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
)";

}  // namespace moetier::testing
