"""The web UI's stylesheet and script, served as they are (no build step, no inline code)."""

from __future__ import annotations

APP_CSS = """
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #fafafa; --card: #fff; --muted: #57606a;
  --line: #d0d7de; --accent: #0a58ca; --new: #fff8c5; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --card: #161b22;
  --muted: #9da7b3; --line: #30363d; --accent: #6cb6ff; --new: #3b2e00; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible {
  outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--card); padding: .5rem; }
.top { padding: .75rem 1.5rem; border-bottom: 1px solid var(--line); display: flex;
  gap: 1rem; align-items: baseline; flex-wrap: wrap; }
.top h1 { margin: 0; font-size: 1.4rem; } .top h1 a { color: inherit; text-decoration: none; }
.top p { margin: 0; color: var(--muted); }
main { padding: 1rem 1.5rem; max-width: 80rem; margin: 0 auto; }
.filters { display: flex; flex-wrap: wrap; gap: .75rem; align-items: end; margin-bottom: 1rem; }
.filters label { display: flex; flex-direction: column; font-size: .9rem; color: var(--muted); }
.filters input, .filters select, .filters button { font: inherit; padding: .35rem .5rem;
  border: 1px solid var(--line); border-radius: 6px; background: var(--card); color: var(--fg); }
.filters input[type=search] { min-width: 18rem; }
.layout { display: grid; grid-template-columns: minmax(0, 1fr) 18rem; gap: 1.5rem; }
@media (max-width: 60rem) { .layout { grid-template-columns: 1fr; } }
h2 { font-size: 1.15rem; }
.card, .prompt { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .75rem 1rem; margin: 0 0 .75rem; overflow-wrap: anywhere; }
.card.fresh { background: var(--new); transition: background 3s; }
.card header { display: flex; gap: .75rem; align-items: baseline; flex-wrap: wrap; }
.card .type { font-size: .85rem; color: var(--muted); white-space: nowrap; }
.card h3, .prompt h3 { margin: 0; font-size: 1.05rem; }
.subtitle { margin: .25rem 0; color: var(--muted); }
.narrative { margin: .5rem 0; white-space: pre-wrap; }
.facts { margin: .25rem 0; padding-left: 1.25rem; }
.concepts, .files { list-style: none; padding: 0; margin: .25rem 0; display: flex;
  flex-wrap: wrap; gap: .35rem; }
.concepts li { border: 1px solid var(--line); border-radius: 999px; padding: 0 .5rem;
  font-size: .85rem; }
.files li { font-family: ui-monospace, monospace; font-size: .85rem; }
.summary-fields dt { font-weight: 600; } .summary-fields dd { margin: 0 0 .35rem; }
.card footer, .prompt footer { font-size: .85rem; color: var(--muted); margin-top: .35rem; }
.prompt blockquote { margin: .35rem 0; white-space: pre-wrap; }
.ops { border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem;
  background: var(--card); align-self: start; position: sticky; top: 1rem; }
.ops dt { font-size: .85rem; color: var(--muted); } .ops dd { margin: 0 0 .5rem; }
.status { min-height: 1.5em; color: var(--muted); }
.empty { color: var(--muted); }
"""

APP_JS = r"""
"use strict";
(() => {
  const feed = document.getElementById("feed");
  const status = document.getElementById("live-status");
  const types = JSON.parse(document.body.dataset.types || "{}");
  const summaryFields = [["investigated", "Investigated"], ["learned", "Learned"],
    ["completed", "Completed"], ["next_steps", "Next steps"], ["notes", "Notes"]];

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function list(name, values) {
    if (!values || !values.length) return null;
    const ul = el("ul", name);
    ul.setAttribute("aria-label", name);
    for (const v of values) ul.appendChild(el("li", "", v));
    return ul;
  }

  // Built with textContent only: stored text is data, never markup.
  function renderCard(row) {
    const key = row.kind + "-" + row.id;
    const template = document.getElementById("card-template");
    const node = template.content.firstElementChild.cloneNode(true);
    node.id = "row-" + key;
    node.classList.add(row.kind);
    node.dataset.kind = row.kind;
    node.dataset.type = row.kind === "summary" ? "summary" : (row.type || "");
    node.dataset.project = row.project;
    node.dataset.session = row.memory_session_id;
    node.setAttribute("aria-labelledby", "title-" + key);
    const details = node.querySelector(".details");
    let mark, label, title;
    if (row.kind === "summary") {
      [mark, label, title] = ["📋", "Summary", row.request || "Progress summary"];
      const dl = el("dl", "summary-fields");
      for (const [field, name] of summaryFields) {
        if (!row[field]) continue;
        dl.appendChild(el("dt", "", name));
        dl.appendChild(el("dd", field, row[field]));
      }
      if (dl.childElementCount) details.appendChild(dl);
    } else {
      const shown = types[row.type] || ["•", row.type || "observation"];
      [mark, label, title] = [shown[0], shown[1], row.title || "(untitled)"];
      if (row.subtitle) details.appendChild(el("p", "subtitle", row.subtitle));
      if (row.narrative) details.appendChild(el("p", "narrative", row.narrative));
      const files = [...(row.files_read || []), ...(row.files_modified || [])];
      for (const part of [list("facts", row.facts), list("concepts", row.concepts),
        list("files", files)]) {
        if (part) details.appendChild(part);
      }
    }
    node.querySelector(".mark").textContent = mark;
    node.querySelector(".label").textContent = label;
    node.querySelector(".type").title = label;
    const h = node.querySelector(".title");
    h.id = "title-" + key;
    h.textContent = title;
    node.querySelector(".project").textContent = row.project;
    const link = node.querySelector(".session");
    link.href = "/sessions/" + encodeURIComponent(row.memory_session_id);
    link.textContent = "session " + row.memory_session_id;
    const time = node.querySelector("time");
    time.dateTime = row.created_at;
    time.textContent = row.created_at;
    node.querySelector(".rowid").textContent = "#" + row.id;
    return node;
  }

  function matches(row, f) {
    if (f.project && row.project !== f.project) return false;
    if (f.session && row.memory_session_id !== f.session) return false;
    const type = row.kind === "summary" ? "summary" : row.type;
    return !f.type || type === f.type;
  }

  function refreshStats() {
    fetch("/api/stats", { credentials: "same-origin" })
      .then((r) => (r.ok ? r.json() : null))
      .then((s) => {
        if (!s) return;
        const set = (key, value) => {
          const dd = document.querySelector('dd[data-stat="' + key + '"]');
          if (dd) dd.textContent = String(value);
        };
        const age = s.streams.oldest_pending_age_s;
        const outcomes = Object.entries(s.outcomes).filter(([k]) => !k.includes(":"))
          .sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([k, v]) => k + " " + v).join(", ");
        set("pending", s.streams.pending);
        set("oldest", age === null ? "—" : age + " s");
        set("paused", s.paused_providers.length ? s.paused_providers.join(", ") : "none");
        set("dead", s.dead_letters);
        set("outcomes", outcomes || "—");
      })
      .catch(() => {});
  }

  // One script for both pages: the index shows the newest first, a session page (its
  // #feed says data-order="oldest-first" and filters to its session) adds at the end.
  if (feed) {
    const filters = JSON.parse(feed.dataset.filters || "{}");
    const oldestFirst = feed.dataset.order === "oldest-first";
    let fresh = 0;
    let state = "";  // the connection: live, reconnecting or closed
    let note = "";  // what arrived since the page loaded
    const show = () => { status.textContent = [state, note].filter(Boolean).join(" "); };
    const start = feed.dataset.lastEventId;
    const base = feed.dataset.events || "/events";
    const join = base.includes("?") ? "&" : "?";
    const query = start ? join + "last_event_id=" + encodeURIComponent(start) : "";
    const source = new EventSource(base + query);
    const onRow = (event) => {
      const row = JSON.parse(event.data);
      if (document.getElementById("row-" + row.kind + "-" + row.id)) return;
      if (filters.q) {
        fresh += 1;
        note = fresh + " new since this search: clear it to see them.";
        show();
        return;
      }
      if (!matches(row, filters)) return;
      const empty = feed.querySelector(".empty");
      if (empty) empty.remove();
      const node = renderCard(row);
      node.classList.add("fresh");
      if (oldestFirst) feed.append(node); else feed.prepend(node);
      setTimeout(() => node.classList.remove("fresh"), 100);
      fresh += 1;
      const noun = fresh === 1 ? " new item" : " new items";
      note = fresh + noun + " since the page loaded.";
      show();
    };
    source.addEventListener("observation", onRow);
    source.addEventListener("summary", onRow);
    source.addEventListener("open", () => {
      document.body.dataset.live = "on";
      state = "Live.";
      show();
    });
    // The browser reconnects by itself, sending the last id it saw (Last-Event-ID).
    source.addEventListener("error", () => {
      const closed = source.readyState === EventSource.CLOSED;
      document.body.dataset.live = closed ? "off" : "reconnecting";
      state = closed ? "Disconnected: reload the page to resume." : "Reconnecting…";
      show();
    });
    if (document.getElementById("stats")) setInterval(refreshStats, 5000);
  }
})();
"""
