#include "server/request.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace moetier::server {

using nlohmann::ordered_json;

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
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

// The fields /v1/chat/completions and /v1/completions share.
void parse_common(Fields& f, const RequestDefaults& d, GenerationRequest& r) {
  r.sampling = d.sampling;
  r.max_tokens = d.n_predict;
  f.string("model", r.model);
  f.boolean("stream", r.stream);
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
  for (const char* name : {"n_predict", "max_tokens", "max_completion_tokens"}) {
    f.integer(name, r.max_tokens, -1, d.n_ctx_slot);
    if (f.error && f.error->param == name) {
      f.error->message = fmt::format(
          "'{}' must be an integer from 0 to the slot context ({} tokens), or -1 for no limit", name, d.n_ctx_slot);
    }
  }
  f.number("temperature", r.sampling.temperature, 0.0, 1e6);
  f.number("top_p", r.sampling.top_p, 0.0, 1.0);
  f.integer("top_k", r.sampling.top_k, -1, std::numeric_limits<int32_t>::max());
  f.number("min_p", r.sampling.min_p, 0.0, 1.0);
  f.number("presence_penalty", r.sampling.presence_penalty, -2.0, 2.0);
  f.number("frequency_penalty", r.sampling.frequency_penalty, -2.0, 2.0);
  f.number("repeat_penalty", r.sampling.repeat_penalty, 1e-6, 1e6);
  f.integer("repeat_last_n", r.sampling.repeat_last_n, 0, d.n_ctx_slot);
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
  int64_t n = 1;
  f.integer("n", n, 1, 1);
  if (f.error && f.error->param == "n") f.error->message = "'n' must be 1: one choice per request is supported";
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
  if (const ordered_json* rf = f.get("response_format")) {
    const bool text = rf->is_object() && rf->value("type", "") == "text";
    if (!text) f.fail("response_format", "'response_format' other than {\"type\": \"text\"} is not supported");
  }
  if (!f.error) {
    if (Status st = validate(r.sampling); !st) f.fail("", st.message());
  }
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
    } else {
      std::string choice;
      if (const ordered_json* tc = f.get("tool_choice"); tc && tc->is_string()) choice = tc->get<std::string>();
      if (choice != "none" && !tools->empty()) r.tools = *tools;
    }
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
  const ordered_json* prompt = f.get("prompt");
  auto token_list = [&](const ordered_json& a) {
    r.prompt_tokens.clear();
    for (const auto& t : a) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return f.fail("prompt", "'prompt' token ids must be non-negative integers");
      }
      r.prompt_tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    if (r.prompt_tokens.empty()) f.fail("prompt", "'prompt' has no tokens");
  };
  if (!prompt) {
    f.fail("prompt", "'prompt' is required: a string or an array of token ids");
  } else if (prompt->is_string()) {
    r.prompt_text = prompt->get<std::string>();
  } else if (prompt->is_array()) {
    if (prompt->empty()) {
      f.fail("prompt", "'prompt' is empty");
    } else if ((*prompt)[0].is_number()) {
      token_list(*prompt);
    } else if (prompt->size() > 1) {
      f.fail("prompt", "'prompt' holds several prompts; send one per request");
    } else if ((*prompt)[0].is_string()) {
      r.prompt_text = (*prompt)[0].get<std::string>();
    } else if ((*prompt)[0].is_array()) {
      token_list((*prompt)[0]);
    } else {
      f.fail("prompt", "'prompt' must be a string or an array of token ids");
    }
  } else {
    f.fail("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (r.prompt_text && r.prompt_text->empty()) f.fail("prompt", "'prompt' is empty");
  return f.error;
}

}  // namespace moetier::server
