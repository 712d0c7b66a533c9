#include "grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "grammar/number_range.h"

namespace moetier::grammar {

using nlohmann::ordered_json;

namespace {

// Keywords that change which values are valid but have no grammar here: an error, never
// silently dropped.
constexpr std::string_view kUnsupported[] = {
    "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies", "patternProperties",
    "propertyNames", "minProperties", "maxProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
    "minContains", "maxContains", "multipleOf", "$dynamicRef", "$recursiveRef"};

// Keys that say nothing about validity (and $defs, which only matter through $ref).
constexpr std::string_view kDescriptive[] = {"title", "description", "examples", "default", "$schema", "$id",
                                             "$comment", "$defs", "definitions", "deprecated", "readOnly",
                                             "writeOnly", "$anchor", "contentMediaType", "contentEncoding"};

bool is_descriptive(const std::string& key) {
  return std::find(std::begin(kDescriptive), std::end(kDescriptive), key) != std::end(kDescriptive);
}

bool is_rule_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

std::string group(const std::string& expr) { return is_rule_name(expr) ? expr : "(" + expr + ")"; }

std::string child_hint(const std::string& parent, const std::string& key) {
  return parent == "root" ? key : parent + "-" + key;
}

// The JSON text of a value, as one GBNF literal (enum/const).
std::string json_literal(const ordered_json& v) {
  return gbnf_literal(v.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
}

// Integral JSON number within the digit cap, for bounds.
std::optional<int64_t> integral(const ordered_json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 1e15) return std::nullopt;
  return static_cast<int64_t>(d);
}

// minItems/maxItems/minLength/maxLength: a whole number from 0 to the largest repetition a
// grammar can hold (GrammarLimits::max_repetition); anything else is an error, not ignored.
constexpr size_t kMaxCount = 10000;

Result<std::optional<size_t>> count(const ordered_json& s, const char* key, const std::string& path) {
  auto it = s.find(key);
  if (it == s.end()) return std::optional<size_t>();
  const double d = it->is_number() ? it->get<double>() : -1;
  if (!(d >= 0 && d == std::floor(d))) {
    return Status::bad_input(fmt::format("{}: '{}' must be a non-negative integer", path, key));
  }
  if (d > static_cast<double>(kMaxCount)) {
    return Status::bad_input(fmt::format("{}: '{}' above {} is not supported (a grammar repeats at most that often)",
                                         path, key, kMaxCount));
  }
  return std::optional<size_t>(static_cast<size_t>(d));
}

// "{m,n}" style suffix for repetition counts; "" for exactly one.
std::string repeat(size_t lo, std::optional<size_t> hi) {
  if (hi && *hi == lo) return lo == 1 ? "" : fmt::format("{{{}}}", lo);
  if (!hi) return lo == 0 ? "*" : lo == 1 ? "+" : fmt::format("{{{},}}", lo);
  if (lo == 0 && *hi == 1) return "?";
  return fmt::format("{{{},{}}}", lo, *hi);
}

}  // namespace

std::string SchemaConverter::ws() {
  return out_.add_named("ws", fmt::format("(\" \" | \"\\n\" [ \\t]{{0,{}}})?", options_.max_indent));
}

std::string SchemaConverter::string_char(StringForm form) {
  if (form == StringForm::kRaw) return out_.add_named("raw-char", "[^<]");
  // Any character but " \ and controls, or an escape.
  return out_.add_named("char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})");
}

std::string SchemaConverter::any_value() {
  const std::string w = ws();
  const std::string ch = string_char(StringForm::kJson);
  out_.add_named("string", fmt::format("\"\\\"\" {}* \"\\\"\"", ch));
  out_.add_named("number", fmt::format("\"-\"? (\"0\" | [1-9] [0-9]{{0,{}}}) (\".\" [0-9]{{1,{}}})? ([eE] [-+]? [0-9]{{1,3}})?",
                                       kMaxDigits - 1, kMaxDigits));
  out_.add_named("boolean", "\"true\" | \"false\"");
  out_.add_named("null", "\"null\"");
  out_.add_named("value", "object | array | string | number | boolean | null");
  out_.add_named("object", fmt::format("\"{{\" {0} (string {0} \":\" {0} value {0} (\",\" {0} string {0} \":\" {0} value {0})*)? \"}}\"", w));
  out_.add_named("array", fmt::format("\"[\" {0} (value {0} (\",\" {0} value {0})*)? \"]\"", w));
  return "value";
}

std::string SchemaConverter::any_object() {
  any_value();
  return "object";
}

Result<std::string> SchemaConverter::add_schema(const ordered_json& schema, std::string_view name_hint,
                                                const ordered_json* document) {
  doc_ = document ? document : &schema;
  // A schema is client input: a keyword with a value of the wrong JSON type (a string where
  // a number belongs) is the client's error, whatever accessor meets it first.
  try {
    return build(schema, std::string(name_hint), "#");
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(fmt::format("a schema keyword has a value of the wrong type ({})", e.what()));
  }
}

Result<std::string> SchemaConverter::rule(const ordered_json& s, const std::string& hint, const std::string& path) {
  ASSIGN_OR_RETURN(std::string body, build(s, hint, path));
  if (is_rule_name(body)) return body;
  return out_.add_rule(hint, body);
}

Result<ordered_json> SchemaConverter::resolve(const std::string& ref, const std::string& path) const {
  if (ref.empty() || ref[0] != '#') {
    return Status::bad_input(fmt::format("{}: only local $ref values (\"#/$defs/...\") are supported, got \"{}\"", path, ref));
  }
  const ordered_json* cur = doc_;
  std::string pointer = ref.substr(1);
  size_t pos = 0;
  while (pos < pointer.size()) {
    if (pointer[pos] != '/') return Status::bad_input(fmt::format("{}: malformed $ref \"{}\"", path, ref));
    size_t next = pointer.find('/', pos + 1);
    if (next == std::string::npos) next = pointer.size();
    std::string token = pointer.substr(pos + 1, next - pos - 1);
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {  // ~1 is '/', ~0 is '~'
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[++i] == '0' ? '~' : '/';
      } else {
        key += token[i];
      }
    }
    if (cur->is_object() && cur->contains(key)) {
      cur = &(*cur)[key];
    } else if (cur->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) &&
               std::stoul(key) < cur->size()) {
      cur = &(*cur)[std::stoul(key)];
    } else {
      return Status::bad_input(fmt::format("{}: $ref \"{}\" points to nothing", path, ref));
    }
    pos = next;
  }
  return *cur;
}

Result<ordered_json> SchemaConverter::merge_all_of(const ordered_json& s, const std::string& path) const {
  ordered_json merged = s;
  merged.erase("allOf");
  const ordered_json& parts = s["allOf"];
  if (!parts.is_array() || parts.empty()) return Status::bad_input(fmt::format("{}: 'allOf' must be a non-empty array", path));
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string where = fmt::format("{}/allOf/{}", path, i);
    ordered_json part = parts[i];
    if (part.is_boolean() && part.get<bool>()) continue;
    if (!part.is_object()) return Status::bad_input(fmt::format("{}: must be a schema object", where));
    while (part.contains("$ref")) {  // merge what the reference points to (one level)
      ASSIGN_OR_RETURN(ordered_json target, resolve(part["$ref"].is_string() ? part["$ref"].get<std::string>() : "", where));
      part.erase("$ref");
      for (auto& [k, v] : target.items()) {
        if (!part.contains(k)) part[k] = v;
      }
    }
    if (part.contains("allOf")) {
      ASSIGN_OR_RETURN(part, merge_all_of(part, where));
    }
    for (auto& [key, value] : part.items()) {
      if (!merged.contains(key) || is_descriptive(key)) {
        if (!merged.contains(key)) merged[key] = value;
        continue;
      }
      ordered_json& cur = merged[key];
      if (cur == value) continue;
      if (key == "properties" && cur.is_object() && value.is_object()) {
        for (auto& [p, ps] : value.items()) {
          cur[p] = cur.contains(p) ? ordered_json{{"allOf", {cur[p], ps}}} : ps;
        }
      } else if (key == "required" && cur.is_array() && value.is_array()) {
        for (auto& r : value) {
          if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
        }
      } else if (key == "type") {
        auto as_set = [](const ordered_json& t) {
          std::vector<std::string> out;
          if (t.is_string()) out.push_back(t.get<std::string>());
          if (t.is_array()) for (auto& x : t) if (x.is_string()) out.push_back(x.get<std::string>());
          return out;
        };
        ordered_json both = ordered_json::array();
        const auto b = as_set(value);
        for (auto& t : as_set(cur)) {
          // "integer" is a subset of "number".
          if (std::find(b.begin(), b.end(), t) != b.end() || (t == "integer" && std::find(b.begin(), b.end(), "number") != b.end())) {
            both.push_back(t);
          } else if (t == "number" && std::find(b.begin(), b.end(), "integer") != b.end()) {
            both.push_back("integer");
          }
        }
        if (both.empty()) return Status::bad_input(fmt::format("{}: 'allOf' parts have no 'type' in common", where));
        cur = both.size() == 1 ? both[0] : both;
      } else if ((key == "minimum" || key == "minLength" || key == "minItems" || key == "exclusiveMinimum") &&
                 cur.is_number() && value.is_number()) {
        if (value.get<double>() > cur.get<double>()) cur = value;
      } else if ((key == "maximum" || key == "maxLength" || key == "maxItems" || key == "exclusiveMaximum") &&
                 cur.is_number() && value.is_number()) {
        if (value.get<double>() < cur.get<double>()) cur = value;
      } else if (key == "additionalProperties" || key == "items") {
        if (cur.is_boolean() && !cur.get<bool>()) continue;
        cur = value.is_boolean() && !value.get<bool>() ? value : ordered_json{{"allOf", {cur, value}}};
      } else {
        return Status::bad_input(fmt::format("{}: 'allOf' parts give different values for '{}'; cannot merge them", where, key));
      }
    }
  }
  return merged;
}

Result<std::string> SchemaConverter::build(const ordered_json& s, const std::string& hint, const std::string& path) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return any_value();
    return Status::bad_input(fmt::format("{}: the schema 'false' accepts no value", path));
  }
  if (!s.is_object()) return Status::bad_input(fmt::format("{}: a schema must be an object or a boolean", path));
  for (auto& [key, value] : s.items()) {
    const bool unsupported =
        std::find(std::begin(kUnsupported), std::end(kUnsupported), key) != std::end(kUnsupported) ||
        (key == "uniqueItems" && value == true);
    if (unsupported) {
      return Status::bad_input(fmt::format("{}: JSON Schema keyword '{}' is not supported for grammar-constrained output", path, key));
    }
  }
  if (s.contains("$ref")) return build_ref(s, hint, path);
  if (s.contains("allOf")) {
    ASSIGN_OR_RETURN(ordered_json merged, merge_all_of(s, path));
    return build(merged, hint, path);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const ordered_json& branches = s[key];
    if (!branches.is_array() || branches.empty()) return Status::bad_input(fmt::format("{}: '{}' must be a non-empty array", path, key));
    // Keywords next to anyOf apply to every branch: merge them in (allOf semantics).
    ordered_json siblings = s;
    siblings.erase(key);
    bool has_siblings = false;
    for (auto& [k, v] : siblings.items()) has_siblings |= !is_descriptive(k);
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string where = fmt::format("{}/{}/{}", path, key, i);
      ordered_json branch = branches[i];
      if (has_siblings) branch = ordered_json{{"allOf", {siblings, branch}}};
      ASSIGN_OR_RETURN(std::string alt, rule(branch, fmt::format("{}-{}", hint, i), where));
      alts.push_back(alt);
    }
    return alternatives(alts);
  }
  if (s.contains("const")) return json_literal(s["const"]);
  if (s.contains("enum")) {
    const ordered_json& values = s["enum"];
    if (!values.is_array() || values.empty()) return Status::bad_input(fmt::format("{}: 'enum' must be a non-empty array", path));
    std::vector<std::string> alts;
    for (auto& v : values) alts.push_back(json_literal(v));
    return alternatives(alts);
  }
  if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>()) {
    ordered_json inner = s;
    inner.erase("nullable");
    ASSIGN_OR_RETURN(std::string expr, build(inner, hint, path));
    any_value();
    return group(expr) + " | null";
  }

  // The types this schema allows; none given: guess from the keywords, else anything.
  std::vector<std::string> types;
  if (auto it = s.find("type"); it != s.end()) {
    if (it->is_string()) types.push_back(it->get<std::string>());
    else if (it->is_array()) for (auto& t : *it) types.push_back(t.is_string() ? t.get<std::string>() : "?");
    else return Status::bad_input(fmt::format("{}: 'type' must be a string or an array of strings", path));
    if (types.empty()) return Status::bad_input(fmt::format("{}: 'type' is an empty array", path));
  } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
    types.push_back("array");
  } else if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
    types.push_back("string");
  } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
    types.push_back("number");
  } else {
    return any_value();
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    ASSIGN_OR_RETURN(std::string expr, build_typed(s, t, types.size() > 1 ? hint + "-" + t : hint, path));
    alts.push_back(types.size() > 1 ? group(expr) : expr);
  }
  return alternatives(alts);
}

Result<std::string> SchemaConverter::build_typed(const ordered_json& s, const std::string& type, const std::string& hint,
                                                 const std::string& path) {
  if (type == "object") return build_object(s, hint, path);
  if (type == "array") return build_array(s, hint, path);
  if (type == "string") return build_string(s, StringForm::kJson, path);
  if (type == "integer") return build_number(s, true, path);
  if (type == "number") return build_number(s, false, path);
  any_value();
  if (type == "boolean") return std::string("boolean");
  if (type == "null") return std::string("null");
  return Status::bad_input(fmt::format("{}: unknown type \"{}\"", path, type));
}

Result<std::string> SchemaConverter::build_ref(const ordered_json& s, const std::string& hint, const std::string& path) {
  if (!s["$ref"].is_string()) return Status::bad_input(fmt::format("{}: '$ref' must be a string", path));
  const std::string ref = s["$ref"].get<std::string>();
  bool has_siblings = false;
  for (auto& [k, v] : s.items()) has_siblings |= k != "$ref" && !is_descriptive(k);
  if (has_siblings) {
    // $ref next to other keywords (allowed since 2019-09): both apply.
    ordered_json rest = s;
    rest.erase("$ref");
    return build(ordered_json{{"allOf", {ordered_json{{"$ref", ref}}, rest}}}, hint, path);
  }
  const std::string key = fmt::format("{}{}", static_cast<const void*>(doc_), ref);
  if (auto it = ref_rules_.find(key); it != ref_rules_.end()) return it->second;
  ASSIGN_OR_RETURN(ordered_json target, resolve(ref, path));
  const std::string last = ref.substr(ref.find_last_of("/#") + 1);
  const std::string name = out_.reserve(last.empty() ? "ref" : last);
  ref_rules_[key] = name;  // before building: a recursive reference finds the name
  ASSIGN_OR_RETURN(std::string body, build(target, name, ref));
  out_.define(name, body);
  return name;
}

Result<std::string> SchemaConverter::build_object(const ordered_json& s, const std::string& hint, const std::string& path) {
  const std::string w = ws();
  static const ordered_json kEmpty = ordered_json::object();
  const ordered_json& props = s.contains("properties") ? s["properties"] : kEmpty;
  if (!props.is_object()) return Status::bad_input(fmt::format("{}: 'properties' must be an object", path));
  std::vector<std::string> required;
  if (auto it = s.find("required"); it != s.end()) {
    if (!it->is_array()) return Status::bad_input(fmt::format("{}: 'required' must be an array of names", path));
    for (auto& r : *it) {
      if (!r.is_string()) return Status::bad_input(fmt::format("{}: 'required' must be an array of names", path));
      required.push_back(r.get<std::string>());
    }
  }
  // Extra keys: additionalProperties false / true / a schema; missing per the options.
  ordered_json extra = options_.extra_properties_by_default;
  if (auto it = s.find("additionalProperties"); it != s.end()) extra = *it;
  const bool extra_allowed = !(extra.is_boolean() && !extra.get<bool>());

  auto member = [&](const std::string& name, const ordered_json& schema) -> Result<std::string> {
    ASSIGN_OR_RETURN(std::string value, rule(schema, child_hint(hint, name), path + "/properties/" + name));
    return fmt::format("{} {} \":\" {} {} {}", json_literal(name), w, w, value, w);
  };
  std::vector<std::string> req_members, opt_members;
  auto is_required = [&](const std::string& n) { return std::find(required.begin(), required.end(), n) != required.end(); };
  for (auto& [name, schema] : props.items()) {
    if (!is_required(name)) continue;
    ASSIGN_OR_RETURN(std::string m, member(name, schema));
    req_members.push_back(out_.add_rule(child_hint(hint, name) + "-kv", m));
  }
  for (const std::string& name : required) {  // required but not described: the extra schema
    if (props.contains(name)) continue;
    if (!extra_allowed) {
      return Status::bad_input(fmt::format("{}: '{}' is required but not in 'properties' and additionalProperties is false", path, name));
    }
    ASSIGN_OR_RETURN(std::string m, member(name, extra.is_object() ? extra : ordered_json(true)));
    req_members.push_back(out_.add_rule(child_hint(hint, name) + "-kv", m));
  }
  for (auto& [name, schema] : props.items()) {
    if (is_required(name)) continue;
    ASSIGN_OR_RETURN(std::string m, member(name, schema));
    opt_members.push_back(out_.add_rule(child_hint(hint, name) + "-kv", m));
  }
  std::string extra_member;
  if (extra_allowed) {
    std::string value;
    if (extra.is_object()) {
      ASSIGN_OR_RETURN(value, rule(extra, child_hint(hint, "additional"), path + "/additionalProperties"));
    } else {
      value = any_value();
    }
    any_value();
    extra_member = out_.add_rule(child_hint(hint, "additional-kv"), fmt::format("string {} \":\" {} {} {}", w, w, value, w));
  }

  // Members in order: required (all), optional (each or not), extra (any number).
  const std::string comma = fmt::format("\",\" {} ", w);
  const std::string extra_tail = extra_member.empty() ? "" : fmt::format("({}{})*", comma, extra_member);
  std::string members;
  if (!req_members.empty()) {
    members = req_members[0];
    for (size_t i = 1; i < req_members.size(); ++i) members += " " + comma + req_members[i];
    for (auto& m : opt_members) members += fmt::format(" ({}{})?", comma, m);
    if (!extra_tail.empty()) members += " " + extra_tail;
    return fmt::format("\"{{\" {} {} \"}}\"", w, members);
  }
  // No required member: the first one present has no comma before it.
  std::vector<std::string> firsts;
  for (size_t i = 0; i < opt_members.size(); ++i) {
    std::string alt = opt_members[i];
    for (size_t j = i + 1; j < opt_members.size(); ++j) alt += fmt::format(" ({}{})?", comma, opt_members[j]);
    if (!extra_tail.empty()) alt += " " + extra_tail;
    firsts.push_back(alt);
  }
  if (!extra_member.empty()) firsts.push_back(extra_member + " " + extra_tail);
  if (firsts.empty()) return fmt::format("\"{{\" {} \"}}\"", w);
  return fmt::format("\"{{\" {} ({})? \"}}\"", w, alternatives(firsts));
}

Result<std::string> SchemaConverter::build_array(const ordered_json& s, const std::string& hint, const std::string& path) {
  const std::string w = ws();
  ordered_json prefix = s.value("prefixItems", ordered_json::array());
  ordered_json items = s.contains("items") ? s["items"] : ordered_json(true);
  if (items.is_array()) {  // draft 4-7 tuples: items [...] and additionalItems
    prefix = items;
    items = s.contains("additionalItems") ? s["additionalItems"] : ordered_json(true);
  }
  if (!prefix.is_array()) return Status::bad_input(fmt::format("{}: 'prefixItems' must be an array", path));
  ASSIGN_OR_RETURN(const std::optional<size_t> min_items_given, count(s, "minItems", path));
  ASSIGN_OR_RETURN(std::optional<size_t> max_items, count(s, "maxItems", path));
  const size_t min_items = min_items_given.value_or(0);
  const bool tail_allowed = !(items.is_boolean() && !items.get<bool>());
  if (!tail_allowed) max_items = std::min(max_items.value_or(prefix.size()), prefix.size());
  if (max_items && *max_items < min_items) return Status::bad_input(fmt::format("{}: maxItems is less than minItems", path));

  std::vector<std::string> elems;  // one per prefix position
  for (size_t i = 0; i < prefix.size() && (!max_items || i < *max_items); ++i) {
    ASSIGN_OR_RETURN(std::string e, rule(prefix[i], fmt::format("{}-{}", hint, i), fmt::format("{}/prefixItems/{}", path, i)));
    elems.push_back(e);
  }
  std::string item;
  if (tail_allowed && (!max_items || *max_items > elems.size())) {
    ASSIGN_OR_RETURN(item, rule(items, hint + "-item", path + "/items"));
  }
  if (max_items && *max_items == 0) return fmt::format("\"[\" {} \"]\"", w);
  const std::string comma = fmt::format("\",\" {} ", w);
  // Position p onwards (p >= 1 has a comma first), innermost first: prefix elements nest as
  // optional groups once minItems is met; the homogeneous tail is one repetition.
  std::string rest;
  if (!item.empty()) {
    const size_t p = elems.size();
    const size_t lo = min_items > p ? min_items - p : 0;
    std::optional<size_t> hi;
    if (max_items) hi = *max_items - p;
    if (p == 0) {
      // [ item (, item){lo-1, hi-1} ]
      std::optional<size_t> hi1;
      if (hi) hi1 = *hi - 1;
      const std::string inner = fmt::format("{} {}", item, w) +
                                (hi1 && *hi1 == 0 ? "" : fmt::format(" ({}{} {}){}", comma, item, w, repeat(lo > 0 ? lo - 1 : 0, hi1)));
      return fmt::format("\"[\" {} {} \"]\"", w, lo == 0 ? "(" + inner + ")?" : inner);
    }
    rest = fmt::format("({}{} {}){}", comma, item, w, repeat(lo, hi));
  }
  for (size_t i = elems.size(); i-- > 0;) {
    std::string cur = fmt::format("{}{} {}", i == 0 ? "" : comma, elems[i], w) + (rest.empty() ? "" : " " + rest);
    rest = i + 1 > min_items ? "(" + cur + ")?" : cur;
  }
  return fmt::format("\"[\" {} {} \"]\"", w, rest);
}

Result<std::string> SchemaConverter::build_string(const ordered_json& s, StringForm form, const std::string& path) {
  const std::string quote = form == StringForm::kJson ? "\"\\\"\" " : "";
  const std::string end_quote = form == StringForm::kJson ? " \"\\\"\"" : "";
  ASSIGN_OR_RETURN(const std::optional<size_t> min_len, count(s, "minLength", path));
  ASSIGN_OR_RETURN(const std::optional<size_t> max_len, count(s, "maxLength", path));
  std::string format = s.contains("format") && s["format"].is_string() ? s["format"].get<std::string>() : "";
  static const std::set<std::string> kFormats = {"date", "time", "date-time", "uuid"};
  if (!kFormats.count(format)) format.clear();  // other formats are annotations
  const bool has_pattern = s.contains("pattern");
  if (has_pattern + !format.empty() + (min_len || max_len) > 1) {
    return Status::bad_input(fmt::format("{}: combining 'pattern', 'format' and minLength/maxLength in one string schema is not supported", path));
  }
  if (has_pattern) {
    if (!s["pattern"].is_string()) return Status::bad_input(fmt::format("{}: 'pattern' must be a string", path));
    auto expr = pattern_to_gbnf(s["pattern"].get<std::string>(), form, string_char(form));
    if (!expr.is_ok()) return expr.status().with_context(path);
    return quote + out_.add_rule("pattern", *expr) + end_quote;
  }
  if (!format.empty()) {
    const std::string date = out_.add_named("date", "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])");
    const std::string time = out_.add_named(
        "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? (\"Z\" | (\"+\" | \"-\") ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])");
    std::string rule_name;
    if (format == "date") rule_name = date;
    if (format == "time") rule_name = time;
    if (format == "date-time") rule_name = out_.add_named("date-time", date + " \"T\" " + time);
    if (format == "uuid") {
      rule_name = out_.add_named("uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}");
    }
    return quote + rule_name + end_quote;
  }
  if (min_len && max_len && *max_len < *min_len) return Status::bad_input(fmt::format("{}: maxLength is less than minLength", path));
  const std::string ch = string_char(form);
  if (form == StringForm::kJson && !min_len && !max_len) {
    any_value();
    return std::string("string");
  }
  return quote + ch + repeat(min_len.value_or(0), max_len) + end_quote;
}

Result<std::string> SchemaConverter::add_raw_string(const ordered_json& schema, std::string_view name_hint,
                                                    const std::string& plain, const ordered_json* document) {
  doc_ = document ? document : &schema;
  try {
    return build_raw_string(schema, name_hint, plain);
  } catch (const nlohmann::json::exception& e) {
    return Status::bad_input(fmt::format("a schema keyword has a value of the wrong type ({})", e.what()));
  }
}

Result<std::string> SchemaConverter::build_raw_string(const ordered_json& schema, std::string_view name_hint,
                                                      const std::string& plain) {
  for (const char* key : {"const", "enum"}) {
    if (!schema.contains(key)) continue;
    const ordered_json values = std::string(key) == "const" ? ordered_json::array({schema[key]}) : schema[key];
    std::vector<std::string> alts;
    for (auto& v : values) {
      alts.push_back(v.is_string() ? gbnf_literal(v.get<std::string>()) : json_literal(v));
    }
    if (alts.empty()) return Status::bad_input(fmt::format("#: '{}' must be a non-empty array", key));
    return out_.add_rule(name_hint, alternatives(alts));
  }
  const bool constrained = schema.contains("pattern") || schema.contains("minLength") || schema.contains("maxLength") ||
                           (schema.contains("format") && schema["format"].is_string() &&
                            std::set<std::string>{"date", "time", "date-time", "uuid"}.count(schema["format"].get<std::string>()));
  if (!constrained) return plain;
  ASSIGN_OR_RETURN(std::string body, build_string(schema, StringForm::kRaw, "#"));
  return out_.add_rule(name_hint, body);
}

Result<std::string> SchemaConverter::build_number(const ordered_json& s, bool integer, const std::string& path) {
  // Bounds: minimum/maximum, exclusiveMinimum/Maximum as numbers (2019+) or booleans (draft 4).
  std::optional<NumberBound> lo, hi;
  for (bool upper : {false, true}) {
    const char* inclusive_key = upper ? "maximum" : "minimum";
    const char* exclusive_key = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    std::optional<NumberBound> bound;
    auto take = [&](const ordered_json& v, bool exclusive) -> Status {
      if (!v.is_number()) return Status::bad_input(fmt::format("{}: '{}' must be a number", path, exclusive ? exclusive_key : inclusive_key));
      double d = v.get<double>();
      if (integer) {  // integers: make the bound inclusive and integral
        d = upper ? (exclusive ? std::ceil(d) - 1 : std::floor(d)) : (exclusive ? std::floor(d) + 1 : std::ceil(d));
        exclusive = false;
      }
      auto n = integral(ordered_json(d));
      if (!n) {
        return Status::bad_input(fmt::format("{}: number bound {} is not supported in a grammar (use an integer bound with |bound| < 1e15)",
                                             path, v.dump()));
      }
      NumberBound b{*n, exclusive};
      // Keep the tighter of two bounds on one side.
      if (!bound || (upper ? (b.value < bound->value || (b.value == bound->value && b.exclusive))
                           : (b.value > bound->value || (b.value == bound->value && b.exclusive)))) {
        bound = b;
      }
      return Status::ok();
    };
    if (s.contains(inclusive_key)) RETURN_IF_ERROR(take(s[inclusive_key], false));
    if (s.contains(exclusive_key)) {
      const ordered_json& v = s[exclusive_key];
      if (v.is_boolean()) {
        if (v.get<bool>() && s.contains(inclusive_key)) RETURN_IF_ERROR(take(s[inclusive_key], true));
      } else {
        RETURN_IF_ERROR(take(v, true));
      }
    }
    (upper ? hi : lo) = bound;
  }
  if (lo && hi && (lo->value > hi->value || (lo->value == hi->value && (lo->exclusive || hi->exclusive)))) {
    return Status::bad_input(fmt::format("{}: the minimum is above the maximum; no number fits", path));
  }
  if (!lo && !hi) {
    if (!integer) {
      any_value();
      return std::string("number");
    }
    return out_.add_named("integer", fmt::format("\"-\"? (\"0\" | [1-9] [0-9]{{0,{}}})", kMaxDigits - 1));
  }
  std::optional<int64_t> ilo, ihi;
  if (integer) {
    if (lo) ilo = lo->value;
    if (hi) ihi = hi->value;
    return integer_range_gbnf(ilo, ihi);
  }
  return number_range_gbnf(lo, hi);
}

Result<std::string> json_schema_to_gbnf(const ordered_json& schema, const JsonSchemaOptions& options) {
  GbnfWriter out;
  SchemaConverter conv(out, options);
  ASSIGN_OR_RETURN(std::string root, conv.add_schema(schema, "root"));
  out.set_root(root);
  return out.str();
}

std::string json_any_gbnf(const JsonSchemaOptions& options) {
  GbnfWriter out;
  SchemaConverter conv(out, options);
  out.set_root(conv.any_object());
  return out.str();
}

}  // namespace moetier::grammar
