// Overview: the farm's numbers (polled every second) and its history charts.
"use strict";
(function () {
  const charts = {
    throughput: bf.chart(document.getElementById("chart-throughput"), [
      { label: "results/s", stroke: "#1f6f5c", width: 2 },
      { label: "knodes/s", stroke: "#c4772b", scale: "kn" },
    ], { axes: [{}, {}, { scale: "kn", side: 1, grid: { show: false } }] }),
    positions: bf.chart(document.getElementById("chart-positions"), [{ label: "positions", stroke: "#2b5fa8", width: 2 }]),
    root: bf.chart(document.getElementById("chart-root"), [{ label: "root value", stroke: "#8a2ba8", width: 2 }]),
  };
  const range = document.getElementById("range");
  let series = null; // the tier shown: { t: [], positions: [], ... }
  let last = 0;      // time (ms) of the newest point held

  function draw() {
    const s = series;
    charts.throughput.setData([s.t, s.results_per_second, s.knodes_per_second]);
    charts.positions.setData([s.t, s.positions]);
    charts.root.setData([s.t, s.root_value]);
  }

  async function history() {
    const tier = range.value;
    const h = await bf.api("/api/v1/history?tier=" + tier + "&since=" + (series ? last : 0));
    if (tier !== range.value) return; // the range changed while this was on its way
    const add = h[tier];
    if (!series) series = { t: [], positions: [], results_per_second: [], knodes_per_second: [], root_value: [] };
    for (const k of Object.keys(series)) series[k] = series[k].concat(add[k]);
    if (add.t.length) last = Math.round(add.t[add.t.length - 1] * 1000);
    const keep = { fine: 900, minutes: 2880, hours: 2160 }[tier];
    if (series.t.length > keep) for (const k of Object.keys(series)) series[k] = series[k].slice(-keep);
    draw();
  }
  range.addEventListener("change", () => { series = null; last = 0; history(); });

  async function status() {
    const s = await bf.api("/api/v1/status");
    bf.set("positions", bf.num(s.positions), s.positions);
    bf.set("results_per_second", bf.num(s.results_per_second, 1), s.results_per_second);
    bf.set("knodes_per_second", bf.num(s.nodes_per_second / 1000, 0), s.nodes_per_second / 1000);
    bf.set("workers", bf.num(s.workers_total) + " · " + bf.num(s.threads), s.workers_total);
    bf.set("queued", bf.num(s.queued), s.queued);
    bf.set("in_flight", bf.num(s.in_flight), s.in_flight);
    bf.set("completed", bf.num(s.completed), s.completed);
    bf.set("state", s.state, s.state);
    bf.set("expansion", s.expansion);
    const active = s.state === "running" || s.state === "paused";
    bf.set("round_eta", active ? bf.duration(s.round_eta_seconds) : "–", s.round_eta_seconds);
    bf.set("expansion_eta", s.expansion_eta);
    bf.set("root_value", s.root_value === -127 ? "unknown" : bf.signed(s.root_value), s.root_value);
  }

  function when(ms) {
    return ms === null ? "–" : new Date(ms).toLocaleString("en-GB", { hour12: false });
  }

  // CPU hours, positions and searches per CPU hour, replication overhead.
  function cost(c) {
    if (!c) return "–";
    const parts = [bf.num(c.cpu_hours, 2) + " CPU h", bf.num(c.searches) + " searches"];
    if (c.positions_per_cpu_hour !== null) parts.push(bf.num(c.positions_per_cpu_hour, 0) + " positions/CPU h");
    if (c.searches_per_cpu_hour !== null) parts.push(bf.num(c.searches_per_cpu_hour, 0) + " searches/CPU h");
    parts.push("overhead " + bf.num(100 * c.replication_overhead, 1) + " %");
    return parts.join(", ");
  }

  async function programs() {
    const list = (await bf.api("/api/v1/programs")).programs;
    const frag = document.createDocumentFragment();
    for (const p of list) {
      const tr = bf.el("tr", { class: "program " + p.state, "data-id": String(p.id) });
      tr.appendChild(bf.el("td", { class: "num" }, p.id));
      tr.appendChild(bf.el("td", {}, p.program));
      tr.appendChild(bf.el("td", {}, p.state));
      tr.appendChild(bf.el("td", {}, when(p.submitted_ms)));
      tr.appendChild(bf.el("td", {}, when(p.started_ms)));
      tr.appendChild(bf.el("td", {}, when(p.finished_ms)));
      tr.appendChild(bf.el("td", {}, p.state === "running" || p.state === "queued" ? p.progress : p.report));
      tr.appendChild(bf.el("td", { class: "num", "data-key": "done" }, p.total === null ? "–" : bf.num(p.done) + "/" + bf.num(p.total) + " " + p.unit));
      tr.appendChild(bf.el("td", { "data-key": "eta" }, p.eta ? bf.duration(p.eta.low_seconds) + " – " + bf.duration(p.eta.high_seconds) : "–"));
      tr.appendChild(bf.el("td", { "data-key": "cost" }, cost(p.cost)));
      frag.appendChild(tr);
    }
    if (!list.length) {
      const tr = bf.el("tr");
      tr.appendChild(bf.el("td", { colspan: "10", class: "note" }, "no program yet"));
      frag.appendChild(tr);
    }
    document.querySelector("#programs tbody").replaceChildren(frag);
  }

  bf.poll(status, 1000);
  bf.poll(programs, 2000);
  // The per-second tier grows every second; the coarse tiers change once a minute.
  bf.poll(history, 2000);
})();
