// JSON Schema -> GBNF, for response_format {type: json_schema} and for tool-call arguments.
//
// Supported: type (and type arrays), properties/required/additionalProperties, items,
// prefixItems (and draft-4 tuple `items` + additionalItems), minItems/maxItems, enum, const,
// anyOf/oneOf (oneOf's exclusivity is not enforced), allOf (merged into one schema), local
// $ref (#/$defs/..., #/definitions/..., any #/pointer; recursion allowed), string
// minLength/maxLength/pattern/format (date, time, date-time, uuid), integer and number
// minimum/maximum/exclusiveMinimum/exclusiveMaximum (see below), nullable (OpenAPI).
//
// Choices (each keeps every accepted output valid against the schema):
//  * Objects: required properties first, then optional ones, each group in the order of
//    `properties`. Missing additionalProperties follows JSON Schema (extra keys allowed)
//    unless JsonSchemaOptions says otherwise; extra keys come after the declared ones, and
//    the grammar does not stop an extra key from repeating a declared name.
//  * Numbers: no exponent when bounded; number bounds must be integers (0..1, 1..100 are
//    exact); a fractional number bound is an error. Integers and integer parts have at most
//    16 digits, fractions at most 16, so a sampler cannot run on forever.
//  * Whitespace between tokens is bounded ([ \t\n]{0,N}), never before the first token.
//  * Unknown `format` values are ignored: JSON Schema defines format as an annotation.
//  * Keywords that would change the accepted language but have no grammar here (not,
//    if/then/else, patternProperties, uniqueItems, multipleOf, min/maxProperties, contains,
//    ...) are errors naming the keyword and where it is. Other unknown keys are ignored,
//    like descriptive ones (title, description, examples, default, $schema, $id, $comment).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/gbnf_writer.h"
#include "grammar/schema_pattern.h"

namespace moetier::grammar {

struct JsonSchemaOptions {
  // Whitespace between JSON tokens: nothing, one space, or one newline and an indent of at
  // most this many spaces or tabs. Tight on purpose: a sampler left free to emit whitespace
  // can spend a whole token budget on it and never close the value.
  int max_indent = 20;
  bool extra_properties_by_default = true;  // objects without additionalProperties
};

// A complete grammar (with `root`) for JSON values matching `schema`.
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});

// A complete grammar for any JSON object (response_format {type: json_object}).
std::string json_any_gbnf(const JsonSchemaOptions& options = {});

// Adds schema rules to a GbnfWriter, for grammars that embed several schemas (tool calls).
class SchemaConverter {
 public:
  SchemaConverter(GbnfWriter& out, JsonSchemaOptions options) : out_(out), options_(options) {}

  // A GBNF expression (often a rule name) for JSON values matching `schema`; `$ref`s
  // resolve against `document` (default: `schema` itself), which must outlive the
  // converter. Rule names derive from `name_hint`.
  Result<std::string> add_schema(const nlohmann::ordered_json& schema, std::string_view name_hint,
                                 const nlohmann::ordered_json* document = nullptr);

  // An expression for a string value written raw (not as a JSON literal), e.g. a Qwen3.5
  // <parameter=...> value: enum/const/pattern/format/minLength/maxLength apply to the raw
  // characters; `plain` is the expression used for an unconstrained string. Length limits
  // count characters other than '<' (raw text must not be able to close the parameter).
  Result<std::string> add_raw_string(const nlohmann::ordered_json& schema, std::string_view name_hint,
                                     const std::string& plain, const nlohmann::ordered_json* document = nullptr);

  // Rule names of the fixed pieces.
  std::string ws();
  std::string any_value();
  std::string any_object();

 private:
  Result<std::string> build(const nlohmann::ordered_json& s, const std::string& hint, const std::string& path);
  Result<std::string> build_raw_string(const nlohmann::ordered_json& schema, std::string_view name_hint,
                                       const std::string& plain);
  Result<std::string> rule(const nlohmann::ordered_json& s, const std::string& hint, const std::string& path);
  Result<std::string> build_typed(const nlohmann::ordered_json& s, const std::string& type, const std::string& hint,
                                  const std::string& path);
  Result<std::string> build_object(const nlohmann::ordered_json& s, const std::string& hint, const std::string& path);
  Result<std::string> build_array(const nlohmann::ordered_json& s, const std::string& hint, const std::string& path);
  Result<std::string> build_string(const nlohmann::ordered_json& s, StringForm form, const std::string& path);
  Result<std::string> build_number(const nlohmann::ordered_json& s, bool integer, const std::string& path);
  Result<std::string> build_ref(const nlohmann::ordered_json& s, const std::string& hint, const std::string& path);
  Result<nlohmann::ordered_json> resolve(const std::string& ref, const std::string& path) const;
  Result<nlohmann::ordered_json> merge_all_of(const nlohmann::ordered_json& s, const std::string& path) const;
  std::string string_char(StringForm form);

  GbnfWriter& out_;
  JsonSchemaOptions options_;
  const nlohmann::ordered_json* doc_ = nullptr;   // the schema $refs resolve against
  std::map<std::string, std::string> ref_rules_;  // "<document address>#/pointer" -> rule name
};

}  // namespace moetier::grammar
