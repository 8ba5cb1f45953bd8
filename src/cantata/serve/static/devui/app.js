// cantata dev UI: plain JS, no build step, nothing fetched from elsewhere.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const api = "/devui/api";
  const state = { entries: [], current: null, chatId: null, run: null, source: null, last: -1 };

  function showError(text) {
    const box = $("error");
    box.textContent = text;
    box.hidden = !text;
  }

  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const kid of kids) node.append(kid instanceof Node ? kid : String(kid));
    return node;
  }

  async function call(method, path, body) {
    const res = await fetch(api + path, {
      method, headers: method === "GET" ? {} : { "Content-Type": "application/json" },
      body: method === "GET" ? undefined : JSON.stringify(body || {}), credentials: "same-origin",
    });
    const data = await res.json().catch(() => ({}));
    if (res.status === 401) $("token-form").hidden = false;
    if (!res.ok) throw new Error((data.error && data.error.message) || res.status + " " + res.statusText);
    return data;
  }

  // -- entries --------------------------------------------------------------------------
  async function loadEntries() {
    try {
      const data = await call("GET", "/entries");
      state.entries = data.entries;
      const nav = $("entries");
      nav.textContent = "";
      if (!data.entries.length) nav.append(el("p", { class: "muted" }, "nothing is served"));
      for (const e of data.entries) {
        const b = el("button", { "data-name": e.name },
          e.name, el("span", { class: "kind " + e.kind }, e.kind),
          el("span", { class: "desc" }, e.description || ""));
        b.addEventListener("click", () => select(e.name));
        nav.append(b);
      }
      const wanted = new URLSearchParams(location.hash.slice(1)).get("entry");
      if (data.entries.length) select(wanted && data.entries.some((e) => e.name === wanted) ? wanted : data.entries[0].name);
    } catch (err) { showError("could not list what is served: " + err.message); }
  }

  function select(name) {
    const entry = state.entries.find((e) => e.name === name);
    state.current = entry;
    state.chatId = null;
    for (const b of $("entries").querySelectorAll("button")) b.classList.toggle("on", b.dataset.name === name);
    $("empty").hidden = true; $("entry").hidden = false;
    $("entry-name").textContent = entry.name;
    $("entry-kind").textContent = entry.kind; $("entry-kind").className = "kind " + entry.kind;
    $("entry-desc").textContent = entry.description || "";
    $("chat-log").textContent = "";
    $("tab-run").hidden = entry.kind === "agent";
    $("routing-box").hidden = entry.kind !== "team";
    resetRun();
    if (entry.graph) drawGraph(entry.graph);
    tab(entry.kind === "agent" ? "chat" : "run");
  }

  function tab(which) {
    $("chat-view").hidden = which !== "chat";
    $("run-view").hidden = which !== "run";
    $("tab-chat").classList.toggle("on", which === "chat");
    $("tab-run").classList.toggle("on", which === "run");
    if (which === "run") loadPastRuns().catch((e) => showError(e.message));
  }

  // -- chat -----------------------------------------------------------------------------
  function chatBubble(role, who) {
    const text = el("span", {});
    const msg = el("div", { class: "msg " + role }, el("span", { class: "who" }, who), text);
    $("chat-log").append(msg);
    return text;
  }

  async function sendChat(message) {
    showError("");
    chatBubble("user", "you").textContent = message;
    const out = chatBubble("assistant", state.current.name);
    const res = await fetch(api + "/chat/" + encodeURIComponent(state.current.name), {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ message, chat_id: state.chatId }),
    });
    if (!res.ok) {
      const data = await res.json().catch(() => ({}));
      throw new Error((data.error && data.error.message) || res.statusText);
    }
    await readSSE(res.body, (data) => {
      if (data.chat_id) state.chatId = data.chat_id;
      if (data.text && !data.done) out.textContent += data.text;
      if (data.done && !out.textContent) out.textContent = data.text;
      if (data.error) showError(data.error);
      $("chat-log").scrollTop = $("chat-log").scrollHeight;
    });
  }

  async function readSSE(body, onData) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
        const line = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (line) onData(JSON.parse(line));
      }
    }
  }

  // -- graph ----------------------------------------------------------------------------
  const NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function drawGraph(graph) {
    const W = 150, H = 34, GX = 30, GY = 56, PAD = 20;
    const perLayer = {};
    for (const n of graph.nodes) perLayer[n.layer] = (perLayer[n.layer] || 0) + 1;
    const width = Math.max(1, graph.width) * (W + GX) + PAD * 2 + 60;
    const height = Math.max(1, graph.depth) * (H + GY) + PAD;
    const pos = {};
    for (const n of graph.nodes) {
      const row = perLayer[n.layer] * (W + GX) - GX;
      pos[n.id] = { x: (width - 60 - row) / 2 + n.index * (W + GX), y: PAD + n.layer * (H + GY), n };
    }
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "workflow graph" });
    const defs = svg("defs", {});
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#7b8b99" }));
    defs.append(marker); root.append(defs);
    for (const e of graph.edges) {
      const a = pos[e.source], b = pos[e.target];
      if (!a || !b) continue;
      let d, lx, ly;
      if (b.n.layer > a.n.layer) {
        const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y;
        d = `M${x1},${y1} C${x1},${y1 + GY / 2} ${x2},${y2 - GY / 2} ${x2},${y2}`;
        lx = (x1 + x2) / 2; ly = (y1 + y2) / 2;
      } else if (b.n.layer < a.n.layer) { // back edge: from the source's top to the target's bottom, off centre
        const x1 = a.x + W * 0.72, y1 = a.y, x2 = b.x + W * 0.72 + 8 * a.n.index, y2 = b.y + H;
        d = `M${x1},${y1} C${x1 + 24},${y1 - GY / 2} ${x2 + 24},${y2 + GY / 2} ${x2},${y2}`;
        lx = (x1 + x2) / 2 + 20; ly = (y1 + y2) / 2;
      } else { // same layer: around the right side
        const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x + W, y2 = b.y + H / 2;
        const bend = Math.max(x1, x2) + 40;
        d = `M${x1},${y1 + 6} C${bend},${y1 + 6} ${bend},${y2 - 6} ${x2},${y2 - 6}`;
        lx = bend - 8; ly = (y1 + y2) / 2;
      }
      const back = b.n.layer <= a.n.layer;
      root.append(svg("path", { d, class: back ? "edge back" : "edge", "marker-end": "url(#arrow)" }));
      if (e.label) root.append(svg("text", { x: lx, y: ly, class: "elabel" }, e.label));
    }
    for (const id in pos) {
      const p = pos[id];
      const g = svg("g", { class: "node" + (p.n.start ? " start" : ""), "data-id": id });
      g.append(svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: p.n.start ? 16 : 4 }));
      g.append(svg("text", { x: p.x + W / 2, y: p.y + H / 2 }, id.length > 22 ? id.slice(0, 21) + "…" : id));
      const title = svg("title", {}, id); g.append(title);
      root.append(g);
    }
    const box = $("graph");
    box.textContent = "";
    box.append(root);
    const source = el("details", {}, el("summary", {}, "Mermaid source"), el("pre", {}, graph.mermaid || ""));
    box.append(source);
  }

  function mark(id, cls) {
    for (const g of $("graph").querySelectorAll("g.node")) {
      if (g.dataset.id === id) { g.classList.remove("active", "done"); g.classList.add(cls); }
    }
  }

  // -- runs -----------------------------------------------------------------------------
  function resetRun() {
    if (state.source) state.source.close();
    state.source = null; state.run = null; state.last = -1;
    $("timeline").textContent = ""; $("pending").textContent = "";
    $("routing").tBodies[0].textContent = ""; $("checkpoints").textContent = "";
    $("run-status").textContent = ""; $("run-meta").textContent = "";
  }

  function summary(s) {
    state.run = s;
    $("run-status").textContent = s.status; $("run-status").className = "status " + s.status;
    $("run-meta").textContent = `run ${s.id}` + (s.run_id ? ` · workflow run ${s.run_id}` : "") + ` · ${s.events} events` +
      (s.restored ? " · from an earlier server process: resume it from a checkpoint" : "");
    const pending = $("pending");
    pending.textContent = "";
    for (const r of s.pending) {
      const input = el("input", { placeholder: "answer", "data-request": r.request_id });
      const form = el("form", {}, input, el("button", { type: "submit" }, "Answer"));
      form.addEventListener("submit", (ev) => { ev.preventDefault(); answer(r.request_id, input.value).catch((e) => showError(e.message)); });
      pending.append(el("div", { class: "req" },
        el("b", {}, "Input requested"), ` by ${r.executor_id}: `,
        el("code", {}, typeof r.data === "string" ? r.data : JSON.stringify(r.data)),
        s.restored ? el("p", { class: "muted" }, "to answer, resume from the checkpoint that waits for it") : form));
    }
  }

  function describe(ev) {
    const skip = new Set(["type"]);
    const parts = [];
    for (const [k, v] of Object.entries(ev)) {
      if (skip.has(k) || v === null || v === "" || (Array.isArray(v) && !v.length)) continue;
      const text = typeof v === "string" ? v : JSON.stringify(v);
      parts.push(`${k}=${text.length > 160 ? text.slice(0, 159) + "…" : text}`);
    }
    return parts.join("  ");
  }

  function onEvent(ev, index) {
    // A stream cut at the server's request time limit ends with an untyped error; the
    // EventSource reconnects from the last event id, so nothing is lost.
    if (!ev.type) return;
    state.last = Math.max(state.last, index);
    const failed = ev.type === "Error" || ev.type === "WorkflowFailedEvent" || ev.type === "ExecutorFailedEvent";
    if (ev.type === "AgentUpdateEvent") { // chunks: grow the last line of the same executor
      const lastLi = $("timeline").lastElementChild;
      const text = (ev.data && ev.data.contents) ? ev.data.contents.map((c) => c.text || "").join("") : "";
      if (lastLi && lastLi.dataset.chunk === ev.executor_id) { lastLi.querySelector(".v").textContent += text; return; }
      const li = el("li", { "data-chunk": ev.executor_id }, el("span", { class: "t" }, "AgentUpdate"), `${ev.executor_id}: `, el("span", { class: "v" }, text));
      $("timeline").append(li); return;
    }
    $("timeline").append(el("li", { class: failed ? "err" : "" }, el("span", { class: "t" }, ev.type.replace(/Event$/, "")), describe(ev)));
    $("timeline").scrollTop = $("timeline").scrollHeight;
    if (ev.type === "ExecutorInvokedEvent") mark(ev.executor_id, "active");
    if (ev.type === "ExecutorCompletedEvent") mark(ev.executor_id, "done");
    if (ev.type === "RoutingEvent") {
      mark(ev.choice, "active");
      $("routing").tBodies[0].append(el("tr", {}, el("td", {}, ev.turn), el("td", {}, ev.choice),
        el("td", {}, (ev.candidates || []).join(", ")), el("td", {}, ev.reason + (ev.fallback_used ? " (fallback)" : ""))));
    }
    if (failed) showError(ev.error || describe(ev));
  }

  function follow(run) {
    if (state.source) state.source.close();
    const src = new EventSource(`${api}/run/${run.id}/events?after=${state.last}`);
    state.source = src;
    src.onmessage = (m) => onEvent(JSON.parse(m.data), Number(m.lastEventId));
    src.addEventListener("end", (m) => { src.close(); summary(JSON.parse(m.data)); loadCheckpoints(); loadPastRuns(); });
  }

  // Runs are kept in the server's store, so the runs of an earlier server process are here too.
  async function loadPastRuns() {
    const name = state.current && state.current.name;
    const { runs } = await call("GET", "/runs");
    const list = $("past-runs");
    list.textContent = "";
    for (const r of runs.filter((x) => x.name === name).reverse().slice(0, 20)) {
      const btn = el("button", { "data-run": r.id }, `${r.id} · ${r.status} · ${r.events} events`);
      btn.addEventListener("click", () => openRun(r.id).catch((e) => showError(e.message)));
      list.append(el("li", {}, btn));
    }
    if (!list.children.length) list.append(el("li", { class: "muted" }, "no runs yet"));
  }

  async function openRun(runId) {
    showError(""); resetRun();
    if (state.current.graph) drawGraph(state.current.graph);
    const s = await call("GET", `/run/${runId}`);
    summary(s); follow(s);
  }

  async function startRun(input) {
    showError(""); resetRun();
    if (state.current.graph) drawGraph(state.current.graph);
    const s = await call("POST", "/runs/" + encodeURIComponent(state.current.name), { input });
    summary(s); follow(s);
  }

  async function answer(requestId, text) {
    showError("");
    const s = await call("POST", `/run/${state.run.id}/answers`, { answers: { [requestId]: text } });
    summary(s); follow(s);
  }

  async function loadCheckpoints() {
    const list = $("checkpoints");
    const { checkpoints } = await call("GET", `/run/${state.run.id}/checkpoints`);
    list.textContent = "";
    for (const c of checkpoints) {
      const btn = el("button", { "data-checkpoint": c.checkpoint_id }, "Resume");
      btn.addEventListener("click", () => resume(c.checkpoint_id).catch((e) => showError(e.message)));
      list.append(el("li", {}, `superstep ${c.superstep} · ${c.status}` + (c.pending.length ? ` · ${c.pending.length} pending` : "") + " ", btn));
    }
    if (!checkpoints.length) list.append(el("li", {}, "no checkpoints"));
  }

  async function resume(checkpointId) {
    showError("");
    const s = await call("POST", `/run/${state.run.id}/resume`, { checkpoint_id: checkpointId });
    resetRun();
    if (state.current.graph) drawGraph(state.current.graph);
    $("timeline").append(el("li", {}, el("span", { class: "t" }, "Resume"), `from checkpoint ${checkpointId}`));
    summary(s); follow(s);
  }

  // -- wiring ---------------------------------------------------------------------------
  function onSubmit(id, handler) {
    $(id).addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = $(id).querySelector("input");
      const value = input.value.trim();
      if (!value) return;
      input.value = "";
      handler(value).catch((err) => showError(err.message));
    });
  }
  onSubmit("chat-form", sendChat);
  onSubmit("run-form", startRun);
  $("chat-new").addEventListener("click", () => { state.chatId = null; $("chat-log").textContent = ""; });
  $("tab-chat").addEventListener("click", () => tab("chat"));
  $("tab-run").addEventListener("click", () => tab("run"));
  $("token-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // the server checks the token and sets its cookie (HttpOnly: this page never holds it);
    // a header carries bytes, so the token goes as its UTF-8 bytes, whatever its characters
    const bytes = String.fromCharCode(...new TextEncoder().encode($("token").value));
    $("token").value = "";
    const res = await fetch(api + "/login", {
      method: "POST", credentials: "same-origin", body: "{}",
      headers: { "Content-Type": "application/json", "Authorization": "Bearer " + bytes },
    });
    if (res.ok) location.reload();
    else showError(res.status === 401 ? "that token is not this server's" : "login failed: " + res.status);
  });
  window.addEventListener("error", (ev) => showError("page error: " + ev.message));
  loadEntries();
})();
