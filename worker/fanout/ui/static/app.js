"use strict";
// The server renders every card and filters the feed (/events?project=…&type=…&session=…);
// this script only inserts the fragments it is sent and refreshes the operator panel.
(() => {
  const feed = document.getElementById("feed");
  const status = document.getElementById("live-status");
  const stats = document.getElementById("stats");

  // A <template> parses the server's escaped fragment inertly: nothing in it runs.
  function fragment(html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    return template.content.firstElementChild;
  }

  // The panel's cost charts follow the page's project filter.
  const project = new URLSearchParams(location.search).get("project");
  const statsUrl = "/partials/stats" + (project ? "?project=" + encodeURIComponent(project) : "");

  function refreshStats() {
    fetch(statsUrl, { credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : null))
      .then((html) => { if (html !== null) stats.innerHTML = html; })
      .catch(() => {});
  }

  if (stats) setInterval(refreshStats, 5000);

  // One script for both pages: the index shows the newest first, a session page (its
  // #feed says data-order="oldest-first") adds at the end. No data-events: nothing to follow.
  if (!feed || !feed.dataset.events) return;
  const searching = feed.dataset.search === "on";
  const oldestFirst = feed.dataset.order === "oldest-first";
  let fresh = 0;
  let state = "";  // the connection: live, reconnecting or closed
  let note = "";  // what arrived since the page loaded
  const show = () => { status.textContent = [state, note].filter(Boolean).join(" "); };
  const start = feed.dataset.lastEventId;
  const base = feed.dataset.events;
  const join = base.includes("?") ? "&" : "?";
  const query = start ? join + "last_event_id=" + encodeURIComponent(start) : "";
  const source = new EventSource(base + query);
  const onRow = (event) => {
    const data = JSON.parse(event.data);
    if (document.getElementById("row-" + data.kind + "-" + data.id)) return;
    fresh += 1;
    if (searching) {
      note = fresh + " new since this search: clear it to see them.";
      show();
      return;
    }
    const empty = feed.querySelector(".empty");
    if (empty) empty.remove();
    const node = fragment(data.html);
    node.classList.add("fresh");
    if (oldestFirst) feed.append(node); else feed.prepend(node);
    setTimeout(() => node.classList.remove("fresh"), 100);
    note = fresh + (fresh === 1 ? " new item" : " new items") + " since the page loaded.";
    show();
  };
  source.addEventListener("observation", onRow);
  source.addEventListener("summary", onRow);
  // The server replays at most a bounded backlog; past it, it skips to now and says so.
  source.addEventListener("reset", () => {
    note = "Some rows were missed while away: reload the page to see them.";
    show();
  });
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
})();
