// Workers (sortable, filterable) and the contributors' leaderboard, polled every 2 seconds.
"use strict";
(function () {
  const table = document.getElementById("workers");
  const body = table.querySelector("tbody");
  const filter = document.getElementById("filter");
  let rows = [];
  let sort = { key: "name", dir: 1 };

  // "my workers": ?owner=NAME preselects the filter.
  const params = new URLSearchParams(location.search);
  if (params.get("owner")) filter.value = params.get("owner");

  function cellText(w, key) {
    const v = w[key];
    switch (key) {
      case "owner": return v === null ? "(anonymous)" : v;
      case "knodes_per_second": return bf.num(v, 1);
      case "standing": return w.blocked ? "blocked" : v;
      case "credit": return v === null ? "—" : bf.num(v, 1);
      case "blocked": return v ? "blocked" : "no";
      case "last_seen_seconds": return v === null ? "–" : bf.num(v, 1) + " s ago";
      case "threads": case "results": case "failures": return bf.num(v);
      default: return v;
    }
  }

  function render() {
    const q = filter.value.trim().toLowerCase();
    const shown = rows.filter((w) => !q || w.name.toLowerCase().includes(q) || (w.owner || "").toLowerCase().includes(q));
    shown.sort((a, b) => {
      const x = a[sort.key], y = b[sort.key];
      if (x === y) return a.name < b.name ? -1 : 1;
      if (x === null) return 1;
      if (y === null) return -1;
      return (x < y ? -1 : 1) * sort.dir;
    });
    const keys = [...table.querySelectorAll("th")].map((th) => th.dataset.key);
    const frag = document.createDocumentFragment();
    for (const w of shown) {
      const tr = bf.el("tr", w.blocked ? { class: "blocked" } : {});
      for (const k of keys) {
        const num = ["threads", "knodes_per_second", "results", "failures", "credit", "last_seen_seconds"].includes(k);
        tr.appendChild(bf.el("td", num ? { class: "num", "data-key": k } : { "data-key": k }, cellText(w, k)));
      }
      frag.appendChild(tr);
    }
    body.replaceChildren(frag);
    document.getElementById("worker-count").textContent = "(" + shown.length + " of " + rows.length + ")";
    for (const th of table.querySelectorAll("th")) {
      th.classList.toggle("asc", th.dataset.key === sort.key && sort.dir === 1);
      th.classList.toggle("desc", th.dataset.key === sort.key && sort.dir === -1);
    }
  }

  for (const th of table.querySelectorAll("th")) {
    th.addEventListener("click", () => {
      sort = { key: th.dataset.key, dir: sort.key === th.dataset.key ? -sort.dir : 1 };
      render();
    });
  }
  filter.addEventListener("input", render);

  async function workers() {
    rows = (await bf.api("/api/v1/workers")).workers;
    render();
  }

  async function contributors() {
    const c = (await bf.api("/api/v1/contributors")).contributors;
    const frag = document.createDocumentFragment();
    c.forEach((r, i) => {
      const tr = bf.el("tr");
      tr.appendChild(bf.el("td", { class: "num" }, i + 1));
      tr.appendChild(bf.el("td", {}, r.anonymous ? r.name + " (anonymous)" : r.name));
      for (const k of ["results_today", "results_month", "results_all_time", "machines", "credentials", "trusted", "blocked"]) {
        tr.appendChild(bf.el("td", { class: "num", "data-key": k }, bf.num(r[k])));
      }
      tr.appendChild(bf.el("td", { class: "num", "data-key": "credit" }, r.credit === null ? "—" : bf.num(r.credit)));
      tr.appendChild(bf.el("td", { class: "num", "data-key": "invalid" }, bf.num(r.invalid)));
      frag.appendChild(tr);
    });
    document.querySelector("#contributors tbody").replaceChildren(frag);
  }

  async function trust() {
    const t = await bf.api("/api/v1/trust");
    const h = t.health;
    bf.set("trust-overhead", (100 * h.replication_overhead).toFixed(1) + " %");
    bf.set("trust-checks", bf.num(h.pending_checks) + " · " + Math.round(h.oldest_check_seconds) + " s");
    bf.set("trust-invalid", bf.num(h.invalid) + " · " + bf.num(h.reached_book));
    bf.set("trust-blocked", bf.num(h.blocked_contributors));
    bf.set("trust-replays", bf.num(h.rollbacks));
    const frag = document.createDocumentFragment();
    for (const c of t.cards) {
      const card = bf.el("div", { class: "card trust-card" + (c.blocked ? " blocked" : ""), "data-name": c.name });
      card.appendChild(bf.el("div", { class: "k" }, c.name + (c.owner ? " · " + c.owner : "")));
      card.appendChild(bf.el("div", { class: "v small", "data-key": "standing" }, c.standing));
      if (c.trusted !== null) {
        card.appendChild(bf.el("div", { class: "sub", "data-key": "credential" }, c.trusted ? "trusted credential" : "untrusted credential"));
      }
      card.appendChild(bf.el("div", { class: "sub", "data-key": "figures" },
        "credit " + bf.num(c.credit) + " · checks " + bf.num(c.checks) + " · caught " + bf.num(c.caught) +
        " · streak " + bf.num(c.streak) + (c.sessions === null ? "" : " · sessions " + bf.num(c.sessions))));
      if (c.blocked) {
        card.appendChild(bf.el("div", { class: "sub", "data-key": "reason" }, c.reason));
      }
      frag.appendChild(card);
    }
    document.getElementById("trust-cards").replaceChildren(frag);
  }

  bf.poll(workers, 2000);
  bf.poll(trust, 2000);
  bf.poll(contributors, 2000);
})();
