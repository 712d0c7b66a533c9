#!/usr/bin/env python3
"""Renders chat templates with moetier's engine and with Python's Jinja2, byte for byte.

Jinja2 is set up the way Hugging Face's apply_chat_template sets it up (an immutable sandbox,
trim_blocks, lstrip_blocks, loop controls, {% generation %}, raise_exception, strftime_now, and
a tojson that is json.dumps with ensure_ascii=False); moetier renders through
`moetier template --context`. Both get the variables llama-server passes (messages, tools,
add_generation_prompt, bos_token, eos_token, enable_thinking, date_string, datetime) for a
small set of conversations. A case matches when both outputs are equal or both engines fail.

  scripts/template-parity.py --moetier build/moetier --templates-dir DIR    # every DIR/*.jinja
  scripts/template-parity.py --moetier build/moetier --gguf A.gguf --builtins
  scripts/template-parity.py --moetier build/moetier --llama-templates   # llama.cpp's models/templates

--llama-templates takes the folder from MOETIER_LLAMA_TEMPLATES_DIR, else
$MOETIER_LLAMA_CPP_DIR/models/templates; without either it exits 77 (skipped).

Prints one row per template; exits 1 when a template differs and is not in the exceptions
file (`NAME<TAB or spaces>reason` per line, # comments), 77 when Jinja2 is not installed
(unless MOETIER_REQUIRE_JINJA2 is set), 0 otherwise.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox
except ImportError:
    jinja2 = None

DATE_STRING = "26 Jul 2024"  # fixed, so that outputs do not depend on the day
DATETIME = "Jul 26 2024"

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "city name"},
                "unit": {"type": "string", "description": "c or f", "enum": ["c", "f"]},
            },
            "required": ["city"],
        },
    },
}


def conversations():
    """(name, context without tokens) pairs: what llama-server passes a template."""
    system = {"role": "system", "content": "You are a terse assistant."}
    user = {"role": "user", "content": "What is 2+2?"}
    assistant = {"role": "assistant", "content": "4."}
    user2 = {"role": "user", "content": "And 3+3? Answer with « un chiffre » ✓"}
    # Tool-call arguments as an object (what moetier serve passes) and as the JSON string
    # OpenAI clients send; the id has the 9 letters and digits Mistral's templates insist on.
    def call(arguments):
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": "call12345", "type": "function",
                                "function": {"name": "get_weather", "arguments": arguments}}]}
    result = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21}"}
    thought = {"role": "assistant", "content": "4.", "reasoning_content": "Two plus two is four."}
    return [
        ("system+user", {"messages": [system, user], "add_generation_prompt": True}),
        ("multi-turn", {"messages": [system, user, assistant, user2], "add_generation_prompt": True}),
        ("no-gen-prompt", {"messages": [user, assistant], "add_generation_prompt": False}),
        ("tools", {"messages": [system, user, call({"city": "Paris", "unit": "c"}), result], "tools": [WEATHER_TOOL],
                   "add_generation_prompt": True}),
        ("tools-string-args", {"messages": [user, call('{"city": "Paris"}'), result], "tools": [WEATHER_TOOL],
                               "add_generation_prompt": True}),
        ("tools-final", {"messages": [user, call({"city": "Paris"}), result,
                                      {"role": "assistant", "content": "21 C in Paris."}, user2],
                         "tools": [WEATHER_TOOL], "add_generation_prompt": True}),
        ("thinking-on", {"messages": [user, thought, user2], "add_generation_prompt": True, "enable_thinking": True}),
        ("thinking-off", {"messages": [user], "add_generation_prompt": True, "enable_thinking": False}),
    ]


def full_context(base):
    ctx = dict(base)
    ctx.update({"bos_token": "<s>", "eos_token": "</s>", "date_string": DATE_STRING, "datetime": DATETIME})
    return ctx


# ---- Jinja2 as Hugging Face's apply_chat_template configures it ---------------------------

if jinja2 is not None:
    class GenerationBlock(jinja2.ext.Extension):
        """{% generation %}...{% endgeneration %}: renders its body (it only marks assistant text)."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_jinja2(env, source, context):
    try:
        return True, env.from_string(source).render(**context)
    except Exception as e:  # the template's own error or any engine error: both count as failing
        return False, f"{type(e).__name__}: {e}"


def render_moetier(binary, template_path, context, tmp):
    ctx_path = os.path.join(tmp, "context.json")
    out_path = os.path.join(tmp, "out.txt")
    with open(ctx_path, "w", encoding="utf-8") as f:
        json.dump(context, f, ensure_ascii=False)
    if os.path.exists(out_path):
        os.remove(out_path)
    p = subprocess.run([binary, "template", "--chat-template-file", template_path, "--context", ctx_path,
                        "-o", out_path], capture_output=True, timeout=60)
    if p.returncode != 0:
        return False, p.stderr.decode("utf-8", "replace").strip()
    with open(out_path, "rb") as f:
        return True, f.read().decode("utf-8")


def first_difference(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return i


def compare_template(env, binary, name, path, tmp, verbose):
    """Returns (status, detail): status 'pass' or 'differs'."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    problems, both_failed = [], 0
    for case, base in conversations():
        ctx = full_context(base)
        ok_j, out_j = render_jinja2(env, source, ctx)
        ok_m, out_m = render_moetier(binary, path, ctx, tmp)
        if (ok_j, out_j) != (ok_m, out_m) and ok_j and ok_m:
            # Once more: a template that prints strftime_now's date may have met midnight.
            ok_j, out_j = render_jinja2(env, source, ctx)
            ok_m, out_m = render_moetier(binary, path, ctx, tmp)
        if ok_j and ok_m and out_j == out_m:
            continue
        if not ok_j and not ok_m:
            # The template's own raise_exception(msg): moetier must fail with the same message.
            raised = out_j.startswith("TemplateError: ")
            if raised and not out_m.endswith(": " + out_j[len("TemplateError: "):]):
                problems.append(f"{case}: both fail, with other messages: jinja2 {out_j!r} moetier {out_m!r}")
            else:
                both_failed += 1
            continue
        if ok_j and ok_m:
            at = first_difference(out_j, out_m)
            problems.append(f"{case}: differs at char {at}: jinja2 {out_j[at:at + 40]!r} moetier {out_m[at:at + 40]!r}")
        elif ok_j:
            problems.append(f"{case}: moetier fails: {out_m}")
        else:
            problems.append(f"{case}: jinja2 fails ({out_j}), moetier renders")
        if verbose:
            print(f"--- {name} / {case}\n[jinja2]\n{out_j}\n[moetier]\n{out_m}", file=sys.stderr)
    n = len(conversations())
    if problems:
        return "differs", "; ".join(problems)
    if both_failed:
        return "pass", f"{n - both_failed}/{n} equal, {both_failed} fail in both engines"
    return "pass", f"{n}/{n} equal"


def read_exceptions(path):
    out = {}
    if not path:
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            out[parts[0]] = parts[1] if len(parts) > 1 else ""
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--moetier", required=True, help="the moetier binary")
    ap.add_argument("--templates-dir", help="render every *.jinja file of this folder")
    ap.add_argument("--llama-templates", action="store_true",
                    help="render llama.cpp's models/templates (the folder from the environment, see above)")
    ap.add_argument("--gguf", nargs="*", default=[], help="render the chat template of these GGUF files")
    ap.add_argument("--builtins", action="store_true", help="render moetier's built-in templates")
    ap.add_argument("--exceptions", help="known differences: one 'NAME reason' per line")
    ap.add_argument("--verbose", action="store_true", help="print both outputs of every differing case")
    args = ap.parse_args()
    if jinja2 is None:
        msg = "template-parity: Python's jinja2 is not installed (Debian: python3-jinja2)"
        if os.environ.get("MOETIER_REQUIRE_JINJA2"):
            print(msg, file=sys.stderr)
            return 1
        print(msg + "; skipped", file=sys.stderr)
        return 77

    if args.llama_templates and not args.templates_dir:
        folder = os.environ.get("MOETIER_LLAMA_TEMPLATES_DIR", "")
        if not folder and os.environ.get("MOETIER_LLAMA_CPP_DIR"):
            folder = os.path.join(os.environ["MOETIER_LLAMA_CPP_DIR"], "models", "templates")
        if not folder or not os.path.isdir(folder):
            print("template-parity: skipped: set MOETIER_LLAMA_TEMPLATES_DIR to llama.cpp's models/templates "
                  "(or MOETIER_LLAMA_CPP_DIR to a llama.cpp checkout)", file=sys.stderr)
            return 77
        args.templates_dir = folder

    env = make_environment()
    exceptions = read_exceptions(args.exceptions)
    with tempfile.TemporaryDirectory() as tmp:
        templates = []  # (name, path)
        if args.templates_dir:
            for f in sorted(os.listdir(args.templates_dir)):
                if f.endswith(".jinja"):
                    templates.append((f, os.path.join(args.templates_dir, f)))
        for gguf in args.gguf:
            path = os.path.join(tmp, "gguf-" + os.path.basename(gguf) + ".jinja")
            subprocess.run([args.moetier, "template", "-m", gguf, "--source", "-o", path], check=True)
            templates.append((os.path.basename(gguf), path))
        if args.builtins:
            names = subprocess.run([args.moetier, "template", "--list-builtins"], check=True, capture_output=True,
                                   text=True).stdout.split()
            for name in names:
                path = os.path.join(tmp, "builtin-" + name + ".jinja")
                subprocess.run([args.moetier, "template", "--chat-template", name, "--source", "-o", path], check=True)
                templates.append(("built-in " + name, path))
        if not templates:
            print("template-parity: no templates given", file=sys.stderr)
            return 2

        width = max(len(n) for n, _ in templates)
        unexpected, listed_pass = 0, []
        for name, path in templates:
            status, detail = compare_template(env, args.moetier, name, path, tmp, args.verbose)
            if status == "differs" and name in exceptions:
                status, detail = "exception", exceptions[name] + " [" + detail + "]"
            elif status == "differs":
                unexpected += 1
            elif name in exceptions:
                listed_pass.append(name)
            print(f"{name:<{width}}  {status:<9}  {detail}")
        print(f"template-parity: {len(templates)} templates, {unexpected} unexpected differences"
              + (f"; listed as exceptions but equal: {', '.join(listed_pass)}" if listed_pass else ""))
        return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
