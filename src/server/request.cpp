#include "server/request.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace moetier::server {

using nlohmann::ordered_json;

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) e[k] = v;
  }
  return {{"error", e}};
}

std::string dump_json(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
std::string dump_json(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

std::optional<ApiError> parse_json_body(const std::string& body, ordered_json& out) {
  if (body.empty()) return ApiError::bad_request("the request body is empty; send a JSON object");
  try {
    out = ordered_json::parse(body);
  } catch (const ordered_json::parse_error& e) {
    return ApiError::bad_request(fmt::format("the request body is not valid JSON (at byte {})", e.byte));
  } catch (const std::exception& e) {  // e.g. nesting too deep for the parser
    return ApiError::bad_request("the request body is not valid JSON");
  }
  if (!out.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  return std::nullopt;
}

namespace {

// Typed access to optional fields; the first error sticks and names the field.
class Fields {
 public:
  explicit Fields(const ordered_json& body) : body_(body) {}

  const ordered_json* get(const char* name) const {
    auto it = body_.find(name);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const char* name) const { return get(name) != nullptr; }

  void boolean(const char* name, bool& out) {
    const ordered_json* v = get(name);
    if (!v || error) return;
    if (!v->is_boolean()) return fail(name, fmt::format("'{}' must be true or false", name));
    out = v->get<bool>();
  }

  // Integers: JSON numbers with no fractional part, within [lo, hi].
  template <class Int>
  void integer(const char* name, Int& out, int64_t lo, int64_t hi) {
    const ordered_json* v = get(name);
    if (!v || error) return;
    int64_t value = 0;
    if (v->is_number_integer() || v->is_number_unsigned()) {
      if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return fail(name, fmt::format("'{}' must be an integer in [{}, {}]", name, lo, hi));
      }
      value = v->get<int64_t>();
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (!(std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)) {
        return fail(name, fmt::format("'{}' must be an integer", name));
      }
      value = static_cast<int64_t>(d);
    } else {
      return fail(name, fmt::format("'{}' must be an integer", name));
    }
    if (value < lo || value > hi) return fail(name, fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, value));
    out = static_cast<Int>(value);
  }

  void number(const char* name, float& out, double lo, double hi) {
    const ordered_json* v = get(name);
    if (!v || error) return;
    if (!v->is_number()) return fail(name, fmt::format("'{}' must be a number", name));
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) return fail(name, fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, d));
    out = static_cast<float>(d);
  }

  void string(const char* name, std::string& out) {
    const ordered_json* v = get(name);
    if (!v || error) return;
    if (!v->is_string()) return fail(name, fmt::format("'{}' must be a string", name));
    out = v->get<std::string>();
  }

  void fail(const char* name, std::string message) {
    if (!error) error = ApiError::bad_request(std::move(message), name);
  }

  std::optional<ApiError> error;

 private:
  const ordered_json& body_;
};

constexpr int64_t kMaxChoices = 16;

// logit_bias in llama-server's three forms: OpenAI's {"token id": bias}, and arrays of
// [token id, bias] or [string, bias] (every token of the string gets the bias). A bias of
// false bans the token. Token ids are checked against the vocabulary later.
void parse_logit_bias(Fields& f, GenerationRequest& r) {
  const ordered_json* lb = f.get("logit_bias");
  if (!lb || f.error) return;
  auto bias_value = [&](const ordered_json& v, float& out) {
    if (v.is_boolean() && !v.get<bool>()) {
      out = -INFINITY;
      return true;
    }
    if (!v.is_number() || !std::isfinite(v.get<double>())) return false;
    out = static_cast<float>(v.get<double>());
    return true;
  };
  auto add = [&](const ordered_json& key, const ordered_json& value) {
    LogitBiasEntry e;
    if (!bias_value(value, e.bias)) {
      return f.fail("logit_bias", "'logit_bias' values must be numbers (or false to ban a token)");
    }
    if (key.is_number_integer()) {
      e.token = key.get<int64_t>();
    } else if (key.is_string()) {
      const std::string& k = key.get_ref<const std::string&>();
      char* end = nullptr;
      const long long id = std::strtoll(k.c_str(), &end, 10);
      if (!k.empty() && end && *end == '\0') {
        e.token = id;
      } else if (k.empty()) {
        return f.fail("logit_bias", "'logit_bias' has an empty string");
      } else {
        e.text = k;
      }
    } else {
      return f.fail("logit_bias", "'logit_bias' keys must be token ids or strings");
    }
    r.logit_bias.push_back(std::move(e));
  };
  if (lb->is_object()) {
    for (const auto& [k, v] : lb->items()) add(ordered_json(k), v);
  } else if (lb->is_array()) {
    for (const auto& item : *lb) {
      if (!item.is_array() || item.size() != 2) {
        return f.fail("logit_bias", "'logit_bias' as an array holds [token id or string, bias] pairs");
      }
      add(item[0], item[1]);
      if (f.error) return;
    }
  } else {
    f.fail("logit_bias", "'logit_bias' must be an object {\"token id\": bias} or an array of [token, bias] pairs");
  }
}

// grammar (GBNF text), json_schema, response_format: at most one way to constrain the output.
void parse_constraints(Fields& f, GenerationRequest& r) {
  if (f.error) return;
  int n_given = 0;
  if (const ordered_json* g = f.get("grammar")) {
    if (!g->is_string()) return f.fail("grammar", "'grammar' must be a string (GBNF)");
    if (!g->get_ref<const std::string&>().empty()) {
      r.grammar = g->get<std::string>();
      ++n_given;
    }
  }
  if (const ordered_json* js = f.get("json_schema")) {
    if (!js->is_object() && !js->is_boolean()) return f.fail("json_schema", "'json_schema' must be a JSON schema object");
    r.json_schema = *js;
    ++n_given;
  }
  if (const ordered_json* rf = f.get("response_format")) {
    if (!rf->is_object()) return f.fail("response_format", "'response_format' must be an object with a 'type'");
    const auto type_it = rf->find("type");
    const std::string type = type_it != rf->end() && type_it->is_string() ? type_it->get<std::string>() : "";
    if (type == "text") {
      // free text: nothing to constrain
    } else if (type == "json_object") {
      // llama-server also takes a schema here
      if (auto it = rf->find("schema"); it != rf->end() && !it->is_null()) {
        if (!it->is_object()) return f.fail("response_format", "'response_format.schema' must be an object");
        r.json_schema = *it;
      } else {
        r.json_object = true;
      }
      ++n_given;
    } else if (type == "json_schema") {
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object()) {
        return f.fail("response_format", "'response_format.json_schema' must be an object with a 'schema'");
      }
      auto schema = js->find("schema");
      if (schema == js->end() || (!schema->is_object() && !schema->is_boolean())) {
        return f.fail("response_format", "'response_format.json_schema.schema' must be a JSON schema object");
      }
      r.json_schema = *schema;
      ++n_given;
    } else {
      return f.fail("response_format",
                    fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'", type));
    }
  }
  if (n_given > 1) f.fail("grammar", "give at most one of 'grammar', 'json_schema' and a JSON 'response_format'");
}

// llama-server sampling options moetier does not implement: refused unless they have the
// value that turns them off, so a request never silently gets other sampling than it asked.
void reject_unsupported_samplers(Fields& f) {
  struct Off {
    const char* name;
    double off;
  };
  static constexpr Off kOff[] = {{"typical_p", 1.0},        {"mirostat", 0.0},     {"dry_multiplier", 0.0},
                                 {"xtc_probability", 0.0},  {"dynatemp_range", 0.0}, {"top_n_sigma", -1.0}};
  for (const Off& o : kOff) {
    const ordered_json* v = f.get(o.name);
    if (!v || f.error) continue;
    const bool off = v->is_number() && (v->get<double>() == o.off || (o.off < 0 && v->get<double>() <= 0));
    if (!off) {
      f.fail(o.name, fmt::format("'{}' is not supported by moetier (only the value that turns it off, {})", o.name, o.off));
    }
  }
  // Other llama-server request options that change the output: refused when they ask for
  // anything (zero or a negative "disabled" value, an empty list or string is fine).
  static constexpr const char* kUnsupported[] = {"samplers", "t_max_predict_ms", "n_indent", "lora",
                                                 "adaptive_target"};
  for (const char* name : kUnsupported) {
    const ordered_json* v = f.get(name);
    if (!v || f.error) continue;
    const bool off = (v->is_number() && v->get<double>() <= 0) || (v->is_array() && v->empty()) ||
                     (v->is_string() && v->get_ref<const std::string&>().empty());
    if (!off) f.fail(name, fmt::format("'{}' is not supported by moetier", name));
  }
  if (const ordered_json* n = f.get("n_cmpl"); n && !f.error && !(n->is_number() && n->get<double>() == 1)) {
    f.fail("n_cmpl", "'n_cmpl' is not supported by moetier; use 'n' for several choices");
  }
}

// The fields /v1/chat/completions and /v1/completions share.
void parse_common(Fields& f, const RequestDefaults& d, GenerationRequest& r) {
  r.sampling = d.sampling;
  r.max_tokens = d.n_predict;
  f.string("model", r.model);
  f.boolean("stream", r.stream);
  // llama-server takes these on every generation endpoint.
  f.boolean("timings_per_token", r.timings_per_token);
  f.boolean("return_progress", r.return_progress);
  r.verbose = d.verbose;
  f.boolean("verbose", r.verbose);
  if (const ordered_json* so = f.get("stream_options")) {
    if (!so->is_object()) {
      f.fail("stream_options", "'stream_options' must be an object");
    } else if (auto it = so->find("include_usage"); it != so->end() && !it->is_null()) {
      if (!it->is_boolean()) {
        f.fail("stream_options", "'stream_options.include_usage' must be true or false");
      } else {
        r.include_usage = it->get<bool>();
      }
    }
  }
  // max_tokens (OpenAI), max_completion_tokens (its newer name), n_predict (llama.cpp).
  // Larger than the slot is allowed (clients send their own defaults, e.g. 32768): the
  // reply then ends when the slot is full (finish_reason length), as in llama-server.
  for (const char* name : {"n_predict", "max_tokens", "max_completion_tokens"}) {
    f.integer(name, r.max_tokens, -1, std::numeric_limits<int32_t>::max());
    if (f.error && f.error->param == name) {
      f.error->message = fmt::format("'{}' must be an integer from 0 to 2^31 - 1, or -1 for no limit", name);
    }
  }
  // As llama-server: the server's -n is a ceiling for every request, not only a default.
  if (d.n_predict >= 0 && (r.max_tokens < 0 || r.max_tokens > d.n_predict)) r.max_tokens = d.n_predict;
  f.number("temperature", r.sampling.temperature, 0.0, 1e6);
  f.number("top_p", r.sampling.top_p, 0.0, 1.0);
  f.integer("top_k", r.sampling.top_k, -1, std::numeric_limits<int32_t>::max());
  f.number("min_p", r.sampling.min_p, 0.0, 1.0);
  f.number("presence_penalty", r.sampling.presence_penalty, -2.0, 2.0);
  f.number("frequency_penalty", r.sampling.frequency_penalty, -2.0, 2.0);
  f.number("repeat_penalty", r.sampling.repeat_penalty, 1e-6, 1e6);
  f.integer("repeat_last_n", r.sampling.repeat_last_n, 0, d.n_ctx_slot);
  f.integer("min_keep", r.sampling.min_keep, 0, std::numeric_limits<int32_t>::max());
  if (const ordered_json* seed = f.get("seed")) {
    if (seed->is_number_integer() && seed->get<int64_t>() == -1) {
      r.sampling.seed = kRandomSeed;
    } else {
      int64_t s = 0;
      f.integer("seed", s, 0, 0xFFFFFFFELL);
      if (!f.error) r.sampling.seed = static_cast<uint32_t>(s);
    }
  }
  if (const ordered_json* stop = f.get("stop")) {
    auto add = [&](const ordered_json& s) {
      if (!s.is_string()) return f.fail("stop", "'stop' must be a string or an array of strings");
      if (!s.get_ref<const std::string&>().empty()) r.stop.push_back(s.get<std::string>());
    };
    if (stop->is_array()) {
      if (stop->size() > 16) f.fail("stop", "'stop' has more than 16 strings");
      for (const auto& s : *stop) add(s);
    } else {
      add(*stop);
    }
  }
  f.boolean("ignore_eos", r.ignore_eos);
  f.boolean("cache_prompt", r.cache_prompt);
  f.integer("n", r.n_choices, 1, kMaxChoices);
  if (f.error && f.error->param == "n") {
    f.error->message = fmt::format("'n' must be an integer from 1 to {} (choices per request)", kMaxChoices);
  }
  f.integer("id_slot", r.id_slot, -1, 1 << 20);
  f.integer("n_keep", r.n_keep, -1, std::numeric_limits<int32_t>::max());
  f.integer("n_discard", r.n_discard, 0, std::numeric_limits<int32_t>::max());
  f.boolean("post_sampling_probs", r.post_sampling_probs);
  parse_logit_bias(f, r);
  parse_constraints(f, r);
  reject_unsupported_samplers(f);
  std::string format = d.reasoning_format;
  f.string("reasoning_format", format);
  if (!f.error) {
    if (format == "auto" || format == "deepseek") {
      r.reasoning_format = ReasoningFormat::kAuto;
    } else if (format == "none") {
      r.reasoning_format = ReasoningFormat::kNone;
    } else {
      f.fail("reasoning_format", fmt::format("'reasoning_format' must be auto, deepseek or none, got '{}'", format));
    }
  }
  if (!f.error) {
    if (Status st = validate(r.sampling); !st) f.fail("", st.message());
  }
}

constexpr size_t kMaxPrompts = 16;

// `prompt` of /v1/completions and /completion: a string; token ids (/completion: ids and
// strings mixed, one prompt); or an array of such prompts (several, one choice each; a
// /completion array holding only strings is several prompts, as in llama-server). Also
// /completion's {"prompt_string": ...} object. Token ids are checked against the vocabulary
// later.
void parse_prompts(Fields& f, bool mixed, GenerationRequest& r) {
  const ordered_json* prompt = f.get("prompt");
  if (f.error) return;
  const char* expected = mixed ? "a string, token ids (mixed with strings), or an array of such prompts"
                               : "a string, an array of token ids, or an array of such prompts";
  if (!prompt) return f.fail("prompt", fmt::format("'prompt' is required: {}", expected));
  auto is_id = [](const ordered_json& t) {
    return t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() <= std::numeric_limits<int32_t>::max();
  };
  // One prompt: a non-empty string, or a non-empty list of ids (and strings when mixed).
  auto one = [&](const ordered_json& p) {
    if (p.is_object() && mixed) {  // llama-server's {"prompt_string": ..., "multimodal_data": [...]}
      if (p.contains("multimodal_data")) {
        return f.fail("prompt", "'prompt.multimodal_data': moetier serves text models only (no images or audio)");
      }
      auto ps = p.find("prompt_string");
      if (ps == p.end() || !ps->is_string() || ps->get_ref<const std::string&>().empty()) {
        return f.fail("prompt", "'prompt.prompt_string' must be a non-empty string");
      }
      r.prompts.push_back(*ps);
      return;
    }
    if (p.is_string()) {
      if (p.get_ref<const std::string&>().empty()) return f.fail("prompt", "'prompt' is empty");
      r.prompts.push_back(p);
      return;
    }
    if (!p.is_array() || p.empty()) return f.fail("prompt", fmt::format("'prompt' must be {}", expected));
    for (const auto& t : p) {
      if (!is_id(t) && !(mixed && t.is_string())) {
        return f.fail("prompt", mixed ? "'prompt' items must be token ids (non-negative integers) or strings"
                                      : "'prompt' token ids must be non-negative integers");
      }
    }
    r.prompts.push_back(p);
  };
  if (!prompt->is_array() || prompt->empty()) return one(*prompt);
  // Several prompts: OpenAI's arrays of strings or of token lists; llama-server's native API
  // (mixed) takes any array without a number at its top level, each item a string, a token
  // list (mixed with strings) or a {"prompt_string"} object.
  const bool several =
      mixed ? std::none_of(prompt->begin(), prompt->end(), [](const ordered_json& p) { return p.is_number(); })
            : std::all_of(prompt->begin(), prompt->end(), [](const ordered_json& p) { return p.is_array(); }) ||
                  std::all_of(prompt->begin(), prompt->end(), [](const ordered_json& p) { return p.is_string(); });
  if (!several) return one(*prompt);
  if (prompt->size() > kMaxPrompts) return f.fail("prompt", fmt::format("'prompt' holds more than {} prompts", kMaxPrompts));
  for (const auto& p : *prompt) {
    one(p);
    if (f.error) return;
  }
  if (r.prompts.size() > 1 && r.n_choices > 1) f.fail("n", "'n' > 1 needs a single prompt");
}

}  // namespace

std::optional<ApiError> parse_chat_request(const ordered_json& body, const RequestDefaults& defaults,
                                           GenerationRequest& r) {
  Fields f(body);
  parse_common(f, defaults, r);
  if (const ordered_json* lp = f.get("logprobs")) {
    if (!lp->is_boolean()) {
      f.fail("logprobs", "'logprobs' must be true or false");
    } else if (lp->get<bool>()) {
      r.n_logprobs = 0;
      f.integer("top_logprobs", r.n_logprobs, 0, 20);
    }
  }
  const ordered_json* messages = f.get("messages");
  if (!messages) {
    f.fail("messages", "'messages' is required: an array of {role, content} objects");
  } else if (!messages->is_array() || messages->empty()) {
    f.fail("messages", "'messages' must be a non-empty array of {role, content} objects");
  } else if (!f.error) {
    r.messages = ordered_json::array();
    for (size_t i = 0; i < messages->size() && !f.error; ++i) {
      const ordered_json& m = (*messages)[i];
      if (!m.is_object()) {
        f.fail("messages", fmt::format("messages[{}] must be an object", i));
        break;
      }
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) {
        f.fail("messages", fmt::format("messages[{}].role must be a string", i));
        break;
      }
      const std::string& name = role->get_ref<const std::string&>();
      if (name != "system" && name != "user" && name != "assistant" && name != "tool" && name != "developer") {
        f.fail("messages", fmt::format("messages[{}].role '{}' is not one of system, developer, user, assistant, tool",
                                       i, name));
        break;
      }
      auto content = m.find("content");
      if (content != m.end() && !content->is_string() && !content->is_null() && !content->is_array()) {
        f.fail("messages", fmt::format("messages[{}].content must be a string, an array of parts or null", i));
        break;
      }
      if ((content == m.end() || content->is_null()) && name != "assistant") {
        f.fail("messages", fmt::format("messages[{}] ({}) has no content", i, name));
        break;
      }
      ordered_json copy = m;
      if (name == "developer") copy["role"] = "system";  // OpenAI's newer name for the system role
      r.messages.push_back(std::move(copy));
    }
  }
  if (const ordered_json* tools = f.get("tools")) {
    if (!tools->is_array()) {
      f.fail("tools", "'tools' must be an array");
    } else if (!tools->empty()) {
      r.tools = *tools;
    }
  }
  if (const ordered_json* tc = f.get("tool_choice")) {
    if (tc->is_string()) {
      r.tool_choice = tc->get<std::string>();
      if (r.tool_choice != "auto" && r.tool_choice != "none" && r.tool_choice != "required") {
        f.fail("tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", ...}");
      }
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      r.tool_choice = "function";
      r.tool_choice_function = (*tc)["function"]["name"].get<std::string>();
    } else {
      f.fail("tool_choice", "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (!f.error && r.tool_choice != "auto" && r.tool_choice != "none" && r.tools.is_null()) {
      f.fail("tool_choice", fmt::format("'tool_choice' {} needs 'tools'", r.tool_choice));
    }
  }
  f.boolean("parallel_tool_calls", r.parallel_tool_calls);  // OpenAI's default: true
  f.boolean("continue_final_message", r.continue_final_message);
  f.boolean("add_generation_prompt", r.add_generation_prompt);
  if (!f.error && r.continue_final_message && f.has("add_generation_prompt") && r.add_generation_prompt) {
    f.fail("continue_final_message",
           "'continue_final_message' and 'add_generation_prompt' cannot both be true: the last message is either "
           "continued or answered");
  }
  if (!f.error && r.messages.is_array() && r.messages.size() >= 2 &&
      r.messages.back().value("role", "") == "assistant" && r.messages[r.messages.size() - 2].value("role", "") == "assistant") {
    // One final assistant message is a prefill to continue; two in a row have no meaning (as llama-server).
    f.fail("messages", "the conversation ends with two assistant messages in a row; only the last may be continued");
  }
  if (!f.error && r.messages.is_array() && !r.messages.empty() && r.messages.back().value("role", "") == "assistant" &&
      !f.has("continue_final_message")) {
    // As llama-server: a conversation that ends with the assistant's turn is continued
    // (prefill), not closed and answered anew.
    r.continue_final_message = true;
  }
  r.chat_template_kwargs = ordered_json::object();
  if (const ordered_json* kw = f.get("chat_template_kwargs")) {
    if (!kw->is_object()) {
      f.fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    } else {
      r.chat_template_kwargs = *kw;
    }
  }
  return f.error;
}

std::optional<ApiError> parse_completion_request(const ordered_json& body, const RequestDefaults& defaults,
                                                 GenerationRequest& r) {
  Fields f(body);
  parse_common(f, defaults, r);
  if (const ordered_json* lp = f.get("logprobs")) {
    if (lp->is_boolean()) {
      if (lp->get<bool>()) r.n_logprobs = 0;
    } else {
      f.integer("logprobs", r.n_logprobs, 0, 20);
    }
  }
  f.boolean("echo", r.echo);
  if (const ordered_json* suffix = f.get("suffix"); suffix && !(suffix->is_string() && suffix->get_ref<const std::string&>().empty())) {
    f.fail("suffix", "'suffix' (fill-in-the-middle) is not supported");
  }
  parse_prompts(f, /*mixed=*/false, r);
  return f.error;
}

std::optional<ApiError> parse_native_completion_request(const ordered_json& body, const RequestDefaults& defaults,
                                                        bool infill, GenerationRequest& r) {
  Fields f(body);
  parse_common(f, defaults, r);
  // n_probs (and its alias logprobs): the top N per token, with the chosen token's.
  int n_probs = 0;
  f.integer(f.has("n_probs") ? "n_probs" : "logprobs", n_probs, 0, 100);
  if (n_probs > 0) r.n_logprobs = n_probs;
  f.boolean("return_tokens", r.return_tokens);
  if (const ordered_json* rf = f.get("response_fields")) {
    if (!rf->is_array() || !std::all_of(rf->begin(), rf->end(), [](const ordered_json& x) { return x.is_string(); })) {
      f.fail("response_fields", "'response_fields' must be an array of field paths such as \"generation_settings/n_predict\"");
    } else {
      for (const auto& x : *rf) r.response_fields.push_back(x.get<std::string>());
    }
  }
  const ordered_json* prompt = f.get("prompt");
  if (infill) {
    f.string("input_prefix", r.input_prefix);
    f.string("input_suffix", r.input_suffix);
    if (const ordered_json* extra = f.get("input_extra")) {
      if (!extra->is_array()) {
        f.fail("input_extra", "'input_extra' must be an array of {\"filename\", \"text\"} objects");
      } else {
        for (const auto& chunk : *extra) {
          const bool ok = chunk.is_object() && chunk.contains("text") && chunk["text"].is_string() &&
                          (!chunk.contains("filename") || chunk["filename"].is_string());
          if (!ok) {
            f.fail("input_extra", "each 'input_extra' item must be {\"filename\": string, \"text\": string}");
            break;
          }
        }
        r.input_extra = *extra;
      }
    }
    if (!f.error && !f.has("input_prefix") && !f.has("input_suffix") && !prompt) {
      f.fail("input_prefix", "/infill needs 'input_prefix' and/or 'input_suffix' (the code around the cursor)");
    }
    if (prompt && !prompt->is_string()) f.fail("prompt", "/infill: 'prompt' must be a string (text after the cursor's middle)");
    if (prompt && prompt->is_string() && !f.error) r.prompt_text = prompt->get<std::string>();
    return f.error;
  }
  parse_prompts(f, /*mixed=*/true, r);
  return f.error;
}

}  // namespace moetier::server
