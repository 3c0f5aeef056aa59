// The event log: filtered by group and text (kept in the URL: /events?kind=trust&q=alice),
// newest first, new events prepended every 2 seconds, older ones paged in on demand.
"use strict";
(function () {
  const body = document.querySelector("#events tbody");
  const boxes = [...document.querySelectorAll("#event-filters input[name=group]")];
  const q = document.getElementById("event-q");
  const older = document.getElementById("older");
  let rows = [];       // shown events, newest first
  let newest = 0;      // highest sequence number shown
  let nextBefore = 0;  // where the next older page starts
  let generation = 0;  // bumped when the filter changes: late answers to an old filter are dropped

  const params = new URLSearchParams(location.search);
  if (params.has("kind")) {
    const want = new Set(params.get("kind").split(",").filter((s) => s));
    for (const b of boxes) b.checked = want.size === 0 || want.has(b.value);
  }
  if (params.has("q")) q.value = params.get("q");

  function filter() {
    const on = boxes.filter((b) => b.checked).map((b) => b.value);
    // Every group on: no kind parameter (which also admits kinds a newer server adds).
    return { kind: on.length === boxes.length ? "" : on.join(","), q: q.value.trim(), none: on.length === 0 };
  }

  function url(f, extra) {
    const p = new URLSearchParams();
    if (f.kind) p.set("kind", f.kind);
    if (f.q) p.set("q", f.q);
    for (const [k, v] of Object.entries(extra)) p.set(k, v);
    return "/api/v1/events?" + p.toString();
  }

  function time(t) {
    const d = new Date(t * 1000);
    const pad = (n) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function detail(e) {
    if (!e.cost) return e.detail;
    const c = e.cost;
    const parts = [bf.num(c.cpu_hours, 3) + " CPU h", bf.num(c.searches) + " searches", bf.num(c.positions) + " positions"];
    if (c.positions_per_cpu_hour !== null) parts.push(bf.num(c.positions_per_cpu_hour, 0) + " positions/CPU h");
    parts.push("overhead " + bf.num(100 * c.replication_overhead, 1) + " %");
    return e.detail + (e.detail ? " · " : "") + parts.join(", ");
  }

  function render() {
    const frag = document.createDocumentFragment();
    for (const e of rows) {
      const tr = bf.el("tr", { class: "ev-" + e.group, "data-kind": e.kind, "data-seq": e.seq });
      tr.appendChild(bf.el("td", { class: "num" }, time(e.t)));
      tr.appendChild(bf.el("td", { "data-key": "kind" }, e.kind.replace(/_/g, " ")));
      tr.appendChild(bf.el("td", { "data-key": "subject", class: "subject" }, e.subject));
      tr.appendChild(bf.el("td", { "data-key": "owner" }, e.owner));
      tr.appendChild(bf.el("td", { "data-key": "detail", class: "detail" }, detail(e)));
      frag.appendChild(tr);
    }
    body.replaceChildren(frag);
    document.getElementById("event-count").textContent = "(" + rows.length + " shown)";
  }

  async function reload() {
    const g = ++generation;
    const f = filter();
    const p = new URLSearchParams();
    if (f.kind) p.set("kind", f.kind);
    if (f.q) p.set("q", f.q);
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p.toString() : ""));
    if (f.none) {
      rows = []; newest = 0; older.hidden = true; render();
      return;
    }
    const page = await bf.api(url(f, { limit: 100 }));
    if (g !== generation) return;
    rows = page.events;
    newest = rows.length ? rows[0].seq : newest;
    nextBefore = page.next_before;
    older.hidden = !page.more;
    render();
  }

  async function poll() {
    const f = filter();
    if (f.none) return;
    const g = generation;
    const page = await bf.api(url(f, { after: newest, limit: 500 }));
    if (g !== generation || page.events.length === 0) return;
    rows = page.events.concat(rows);
    newest = rows[0].seq;
    render();
  }

  older.addEventListener("click", async () => {
    const g = generation;
    const page = await bf.api(url(filter(), { before: nextBefore, limit: 100 }));
    if (g !== generation) return;
    rows = rows.concat(page.events);
    nextBefore = page.next_before;
    older.hidden = !page.more;
    render();
  });
  for (const b of boxes) b.addEventListener("change", () => reload().catch(() => {}));
  let typing = null;
  q.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(() => reload().catch(() => {}), 250); });

  reload().catch(() => {}).finally(() => bf.poll(poll, 2000));
})();
