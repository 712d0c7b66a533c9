// The chat page of `moetier serve`: sends the conversation to POST /v1/chat/completions with
// stream: true and renders the server-sent events as they arrive (delta.content as markdown,
// delta.reasoning_content in a collapsed <details>). Settings and the API key live in
// localStorage; the conversation lives in this page only.
(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const KEY_STORE = "moetier.apiKey";
  const SETTINGS_STORE = "moetier.settings";
  const NUMERIC = ["temperature", "top_p", "top_k", "min_p", "max_tokens"];
  const state = { messages: [], controller: null, model: "" };

  function load(name, fallback) {
    try {
      const v = localStorage.getItem(name);
      return v === null ? fallback : JSON.parse(v);
    } catch {
      return fallback;
    }
  }
  function store(name, value) {
    try {
      if (value === undefined) localStorage.removeItem(name);
      else localStorage.setItem(name, JSON.stringify(value));
    } catch {
      // Storage refused (private mode, quota): the setting holds until the page is closed.
    }
  }

  // ---- the server ----------------------------------------------------------------------

  function headers() {
    const h = { "Content-Type": "application/json" };
    const key = load(KEY_STORE, "");
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }

  // The message of an error answer: the API's {error: {message}}, else the body or status.
  async function errorText(res) {
    let text = "";
    try {
      text = await res.text();
    } catch {
      // the body was cut off: the status line is all there is
    }
    try {
      const j = JSON.parse(text);
      if (j && j.error) return typeof j.error === "string" ? j.error : j.error.message || JSON.stringify(j.error);
    } catch {
      // not JSON
    }
    return text.trim() || res.statusText || "request failed";
  }

  // fetch() that asks for the API key when the server answers 401, then tries again.
  async function api(path, init) {
    for (;;) {
      const res = await fetch(path, Object.assign({}, init, { headers: headers() }));
      if (res.status !== 401) return res;
      const message = await errorText(res);
      if (!(await askKey(load(KEY_STORE, "") ? message : ""))) throw new Error("HTTP 401: " + message);
    }
  }

  let keyRequest = null;  // one dialog for every request that got a 401
  function askKey(problem) {
    if (keyRequest) return keyRequest;
    const dialog = $("key-dialog");
    $("key-error").textContent = problem;
    $("key-error").hidden = !problem;
    $("key-input").value = "";
    dialog.returnValue = "";
    keyRequest = new Promise((resolve) => {
      dialog.addEventListener("close", () => {
        keyRequest = null;
        const key = $("key-input").value.trim();
        if (dialog.returnValue === "save" && key) store(KEY_STORE, key);
        resolve(dialog.returnValue === "save" && key !== "");
      }, { once: true });
    });
    dialog.showModal();
    return keyRequest;
  }

  async function loadModel() {
    const label = $("model");
    try {
      const res = await api("/v1/models");
      if (!res.ok) throw new Error(await errorText(res));
      const list = await res.json();
      state.model = (list.data && list.data[0] && list.data[0].id) || "";
      label.textContent = state.model || "no model";
      label.title = "model: " + state.model;
    } catch (e) {
      label.textContent = "model unknown";
      label.title = e.message;
      return;
    }
    // The server's sampling defaults, shown as placeholders of the empty settings fields.
    try {
      const res = await api("/props");
      if (!res.ok) return;
      const params = ((await res.json()).default_generation_settings || {}).params || {};
      if (params.n_predict !== undefined && params.n_predict >= 0) params.max_tokens = params.n_predict;
      const form = $("settings-form");
      for (const name of NUMERIC) {
        if (typeof params[name] === "number") form.elements[name].placeholder = String(params[name]);
      }
    } catch {
      // no defaults to show
    }
  }

  // Reads a text/event-stream body, calling onData with each JSON `data:` payload.
  async function readEvents(res, onData) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      buffer = buffer.replace(/\r/g, "");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
        if (data === "[DONE]") return;
        if (data) onData(JSON.parse(data));
      }
      if (done) return;
    }
  }

  // ---- the conversation ----------------------------------------------------------------

  function element(tag, className, text) {
    const el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function addMessage(role) {
    const empty = $("empty");
    if (empty) empty.hidden = true;
    const el = element("article", "msg " + role);
    el.setAttribute("aria-label", role === "user" ? "Your message" : "Reply");
    el.append(element("div", "role", role === "user" ? "You" : "Assistant"));
    const body = element("div", "body");
    el.append(body);
    const chat = $("chat");
    const atBottom = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 80;
    chat.append(el);
    if (atBottom) chat.scrollTop = chat.scrollHeight;
    return { el, body, reasoning: null, meta: null, pending: false };
  }

  function renderReply(view, reply) {
    const chat = $("chat");
    const atBottom = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 80;
    if (reply.reasoning) {
      if (!view.reasoning) {
        const details = element("details", "reasoning");
        details.append(element("summary", null, "Reasoning"), element("div", "text"));
        view.el.insertBefore(details, view.body);
        view.reasoning = details;
      }
      view.reasoning.querySelector(".text").textContent = reply.reasoning;
      view.reasoning.querySelector("summary").textContent =
        reply.content || reply.done ? "Reasoning" : "Reasoning…";
    }
    view.body.innerHTML = window.moetierMarkdown.render(reply.content);
    if (atBottom) chat.scrollTop = chat.scrollHeight;
  }

  // Re-renders at most once per frame however fast the tokens come.
  function scheduleRender(view, reply) {
    if (view.pending) return;
    view.pending = true;
    requestAnimationFrame(() => {
      view.pending = false;
      renderReply(view, reply);
    });
  }

  function showError(view, message) {
    const box = element("div", "error", message);
    box.setAttribute("role", "alert");
    view.el.append(box);
  }

  function speed(reply) {
    const t = reply.timings;
    if (t && t.predicted_per_second > 0) return { n: t.predicted_n, perSecond: t.predicted_per_second };
    const n = reply.usage && reply.usage.completion_tokens;
    const seconds = (reply.lastToken - reply.firstToken) / 1000;
    if (n > 1 && seconds > 0) return { n, perSecond: (n - 1) / seconds };
    return null;
  }

  function finishReply(view, reply) {
    reply.done = true;
    renderReply(view, reply);
    view.el.classList.remove("pending");
    const parts = [];
    const s = speed(reply);
    if (s) parts.push((s.n !== undefined ? s.n + " tokens · " : "") + s.perSecond.toFixed(1) + " tokens/s");
    if (reply.stopped) parts.push("stopped");
    else if (reply.finish === "length") parts.push("cut off at the token limit");
    if (parts.length) view.el.append(element("div", "meta", parts.join(" · ")));
  }

  function requestBody() {
    const settings = load(SETTINGS_STORE, {});
    const messages = [];
    if (settings.system) messages.push({ role: "system", content: settings.system });
    const body = { messages: messages.concat(state.messages), stream: true, stream_options: { include_usage: true } };
    if (state.model) body.model = state.model;
    for (const name of NUMERIC) {
      if (settings[name] !== undefined && settings[name] !== "") body[name] = Number(settings[name]);
    }
    if (settings.extra) Object.assign(body, JSON.parse(settings.extra));
    return body;
  }

  async function generate() {
    const view = addMessage("assistant");
    view.el.classList.add("pending");
    const reply = { content: "", reasoning: "", finish: null, timings: null, usage: null, firstToken: 0, lastToken: 0 };
    const controller = new AbortController();
    state.controller = controller;
    setBusy(true);
    try {
      const res = await api("/v1/chat/completions",
                            { method: "POST", body: JSON.stringify(requestBody()), signal: controller.signal });
      if (!res.ok) throw new Error("HTTP " + res.status + ": " + (await errorText(res)));
      await readEvents(res, (chunk) => {
        if (chunk.error) throw new Error(chunk.error.message || JSON.stringify(chunk.error));
        const choice = (chunk.choices && chunk.choices[0]) || {};
        const delta = choice.delta || {};
        if (delta.reasoning_content || delta.content) {
          reply.lastToken = performance.now();
          if (!reply.firstToken) reply.firstToken = reply.lastToken;
        }
        if (delta.reasoning_content) reply.reasoning += delta.reasoning_content;
        if (delta.content) reply.content += delta.content;
        if (choice.finish_reason) reply.finish = choice.finish_reason;
        if (chunk.timings) reply.timings = chunk.timings;
        if (chunk.usage) reply.usage = chunk.usage;
        scheduleRender(view, reply);
      });
    } catch (e) {
      if (e.name === "AbortError") reply.stopped = true;
      else showError(view, e.message);
    } finally {
      controller.abort();  // after an error mid-stream: close the connection, end the generation
      if (state.controller === controller) {
        state.controller = null;
        setBusy(false);
      }
      finishReply(view, reply);
      if (reply.content) state.messages.push({ role: "assistant", content: reply.content });
    }
  }

  function setBusy(busy) {
    $("send").hidden = busy;
    $("stop").hidden = !busy;
  }

  function send() {
    const input = $("input");
    const text = input.value.trim();
    if (!text || state.controller) return;
    input.value = "";
    addMessage("user").body.textContent = text;
    state.messages.push({ role: "user", content: text });
    generate();
  }

  function newChat() {
    if (state.controller) state.controller.abort();
    state.messages = [];
    for (const el of $("chat").querySelectorAll(".msg")) el.remove();
    $("empty").hidden = false;
    $("input").focus();
  }

  // ---- copy buttons of code blocks -----------------------------------------------------

  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // No clipboard API here (plain http on another host): copy from a selection.
      const area = element("textarea");
      area.value = text;
      document.body.append(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      return ok;
    }
  }

  async function onChatClick(event) {
    const button = event.target.closest("button.copy");
    if (!button) return;
    const ok = await copyText(button.closest(".codeblock").querySelector("code").textContent);
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  }

  // ---- settings ------------------------------------------------------------------------

  function openSettings() {
    const form = $("settings-form");
    const settings = load(SETTINGS_STORE, {});
    for (const name of ["system", "extra"].concat(NUMERIC)) form.elements[name].value = settings[name] || "";
    $("settings-error").hidden = true;
    $("forget-key").textContent = "Forget API key";
    $("forget-key").disabled = !load(KEY_STORE, "");
    $("settings").showModal();
  }

  function saveSettings(event) {
    const form = $("settings-form");
    const extra = form.elements.extra.value.trim();
    if (extra) {
      let ok = false;
      try {
        const parsed = JSON.parse(extra);
        ok = parsed !== null && typeof parsed === "object" && !Array.isArray(parsed);
      } catch {
        ok = false;
      }
      if (!ok) {
        event.preventDefault();
        $("settings-error").textContent = "Extra request fields must be a JSON object, e.g. {\"seed\": 1}.";
        $("settings-error").hidden = false;
        return;
      }
    }
    const settings = { system: form.elements.system.value, extra };
    for (const name of NUMERIC) settings[name] = form.elements[name].value;
    store(SETTINGS_STORE, settings);
  }

  // ---- wiring --------------------------------------------------------------------------

  function start() {
    $("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      send();
    });
    $("input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        send();
      }
    });
    $("stop").addEventListener("click", () => state.controller && state.controller.abort());
    $("new-chat").addEventListener("click", newChat);
    $("chat").addEventListener("click", onChatClick);
    $("open-settings").addEventListener("click", openSettings);
    $("settings-form").addEventListener("submit", saveSettings);
    $("forget-key").addEventListener("click", () => {
      store(KEY_STORE, undefined);
      $("forget-key").textContent = "Key forgotten";
      $("forget-key").disabled = true;
    });
    for (const id of ["settings", "key-dialog"]) {
      $(id).querySelector("button[value=cancel]").addEventListener("click", () => $(id).close("cancel"));
    }
    loadModel();
    $("input").focus();
  }

  // For tests and tinkering: render a reply without asking the server.
  window.moetierChat = {
    showReply(markdown) {
      const view = addMessage("assistant");
      finishReply(view, { content: markdown, reasoning: "" });
      return view.el;
    },
    state,
  };

  start();
})();
