// Chorus dashboard: plain JavaScript, no build step.
// Every text that came from a body is put in the page as text (textContent), never
// as HTML; the only HTML inserted is what the server rendered and sanitized (an
// answer's markdown, a diff's colours), under a Content-Security-Policy with no
// inline script.
"use strict";

const CSRF = document.querySelector('meta[name="csrf"]')?.content || "";
const MAX_RAW = 3000; // raw event lines kept; older ones are paged from the log

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "for") node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined || c === "") continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

async function post(url, body) {
  const resp = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": CSRF },
    body: JSON.stringify(body || {}),
  });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(data.error || resp.statusText);
  return data;
}

function money(v) { return v == null ? "-" : "$" + v.toFixed(4); }
function secs(v) { return v == null ? "-" : v < 90 ? v.toFixed(0) + "s" : (v / 60).toFixed(1) + "m"; }
function ago(ts) {
  const d = Date.now() / 1000 - ts;
  return d < 90 ? d.toFixed(0) + "s ago" : d < 5400 ? (d / 60).toFixed(0) + "m ago" : (d / 3600).toFixed(1) + "h ago";
}
function statusChip(status) { return el("span", { class: "status s-" + status }, status); }

// -- one live stream per page: the job list, the board, a job's state, the teams -------

const liveHandlers = {};
let liveSource = null;

function live(topics) {
  if (liveSource) liveSource.close();
  liveSource = new EventSource("/api/live?topics=" + encodeURIComponent(topics.join(",")));
  for (const name of ["jobs", "board", "job", "teams", "health"]) {
    liveSource.addEventListener(name, (msg) => {
      const data = JSON.parse(msg.data);
      for (const handler of liveHandlers[name] || []) handler(data);
    });
  }
}

function onLive(topic, handler) { (liveHandlers[topic] = liveHandlers[topic] || []).push(handler); }

onLive("board", (items) => {
  const count = document.getElementById("flag-count");
  if (count) count.textContent = items.length ? "(" + items.length + ")" : "";
});

// -- a new job, from any page ----------------------------------------------------------------

function newJob() {
  const dialog = document.getElementById("new-job");
  const form = document.getElementById("new-job-form");
  const error = document.getElementById("nj-error");
  const open = () => { error.hidden = true; dialog.showModal(); document.getElementById("nj-prompt").focus(); };
  document.getElementById("new-job-open").onclick = open;
  document.getElementById("empty-new")?.addEventListener("click", open);
  document.getElementById("nj-cancel").onclick = () => dialog.close();
  form.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); }
  });
  form.onsubmit = async (e) => {
    e.preventDefault();
    const v = (id) => document.getElementById(id).value;
    const button = document.getElementById("nj-submit");
    button.disabled = true;
    try {
      const made = await post("/api/jobs", {
        prompt: v("nj-prompt"), body: v("nj-body"), cwd: v("nj-cwd"),
        permission_mode: v("nj-mode"), framework: v("nj-framework"),
        worktree: document.getElementById("nj-worktree").checked,
      });
      location.assign(made.url);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
    } finally { button.disabled = false; }
  };
  return open;
}

// -- keyboard shortcuts ------------------------------------------------------------------------

function typing(target) {
  return target.closest("input, textarea, select, [contenteditable], dialog[open]") !== null;
}

function shortcuts(openNewJob) {
  const GO = { j: "/", f: "/flags", t: "/teams", r: "/routines", p: "/health", m: "/memory", a: "/audit" };
  let pendingG = false;
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (pendingG) { pendingG = false; if (GO[e.key]) { e.preventDefault(); location.assign(GO[e.key]); } return; }
    const act = {
      n: openNewJob,
      g: () => { pendingG = true; },
      "?": () => document.getElementById("keys").showModal(),
      "/": () => document.getElementById("filter")?.focus(),
      i: () => document.getElementById("steer-text")?.focus(),
      c: () => document.getElementById("changes")?.scrollIntoView(),
      e: () => { const raw = document.getElementById("raw-box"); if (raw) raw.open = !raw.open; },
    }[e.key];
    if (act) { e.preventDefault(); act(); }
  });
}

// -- jobs page ---------------------------------------------------------------------------

const archived = new Set(JSON.parse(localStorage.getItem("chorus-archived") || "[]"));
let lastJobs = [];

function saveArchived() { localStorage.setItem("chorus-archived", JSON.stringify([...archived])); }

function jobRow(job) {
  const archive = el("button", { class: "link", type: "button" }, archived.has(job.id) ? "unarchive" : "archive");
  archive.onclick = () => {
    archived.has(job.id) ? archived.delete(job.id) : archived.add(job.id);
    saveArchived();
    showJobs();
  };
  const flags = job.flags ? el("span", { class: "badge" }, job.flags + " waiting") : "";
  return el("tr", { "data-job": job.id, "data-status": job.status },
    el("td", {}, statusChip(job.status), " ", flags),
    el("td", {}, el("a", { href: "/jobs/" + job.id }, el("code", {}, job.id.slice(0, 12)))),
    el("td", { class: "prompt-cell", title: job.prompt }, job.prompt),
    el("td", {}, job.body_name || job.body || "-"),
    el("td", { class: "wide-only" }, money(job.cost_usd)),
    el("td", { class: "wide-only" }, secs(job.duration_s)),
    el("td", { class: "wide-only" }, ago(job.created_at)),
    el("td", {}, archive));
}

function showJobs() {
  const text = document.getElementById("filter").value.toLowerCase();
  const state = document.getElementById("state-filter").value;
  const showArchived = document.getElementById("show-archived").checked;
  const shown = lastJobs.filter((j) =>
    (showArchived || !archived.has(j.id)) &&
    (!state || j.status === state) &&
    (!text || JSON.stringify([j.id, j.prompt, j.body, j.body_name, j.status]).toLowerCase().includes(text)));
  document.querySelector("#jobs tbody").replaceChildren(...shown.map(jobRow));
  document.getElementById("empty").hidden = lastJobs.length > 0;
}

function jobsPage() {
  for (const id of ["filter", "state-filter", "show-archived"]) {
    document.getElementById(id).addEventListener("input", showJobs);
  }
  onLive("jobs", (jobs) => { lastJobs = jobs; showJobs(); });
  live(["jobs", "board"]);
}

// -- job page: the conversation ---------------------------------------------------------------

const BOOKKEEPING = new Set(["session_started", "status", "control_request", "control_response", "usage",
  "metered", "permission_request", "unknown", "memory", "file_change"]);

let jobCwd = ""; // the session's folder: paths inside it are shown relative

function shortPath(path) {
  const base = jobCwd.replace(/\/+$/, "") + "/";
  return jobCwd && path.startsWith(base) ? path.slice(base.length) : path;
}

function toolSummary(ev) {
  const input = ev.input || {};
  const pick = (...keys) => keys.map((k) => input[k]).find((v) => typeof v === "string" && v);
  if (ev.tool === "shell") return ["$ " + (pick("command", "cmd") || (Array.isArray(input.command) ? input.command.join(" ") : "")), "cmd"];
  const path = pick("file_path", "path", "filename", "notebook_path");
  if (path) return [shortPath(path), "path"];
  const other = pick("pattern", "query", "url", "prompt", "description") || ev.title;
  if (other) return [other, "text"];
  const pairs = Object.entries(input).slice(0, 4).map(([k, v]) => k + ": " + (typeof v === "string" ? v : JSON.stringify(v)));
  return [pairs.join(" · ").slice(0, 300), "text"];
}

class Conversation {
  constructor(list, raw) {
    this.list = list;
    this.raw = raw;
    this.messages = new Map(); // message_id -> bubble
    this.thoughts = new Map(); // message_id -> thinking block
    this.cards = new Map(); // call_id -> tool card
    this.requests = new Map(); // permission request_id -> call_id
    this.onWrite = () => {};
  }

  add(ev, where) {
    if (ev.type === "session_started" && ev.cwd) jobCwd = ev.cwd;
    this.rawLine(ev, where);
    if (where === "top") return; // older events go to the raw list only
    const handler = this["on_" + ev.type];
    if (handler) handler.call(this, ev);
    else if (!BOOKKEEPING.has(ev.type)) this.meta(ev.type.replace(/_/g, " "), "");
  }

  rawLine(ev, where) {
    const line = el("li", { "data-seq": ev.seq, class: "t-" + ev.type },
      el("span", { class: "seq" }, ev.seq), el("span", { class: "who" }, ev.type),
      el("span", { class: "what" }, JSON.stringify(ev)));
    if (where === "top") this.raw.prepend(line); else this.raw.append(line);
    while (this.raw.children.length > MAX_RAW) this.raw.firstElementChild.remove();
  }

  bubble(kind, who, body, id) {
    const li = el("li", { class: "msg " + kind, "data-kind": kind, "data-ev": id }, el("div", { class: "who" }, who), body);
    this.list.append(li);
    return li;
  }

  meta(what, detail, cls) {
    return this.bubble("meta " + (cls || ""), "", el("div", {}, what, detail ? " · " + detail : ""));
  }

  on_text_delta(ev) {
    let bubble = this.messages.get(ev.message_id);
    if (!bubble) {
      bubble = this.bubble("assistant", "Agent", el("div", { class: "plain md" }), ev.message_id);
      if (ev.message_id) this.messages.set(ev.message_id, bubble);
    }
    bubble.lastChild.append(ev.text);
  }

  on_text(ev) {
    let bubble = ev.message_id && this.messages.get(ev.message_id);
    if (!bubble) {
      bubble = this.bubble("assistant", "Agent", el("div", { class: "md" }), ev.message_id);
      if (ev.message_id) this.messages.set(ev.message_id, bubble);
    }
    const body = el("div", { class: "md" });
    if (typeof ev.html === "string") body.innerHTML = ev.html; // rendered and sanitized by the server
    else body.textContent = ev.text;
    bubble.lastChild.replaceWith(body);
    bubble.classList.add("complete");
  }

  on_thinking(ev) {
    let block = ev.message_id && this.thoughts.get(ev.message_id);
    if (!block || !ev.delta) {
      block = el("details", { class: "thinking" }, el("summary", {}, "Thinking"), el("div", { class: "plain" }));
      this.bubble("thinking", "", block);
      if (ev.message_id) this.thoughts.set(ev.message_id, block);
    }
    block.lastChild.append(ev.text);
  }

  on_steer(ev) { this.bubble("you", "You (steer)", el("div", { class: "plain" }, ev.text)); }
  on_queued(ev) { this.bubble("you", "You (queued)", el("div", { class: "plain" }, ev.text)); }

  on_tool_call(ev) {
    const [summary, kind] = toolSummary(ev);
    const output = el("pre", { class: "out", tabIndex: 0 });
    const state = el("span", { class: "status s-running tool-state" }, "running");
    const why = el("p", { class: "why", hidden: true });
    const card = el("li", { class: "msg tool", "data-kind": "tool", "data-call": ev.call_id, "data-tool": ev.tool },
      el("div", { class: "toolhead" },
        el("span", { class: "toolname" }, ev.native_tool || ev.tool), " ",
        el("code", { class: "summary " + kind }, summary), " ", state),
      why,
      el("details", { class: "output" }, el("summary", {}, "Output"), output));
    this.list.append(card);
    this.cards.set(ev.call_id, { card, output, state, why, tool: ev.tool, streamed: false });
    if (lastApprovals.length) markAsking(lastApprovals);
  }

  setState(call, text, status) {
    call.state.textContent = text;
    call.state.className = "status s-" + status + " tool-state";
    call.card.dataset.state = status;
  }

  on_tool_output_delta(ev) {
    const call = this.cards.get(ev.call_id);
    if (!call) return;
    if (!call.streamed) { call.output.textContent = ""; call.streamed = true; }
    call.output.append(ev.text);
  }

  on_tool_result(ev) {
    const call = this.cards.get(ev.call_id);
    if (!call) return this.meta("tool result", ev.output.slice(0, 200));
    call.output.textContent = ev.output;
    if (call.card.dataset.state === "denied") return;
    const failed = ev.is_error || ev.status === "failed";
    this.setState(call, failed ? "error" + (ev.exit_code != null ? " " + ev.exit_code : "") : "done", failed ? "failed" : "done");
    if (!failed && (call.tool === "write" || call.tool === "edit")) this.onWrite();
  }

  on_permission_request(ev) {
    if (ev.call_id) this.requests.set(ev.request_id, ev.call_id);
  }

  on_permission_decision(ev) {
    const call = this.cards.get(this.requests.get(ev.request_id));
    if (!call) {
      if (ev.decision === "deny") this.meta("denied", ev.reason || "", "bad");
      return;
    }
    if (ev.decision === "deny") {
      this.setState(call, "denied", "failed");
      call.card.dataset.state = "denied";
      call.why.textContent = "Denied: " + (ev.reason || "by the policy");
      call.why.hidden = false;
    } else if (ev.source === "person" || ev.source === "flag") {
      call.why.textContent = "Allowed by you";
      call.why.hidden = false;
    }
  }

  on_flag(ev) {
    const what = ev.name === "raised" ? ev.text : ev.name + (ev.choice ? ": " + ev.choice : "") + (ev.text ? " · " + ev.text : "");
    const opts = ev.options && ev.options.length ? " (" + ev.options.join(" / ") + (ev.default ? ", default " + ev.default : "") + ")" : "";
    this.bubble("flag", "Flag " + (ev.name || ""), el("div", { class: "plain" }, what + opts));
  }

  on_plan(ev) {
    const items = (ev.entries || []).map((p) => el("li", { class: "plan-" + p.status }, p.content + " (" + p.status + ")"));
    this.bubble("plan", "Plan", el("ul", {}, ...items));
  }

  on_turn_completed(ev) {
    const bits = ["turn done"];
    if (ev.cost_usd != null) bits.push(money(ev.cost_usd));
    if (ev.duration_ms != null) bits.push((ev.duration_ms / 1000).toFixed(1) + "s");
    this.meta(bits.join(" · "), "");
  }

  on_turn_failed(ev) { this.meta("turn failed", ev.error ? ev.error.code + ": " + ev.error.message : "", "bad"); }
  on_job_ended(ev) { this.meta("job " + ev.state, ev.error ? ev.error.code + ": " + ev.error.message : "", ev.error ? "bad" : "end"); }
  on_notice(ev) { this.meta("notice", ev.message); }
  on_compatibility_warning(ev) { this.meta("compatibility", ev.control + ": " + ev.message); }
  on_retry_notice(ev) { this.meta("retrying", "attempt " + ev.attempt + (ev.error ? " · " + ev.error.code : "")); }
  on_routed(ev) { this.meta("routed to " + ev.to_body, ev.reason); }
  on_handoff(ev) { this.meta("handed off " + ev.from_body + " → " + ev.to_body, ev.reason ? ev.reason.code : ""); }
  on_worktree(ev) { this.meta("worktree " + ev.action, ev.branch + (ev.detail ? " · " + ev.detail : "")); }
  on_session_ended(ev) { if (ev.error) this.meta("session ended", ev.error.code + ": " + ev.error.message, "bad"); }
}

// -- job page: what waits for the person, the job's state, its changes -------------------------

function waitingCard(item) {
  const out = el("span", { class: "muted", role: "status" });
  const reason = el("input", { class: "reason", type: "text", placeholder: "a note for the agent (optional)", "aria-label": "A note for the agent" });
  async function send(verb, choice) {
    try {
      await post(`/api/flags/${item.id}/${verb}`, { choice: choice || null, reason: reason.value || null });
      out.textContent = verb === "approve" ? "sent: allowed" : "sent: denied";
      for (const b of card.querySelectorAll("button")) b.disabled = true;
    } catch (err) { out.textContent = "error: " + err.message; }
  }
  const buttons = item.kind === "approval"
    ? [el("button", { class: "approve primary", type: "button", onclick: () => send("approve") }, "Allow"),
       el("button", { class: "reject danger", type: "button", onclick: () => send("reject") }, "Deny")]
    : [...(item.options.length ? item.options : [item.default]).map((o) =>
        el("button", { class: "choose" + (o === item.default ? " primary" : ""), type: "button", "data-choice": o,
          onclick: () => send("approve", o) }, o + (o === item.default ? " (default)" : ""))),
       el("button", { class: "reject danger", type: "button", onclick: () => send("reject") }, "Reject")];
  const left = Math.max(0, item.deadline_at - Date.now() / 1000).toFixed(0);
  const card = el("div", { class: "card waiting-card k-" + item.kind, "data-flag": item.id, role: "group", "aria-label": item.kind === "approval" ? "Approval" : "Flag" },
    el("div", {}, el("strong", {}, item.kind === "approval" ? "Waiting for your approval" : "The agent flagged a choice"),
      el("span", { class: "muted" }, " · " + (item.kind === "approval" ? "default " + item.default : "goes on with " + item.default) + " in " + left + "s")),
    el("p", { class: "question" }, item.question),
    item.reason && item.kind === "approval" ? el("p", { class: "muted small" }, "Why it asks: " + item.reason) : "",
    el("div", { class: "actions" }, ...buttons, reason, out));
  return card;
}

// A running tool call an approval waits on says so on its card.
let lastApprovals = [];
function markAsking(approvals) {
  lastApprovals = approvals;
  for (const card of document.querySelectorAll('.msg.tool:not([data-state]), .msg.tool[data-state="asking"]')) {
    const said = card.querySelector(".summary").textContent.replace(/^\$ /, "");
    const asking = approvals.some((item) => said && item.question.includes(said));
    const state = card.querySelector(".tool-state");
    state.textContent = asking ? "waiting for you" : "running";
    state.className = "status tool-state s-" + (asking ? "waiting" : "running");
    if (asking) card.dataset.state = "asking"; else delete card.dataset.state;
  }
}

function jobState(data, jobId) {
  const badge = document.getElementById("job-status");
  badge.textContent = data.status;
  badge.className = "status s-" + data.status;
  document.getElementById("interrupt").hidden = data.finished;
  document.getElementById("send-steer").textContent = data.finished ? "Follow up" : "Steer";
  document.getElementById("job").dataset.finished = data.finished ? "yes" : "no";
  const waiting = document.getElementById("waiting");
  const ids = data.pending.map((item) => item.id).join(",");
  if (waiting.dataset.ids !== ids) { // a card being typed in stays as it is
    waiting.dataset.ids = ids;
    waiting.replaceChildren(...data.pending.map((item) => waitingCard(item)));
  }
  markAsking(data.pending.filter((item) => item.kind === "approval"));
  const follow = document.getElementById("followups");
  follow.hidden = !data.followups.length;
  follow.replaceChildren("Follow-ups in this session: ", ...data.followups.map((j) =>
    el("a", { href: "/jobs/" + j.id }, j.prompt.slice(0, 40) + " (" + j.state + ") ")));
  if (data.error) {
    const banner = document.getElementById("error-banner");
    banner.replaceChildren(el("strong", {}, data.error.code), " " + data.error.message);
    banner.hidden = false;
  }
}

function worktreeBar(jobId, wt, finished, refresh) {
  const bar = document.getElementById("worktree-bar");
  bar.hidden = !wt;
  if (!wt) return;
  const out = el("span", { class: "muted", role: "status" }, bar.dataset.note || "");
  const said = (text) => { bar.dataset.note = text; out.textContent = text; };
  const facts = el("span", {}, "branch ", el("code", {}, wt.branch), " → ", el("code", {}, wt.into), " · ",
    statusChip(wt.state), wt.ahead != null ? " · " + wt.ahead + " commit(s) ahead" : "", wt.dirty ? " · " + wt.dirty + " uncommitted" : "");
  const open = finished && !["merged", "removed", "missing"].includes(wt.state);
  const merge = el("button", { class: "primary", id: "merge", type: "button", hidden: !open }, "Merge");
  const discard = el("button", { class: "danger", id: "discard", type: "button", hidden: !(finished && wt.state !== "removed") }, "Discard");
  merge.onclick = async () => {
    try { const r = await post(`/api/jobs/${jobId}/merge`, { squash: false }); said("merged into " + r.into + " at " + String(r.head).slice(0, 10)); refresh(); }
    catch (err) { said("error: " + err.message); }
  };
  discard.onclick = async () => {
    if (!confirm("Discard this job's worktree and branch, with any unmerged work?")) return;
    try { const r = await post(`/api/jobs/${jobId}/discard`); said("discarded" + (r.discarded.length ? " " + r.discarded.length + " commit(s)" : "")); refresh(); }
    catch (err) { said("error: " + err.message); }
  };
  bar.replaceChildren(facts, " ", merge, " ", discard, " ", out);
}

function fileDiff(file) {
  const pre = el("pre", { class: "hl diff", tabIndex: 0, "aria-label": "diff of " + file.path });
  pre.innerHTML = file.html; // coloured and escaped by the server
  return el("details", { class: "file", open: true, "data-path": file.path },
    el("summary", {}, el("code", {}, file.path), " ", el("span", { class: "add" }, "+" + file.added), " ", el("span", { class: "del" }, "−" + file.removed)),
    pre);
}

function changesPane(jobId) {
  let timer = null;
  let finished = document.getElementById("job").dataset.finished === "yes";
  async function load() {
    const resp = await fetch(`/api/jobs/${jobId}/changes`);
    if (!resp.ok) return;
    const data = await resp.json();
    document.getElementById("files").replaceChildren(...data.files.map(fileDiff));
    document.getElementById("changes-empty").hidden = data.files.length > 0;
    worktreeBar(jobId, data.worktree, finished, load);
  }
  function soon() { clearTimeout(timer); timer = setTimeout(load, 400); }
  document.getElementById("changes-refresh").onclick = load;
  load();
  return { soon, finished: (v) => { if (v !== finished) { finished = v; soon(); } } };
}

function jobPage() {
  const root = document.getElementById("job");
  const jobId = root.dataset.job;
  jobCwd = root.dataset.cwd || "";
  const convo = new Conversation(document.getElementById("conversation"), document.getElementById("raw"));
  const changes = changesPane(jobId);
  convo.onWrite = changes.soon;
  let firstSeq = null;
  const queue = [];
  let scheduled = false;
  function nearBottom() { return window.innerHeight + window.scrollY >= document.body.scrollHeight - 200; }
  function flush() {
    scheduled = false;
    const follow = nearBottom();
    for (const ev of queue.splice(0)) convo.add(ev, "bottom");
    if (follow) window.scrollTo(0, document.body.scrollHeight);
  }
  const source = new EventSource("/api/jobs/" + jobId + "/stream");
  window.chorusStreamOpens = 0; // how many times the stream (re)connected
  source.onopen = () => { window.chorusStreamOpens += 1; };
  source.onmessage = (msg) => {
    const ev = JSON.parse(msg.data);
    if (firstSeq === null) {
      firstSeq = ev.seq;
      document.getElementById("load-earlier").hidden = ev.seq <= 1;
    }
    if (ev.type === "job_ended") changes.soon();
    queue.push(ev);
    if (!scheduled) { scheduled = true; requestAnimationFrame(flush); }
  };
  source.addEventListener("end", () => source.close());
  document.getElementById("load-earlier").onclick = async () => {
    const resp = await fetch(`/api/jobs/${jobId}/events?before=${firstSeq}&limit=200`);
    const data = await resp.json();
    for (const ev of data.events.reverse()) convo.add(ev, "top");
    firstSeq = data.first_seq;
    document.getElementById("load-earlier").hidden = firstSeq <= 1;
  };
  onLive("job", (data) => { jobState(data, jobId); changes.finished(data.finished); });
  live(["job:" + jobId, "board"]);
  composer(jobId);
  document.getElementById("interrupt").onclick = async () => {
    const out = document.getElementById("steer-result");
    try { out.textContent = "interrupt: " + (await post(`/api/jobs/${jobId}/interrupt`)).result; }
    catch (err) { out.textContent = "error: " + err.message; }
  };
}

function composer(jobId) {
  const box = document.getElementById("steer-text");
  const out = document.getElementById("steer-result");
  async function send(mode) {
    if (!box.value.trim()) return;
    try {
      const r = await post(`/api/jobs/${jobId}/steer`, { text: box.value, mode });
      out.replaceChildren("sent: " + r.how.replace(/_/g, " "));
      if (r.followup_job_id) out.append(" → ", el("a", { href: "/jobs/" + r.followup_job_id }, "open the follow-up"));
      box.value = "";
    } catch (err) { out.textContent = "error: " + err.message; }
  }
  document.getElementById("steer-form").onsubmit = (e) => { e.preventDefault(); send("steer"); };
  document.getElementById("send-queue").onclick = () => send("queue");
  box.addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey) return;
    e.preventDefault();
    send(e.altKey ? "queue" : "steer");
  });
}

// -- flags page --------------------------------------------------------------------------

function flagCard(item) {
  const out = el("span", { class: "muted", role: "status" });
  const card = el("div", { class: "card k-" + item.kind + " f-" + item.status, "data-flag": item.id },
    el("div", {}, statusChip(item.status), " ",
      el("b", {}, item.kind), " ", el("code", {}, item.id), " · job ",
      item.job_id ? el("a", { href: "/jobs/" + item.job_id }, el("code", {}, item.job_id.slice(0, 12))) : "-"),
    el("p", { class: "question" }, item.question),
    el("p", { class: "muted" }, "default: " + item.default +
      (item.status === "pending" ? " · final in " + Math.max(0, item.deadline_at - Date.now() / 1000).toFixed(0) + "s"
        : " · " + (item.choice ? "chose " + item.choice : "") + (item.reason ? " · " + item.reason : "") + (item.decided_by ? " · by " + item.decided_by : ""))));
  if (item.status !== "pending") return card;
  const choice = el("select", { class: "choice", "aria-label": "Your choice" }, ...(item.options.length ? item.options : [item.default]).map((o) =>
    el("option", { value: o, selected: o === item.default }, o)));
  const reason = el("input", { class: "reason", type: "text", placeholder: "reason (for a rejection)", "aria-label": "Reason" });
  const approve = el("button", { class: "approve", type: "button" }, item.kind === "approval" ? "Allow" : "Approve");
  const reject = el("button", { class: "reject danger", type: "button" }, item.kind === "approval" ? "Deny" : "Reject");
  async function send(verb) {
    try {
      await post(`/api/flags/${item.id}/${verb}`, { choice: item.kind === "flag" && verb === "approve" ? choice.value : null, reason: reason.value || null });
    } catch (err) { out.textContent = "error: " + err.message; }
  }
  approve.onclick = () => send("approve");
  reject.onclick = () => send("reject");
  card.append(el("div", { class: "actions" }, item.kind === "flag" ? choice : "", approve, reason, reject, out));
  return card;
}

function flagsPage() {
  const all = document.getElementById("show-decided");
  onLive("board", (items) => {
    const boardEl = document.getElementById("board");
    if (!boardEl.contains(document.activeElement)) boardEl.replaceChildren(...items.map(flagCard));
    document.getElementById("board-empty").hidden = items.length > 0;
  });
  const connect = () => live([all.checked ? "board:all" : "board"]);
  all.addEventListener("input", connect);
  connect();
}

// -- routines page -----------------------------------------------------------------------

function routinesPage() {
  for (const cell of document.querySelectorAll("td.ts")) {
    const ts = parseFloat(cell.dataset.ts);
    if (ts) cell.textContent = new Date(ts * 1000).toLocaleString();
  }
  for (const button of document.querySelectorAll(".run-routine")) {
    button.onclick = async () => {
      try { const r = await post(`/api/routines/${encodeURIComponent(button.dataset.name)}/run`); button.textContent = r.outcome; }
      catch (err) { button.textContent = "error: " + err.message; }
    };
  }
  live(["board"]);
}

// -- teams page: members and mailbox traffic as they change ------------------------------------

function teamsPage() {
  onLive("teams", (teams) => {
    for (const team of teams) {
      const section = [...document.querySelectorAll("section.team")].find((s) => s.dataset.team === team.name);
      if (!section) { location.reload(); return; } // a new team: its section is made by the server
      section.querySelector("tbody.members").replaceChildren(...team.members.map((m) =>
        el("tr", { "data-member": m.name }, el("td", {}, m.name), el("td", {}, m.body), el("td", {}, m.role || "-"),
          el("td", { class: "member-state" }, m.waiting ? m.waiting + " message(s) waiting" : "idle"))));
      section.querySelector("ol.mailbox").replaceChildren(...(team.messages || []).map((m) =>
        el("li", { class: "ev msg", "data-msg": m.seq },
          el("span", { class: "seq" }, m.seq), el("span", { class: "who" }, m.sender + " → " + m.recipient),
          el("span", { class: "what" }, m.kind + " · " + m.state + " · " + (typeof m.body?.text === "string" ? m.body.text : JSON.stringify(m.body))))));
    }
  });
  live(["teams", "board"]);
}

// -- providers page ----------------------------------------------------------------------------

function providerState(h) {
  if (h.unready) return [el("span", { class: "status s-failed" }, "cannot run"), " " + h.unready];
  if (h.cooldown_s > 0) return [el("span", { class: "status s-waiting" }, "cooling down"), " ready in " + secs(h.cooldown_s)];
  if (h.quota !== "ok") return [el("span", { class: "status s-flagged" }, h.quota)];
  return [el("span", { class: "status s-done" }, "ready")];
}

function healthPage() {
  onLive("health", (rows) => {
    if (!rows.length) return;
    document.querySelector("#health tbody").replaceChildren(...rows.map((h) =>
      el("tr", { "data-body": h.body },
        el("td", {}, el("strong", {}, h.name), " ", el("span", { class: "muted small" }, h.body)),
        el("td", {}, h.accounts.join(", ")),
        el("td", {}, h.runs ? h.ok + "/" + h.runs + " ok" : "no runs yet"),
        el("td", {}, ...providerState(h)),
        el("td", {}, h.spend_usd ? money(h.spend_usd) : "-"),
        el("td", {}, h.last_error || "-"))));
  });
  live(["health", "board"]);
}

const PAGES = { jobs: jobsPage, job: jobPage, flags: flagsPage, routines: routinesPage, teams: teamsPage, health: healthPage };
const openNewJob = newJob();
shortcuts(openNewJob);
const start = PAGES[document.body.dataset.page];
if (start) start(); else live(["board"]);
