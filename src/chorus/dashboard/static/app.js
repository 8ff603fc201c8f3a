// Chorus dashboard: plain JavaScript, no build step.
"use strict";

const CSRF = document.querySelector('meta[name="csrf"]')?.content || "";
const MAX_LINES = 2000; // lines kept in each pane; older ones are paged from the log

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
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

// -- jobs page ---------------------------------------------------------------------------

const archived = new Set(JSON.parse(localStorage.getItem("chorus-archived") || "[]"));

function saveArchived() { localStorage.setItem("chorus-archived", JSON.stringify([...archived])); }

function jobRow(job) {
  const archive = el("button", { class: "link", textContent: archived.has(job.id) ? "unarchive" : "archive" });
  archive.onclick = () => {
    archived.has(job.id) ? archived.delete(job.id) : archived.add(job.id);
    saveArchived();
    refreshJobs();
  };
  const flags = job.flags ? el("span", { class: "badge" }, job.flags + " flag" + (job.flags > 1 ? "s" : "")) : "";
  return el("tr", { "data-job": job.id, "data-status": job.status },
    el("td", {}, el("span", { class: "status s-" + job.status }, job.status), " ", flags),
    el("td", {}, el("a", { href: "/jobs/" + job.id }, el("code", {}, job.id.slice(0, 12)))),
    el("td", { class: "prompt-cell", title: job.prompt }, job.prompt),
    el("td", {}, job.body || "-"),
    el("td", {}, el("code", {}, (job.session_id || "-").slice(0, 12))),
    el("td", {}, money(job.cost_usd)),
    el("td", {}, secs(job.duration_s)),
    el("td", {}, ago(job.created_at)),
    el("td", {}, archive));
}

async function refreshJobs() {
  const resp = await fetch("/api/jobs");
  if (!resp.ok) return;
  const jobs = await resp.json();
  const text = document.getElementById("filter").value.toLowerCase();
  const state = document.getElementById("state-filter").value;
  const showArchived = document.getElementById("show-archived").checked;
  const shown = jobs.filter((j) =>
    (showArchived || !archived.has(j.id)) &&
    (!state || j.status === state) &&
    (!text || JSON.stringify([j.id, j.prompt, j.body, j.status]).toLowerCase().includes(text)));
  document.querySelector("#jobs tbody").replaceChildren(...shown.map(jobRow));
  document.getElementById("empty").hidden = jobs.length > 0;
}

function jobsPage() {
  for (const id of ["filter", "state-filter", "show-archived"]) {
    document.getElementById(id).addEventListener("input", refreshJobs);
  }
  refreshJobs();
  setInterval(refreshJobs, 1000);
}

// -- job page ----------------------------------------------------------------------------

const CONVERSATION = new Set(["text", "text_delta", "thinking", "steer", "queued", "turn_completed", "turn_failed", "job_ended"]);

function describe(ev) {
  switch (ev.type) {
    case "text": return ["assistant", ev.text];
    case "text_delta": return ["assistant", ev.text];
    case "thinking": return ["thinking", ev.text];
    case "steer": return ["you", ev.text];
    case "queued": return ["queued", ev.text];
    case "turn_completed": return ["turn", "completed" + (ev.cost_usd != null ? " · " + money(ev.cost_usd) : "")];
    case "turn_failed": return ["turn", "failed: " + (ev.error ? ev.error.code + " " + ev.error.message : "")];
    case "job_ended": return ["job", ev.state + (ev.error ? ": " + ev.error.code + " " + ev.error.message : "")];
    case "tool_call": return [ev.tool || ev.name || "tool", JSON.stringify(ev.input || {})];
    case "tool_result": return ["result", typeof ev.output === "string" ? ev.output : JSON.stringify(ev.output ?? ev.content ?? "")];
    case "tool_output_delta": return ["output", ev.text || ""];
    case "flag": return ["flag " + (ev.flag_id || ""), ev.name + ": " + ev.text + (ev.default ? " (default: " + ev.default + (ev.choice ? ", chose: " + ev.choice : "") + ")" : "")];
    case "notice": return ["notice", ev.message];
    case "permission_request": return ["permission?", JSON.stringify(ev)];
    default: return [ev.type, ""];
  }
}

function line(ev) {
  const [who, what] = describe(ev);
  return el("li", { class: "ev t-" + ev.type, "data-seq": ev.seq, "data-line": ev.seq },
    el("span", { class: "seq" }, ev.seq), el("span", { class: "who" }, who), el("span", { class: "what" }, what));
}

// Text deltas of one message join one line (a span per event, each with its seq);
// the message's final text then only marks that line complete.
const streamed = new Map(); // message_id -> the line its deltas went into

function placeDelta(ev, pane) {
  let target = streamed.get(ev.message_id);
  if (!target || !target.isConnected) {
    target = line({ ...ev, text: "" });
    target.querySelector(".what").replaceChildren();
    target.removeAttribute("data-seq"); // each delta's span carries its own
    streamed.set(ev.message_id, target);
    pane.append(target);
  }
  target.querySelector(".what").append(el("span", { "data-seq": ev.seq }, ev.text));
}

function place(ev, where) {
  const pane = document.getElementById(CONVERSATION.has(ev.type) ? "conversation" : "toollog");
  if (where !== "top" && ev.type === "text_delta" && ev.message_id) {
    placeDelta(ev, pane);
  } else if (where !== "top" && ev.type === "text" && streamed.has(ev.message_id)) {
    const done = streamed.get(ev.message_id);
    done.classList.add("complete");
    done.querySelector(".what").append(el("span", { class: "final", "data-seq": ev.seq, title: "complete" }, "✓"));
  } else if (where === "top") pane.prepend(line(ev)); else pane.append(line(ev));
  while (pane.children.length > MAX_LINES) {
    pane.firstElementChild.remove();
    document.getElementById("load-earlier").hidden = false;
  }
}

function jobPage() {
  const root = document.getElementById("job");
  const jobId = root.dataset.job;
  let firstSeq = null;
  const queue = [];
  let scheduled = false;
  function flush() {
    scheduled = false;
    for (const ev of queue.splice(0)) place(ev, "bottom");
    for (const pane of document.querySelectorAll(".split ol")) pane.scrollTop = pane.scrollHeight;
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
    if (ev.type === "job_ended") endOf(ev);
    if (ev.type === "session_started" || ev.type === "turn_completed") setStatus("running");
    queue.push(ev);
    if (!scheduled) { scheduled = true; requestAnimationFrame(flush); }
  };
  source.addEventListener("end", () => source.close());
  document.getElementById("load-earlier").onclick = async () => {
    const resp = await fetch(`/api/jobs/${jobId}/events?before=${firstSeq}&limit=200`);
    const data = await resp.json();
    for (const ev of data.events.reverse()) place(ev, "top");
    firstSeq = data.first_seq;
    document.getElementById("load-earlier").hidden = firstSeq <= 1;
  };
  document.getElementById("steer-form").onsubmit = async (e) => {
    e.preventDefault();
    const box = document.getElementById("steer-text");
    const out = document.getElementById("steer-result");
    try {
      const r = await post(`/api/jobs/${jobId}/steer`, { text: box.value, mode: document.getElementById("steer-mode").value });
      out.textContent = "sent: " + r.how + (r.followup_job_id ? " → " + r.followup_job_id.slice(0, 12) : "");
      box.value = "";
    } catch (err) { out.textContent = "error: " + err.message; }
  };
  document.getElementById("interrupt").onclick = async () => {
    const out = document.getElementById("steer-result");
    try { out.textContent = "interrupt: " + (await post(`/api/jobs/${jobId}/interrupt`)).result; }
    catch (err) { out.textContent = "error: " + err.message; }
  };
}

function setStatus(text) {
  const badge = document.getElementById("job-status");
  badge.textContent = text;
  badge.className = "status s-" + text;
}

function endOf(ev) {
  setStatus(ev.state);
  if (ev.error) {
    const banner = document.getElementById("error-banner");
    banner.replaceChildren(el("strong", {}, ev.error.code), " " + ev.error.message);
    banner.hidden = false;
  }
}

// -- flags page --------------------------------------------------------------------------

function flagCard(item) {
  const out = el("span", { class: "muted" });
  const card = el("div", { class: "card k-" + item.kind + " f-" + item.status, "data-flag": item.id },
    el("div", {}, el("span", { class: "status s-" + item.status }, item.status), " ",
      el("b", {}, item.kind), " ", el("code", {}, item.id), " · job ",
      item.job_id ? el("a", { href: "/jobs/" + item.job_id }, el("code", {}, item.job_id.slice(0, 12))) : "-"),
    el("p", { class: "question" }, item.question),
    el("p", { class: "muted" }, "default: " + item.default +
      (item.status === "pending" ? " · final in " + Math.max(0, item.deadline_at - Date.now() / 1000).toFixed(0) + "s"
        : " · " + (item.choice ? "chose " + item.choice : "") + (item.reason ? " · " + item.reason : "") + (item.decided_by ? " · by " + item.decided_by : ""))));
  if (item.status !== "pending") return card;
  const choice = el("select", { class: "choice" }, ...(item.options.length ? item.options : [item.default]).map((o) =>
    el("option", { value: o, selected: o === item.default }, o)));
  const reason = el("input", { class: "reason", placeholder: "reason (for a rejection)" });
  const approve = el("button", { class: "approve" }, item.kind === "approval" ? "Allow" : "Approve");
  const reject = el("button", { class: "reject danger" }, item.kind === "approval" ? "Deny" : "Reject");
  async function send(verb) {
    try {
      await post(`/api/flags/${item.id}/${verb}`, { choice: item.kind === "flag" && verb === "approve" ? choice.value : null, reason: reason.value || null });
      refreshFlags();
    } catch (err) { out.textContent = "error: " + err.message; }
  }
  approve.onclick = () => send("approve");
  reject.onclick = () => send("reject");
  card.append(el("div", { class: "actions" }, item.kind === "flag" ? choice : "", approve, reason, reject, out));
  return card;
}

async function refreshFlags() {
  const all = document.getElementById("show-decided").checked ? "?all=1" : "";
  const resp = await fetch("/api/flags" + all);
  if (!resp.ok) return;
  const items = await resp.json();
  const boardEl = document.getElementById("board");
  const focused = boardEl.contains(document.activeElement);
  if (!focused) boardEl.replaceChildren(...items.map(flagCard));
  document.getElementById("board-empty").hidden = items.length > 0;
}

function flagsPage() {
  document.getElementById("show-decided").addEventListener("input", refreshFlags);
  refreshFlags();
  setInterval(refreshFlags, 1500);
}

// -- routines page -----------------------------------------------------------------------

function routinesPage() {
  for (const cell of document.querySelectorAll("td.ts")) {
    const ts = parseFloat(cell.dataset.ts);
    if (ts) cell.textContent = new Date(ts * 1000).toLocaleString();
  }
  for (const button of document.querySelectorAll(".run-routine")) {
    button.onclick = async () => {
      try { const r = await post(`/api/routines/${button.dataset.name}/run`); button.textContent = r.outcome; }
      catch (err) { button.textContent = "error: " + err.message; }
    };
  }
}

async function flagCount() {
  const resp = await fetch("/api/flags");
  if (!resp.ok) return;
  const n = (await resp.json()).length;
  document.getElementById("flag-count").textContent = n ? "(" + n + ")" : "";
}

// -- teams page: the mailbox traffic as it happens -----------------------------------------

function teamsPage() {
  for (const section of document.querySelectorAll("section.team")) {
    const team = section.dataset.team;
    const list = section.querySelector("ol.mailbox");
    let after = 0;
    async function poll() {
      const resp = await fetch(`/api/teams/${encodeURIComponent(team)}/messages?after=${after}`);
      if (!resp.ok) return;
      for (const m of await resp.json()) {
        after = Math.max(after, m.seq);
        list.append(el("li", { class: "ev msg", "data-msg": m.seq },
          el("span", { class: "seq" }, m.seq), el("span", { class: "who" }, m.sender + " → " + m.recipient),
          el("span", { class: "what" }, m.kind + " · " + m.state + " · " + JSON.stringify(m.body))));
      }
    }
    poll();
    setInterval(poll, 1500);
  }
}

const PAGES = { jobs: jobsPage, job: jobPage, flags: flagsPage, routines: routinesPage, teams: teamsPage };
(PAGES[document.body.dataset.page] || (() => {}))();
if (document.getElementById("flag-count")) { flagCount(); setInterval(flagCount, 3000); }
