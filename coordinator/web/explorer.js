// Book explorer: walk the book by clicking moves or pasting a transcript; the position's book
// moves, values and counts as `book show` reports them, refreshed every 2 seconds (the book
// grows while you look); book statistics every 30 seconds (one scan of the book each).
"use strict";
(function () {
  const FILES = "abcdefgh";
  const boardEl = document.getElementById("board");
  const errorEl = document.getElementById("error");
  let moves = decodeURIComponent(location.hash.replace(/^#/, "")); // the transcript shown

  const cells = [];
  function buildBoard() {
    boardEl.appendChild(bf.el("div", { class: "lbl top" }));
    for (const f of FILES) boardEl.appendChild(bf.el("div", { class: "lbl top" }, f.toUpperCase()));
    for (let r = 0; r < 8; r++) {
      boardEl.appendChild(bf.el("div", { class: "lbl" }, r + 1));
      for (let f = 0; f < 8; f++) {
        const sq = FILES[f] + (r + 1);
        const c = bf.el("button", { class: "cell", type: "button", "data-sq": sq, "aria-label": sq });
        c.addEventListener("click", () => { if (c.classList.contains("legal")) go(moves + sq); });
        boardEl.appendChild(c);
        cells.push(c);
      }
    }
  }

  let shown = ""; // the last answer rendered: an unchanged refresh changes nothing
  function render(p) {
    const text = JSON.stringify(p);
    if (text === shown) return;
    shown = text;
    boardEl.dataset.board = p.board;
    boardEl.dataset.moves = p.moves;
    const scores = new Map(p.book_moves.map((m) => [m.move, m]));
    const legal = new Set(p.legal);
    cells.forEach((c, i) => {
      const sq = c.dataset.sq;
      c.replaceChildren();
      c.classList.toggle("legal", legal.has(sq));
      const d = p.board[i];
      if (d !== "-") c.appendChild(bf.el("span", { class: "disc " + d }));
      else if (scores.has(sq)) {
        const m = scores.get(sq);
        c.appendChild(bf.el("span", { class: "score" + (m.leaf ? " leaf" : "") }, bf.signed(m.score)));
      } else if (legal.has(sq)) c.appendChild(bf.el("span", { class: "dot" }));
    });
    document.getElementById("pass").hidden = !legal.has("pass");
    document.getElementById("line").textContent = p.moves || "(start)";
    document.getElementById("title").textContent = p.ply === 0 ? "Start position" : "After " + p.ply + " plies";
    bf.set("ply", String(p.ply), p.ply);
    bf.set("to_move", p.game_over ? "game over" : p.black_to_move ? "Black" : "White");
    bf.set("in_book", p.in_book ? "yes" : "no", p.in_book);
    bf.set("level", p.level === null ? "–" : String(p.level), p.level);
    bf.set("best", p.value === null ? "–" : bf.signed(p.value) + " [" + bf.signed(p.lower) + ", " + bf.signed(p.upper) + "]", p.value);
    bf.set("wdl", p.in_book ? p.wins + " / " + p.draws + " / " + p.losses : "–");
    bf.set("lines", p.in_book ? String(p.lines) : "–", p.lines);
    bf.set("searching", p.searching === null ? "no" : p.searching, p.searching);
    const frag = document.createDocumentFragment();
    for (const m of p.book_moves) {
      const tr = bf.el("tr", { "data-move": m.move, "data-score": m.score, "data-leaf": m.leaf });
      tr.appendChild(bf.el("td", {}, m.move));
      tr.appendChild(bf.el("td", { class: "num" }, bf.signed(m.score)));
      tr.appendChild(bf.el("td", {}, m.leaf ? "leaf" : "link"));
      tr.addEventListener("click", () => go(moves + (m.move === "pass" ? "pa" : m.move)));
      frag.appendChild(tr);
    }
    document.querySelector("#book-moves tbody").replaceChildren(frag);
  }

  // Only the newest request's answer is shown, and the refresh asks for the newest transcript
  // asked for, so that a refresh crossing a click cannot undo it.
  let seq = 0;
  let wanted = moves;
  async function go(next, refresh) {
    const mine = ++seq;
    wanted = next;
    try {
      const p = await bf.api("/api/v1/book/position?moves=" + encodeURIComponent(next));
      if (mine !== seq) return;
      if (!refresh) errorEl.hidden = true;
      moves = wanted = p.moves;
      if (location.hash.replace(/^#/, "") !== moves) history.replaceState(null, "", "#" + moves);
      render(p);
    } catch (e) {
      if (mine !== seq) return;
      wanted = moves; // back to the last position shown
      errorEl.textContent = e.message;
      errorEl.hidden = false;
    }
  }

  document.getElementById("paste").addEventListener("submit", (e) => {
    e.preventDefault();
    go(document.getElementById("transcript").value.replace(/\s+/g, ""));
  });
  document.getElementById("start").addEventListener("click", () => go(""));
  document.getElementById("back").addEventListener("click", () => go(moves.slice(0, Math.max(0, moves.length - 2))));
  document.getElementById("pass").addEventListener("click", () => go(moves + "pa"));
  window.addEventListener("hashchange", () => {
    const h = decodeURIComponent(location.hash.replace(/^#/, ""));
    if (h !== moves) go(h);
  });

  let scoreChart = null;
  async function stats() {
    const s = await bf.api("/api/v1/book/stats");
    document.getElementById("stats-summary").textContent =
      bf.num(s.positions) + " positions, " + bf.num(s.links) + " links, " + bf.num(s.leaves) + " leaves";
    if (!scoreChart) {
      scoreChart = bf.chart(document.getElementById("chart-scores"),
        [{ label: "positions", stroke: "#2b5fa8", fill: "rgba(43,95,168,.3)", paths: uPlot.paths.bars({ size: [0.9, 12] }) }],
        { scales: { x: { time: false } }, axes: [{ incrs: [1, 2, 4, 8, 16] }, {}] });
    }
    scoreChart.setData([s.best_scores.map((p) => p[0]), s.best_scores.map((p) => p[1])]);
    // Level × ply table: a row per level, a column per ply that has positions.
    const plies = [...new Set(s.by_level_ply.map((x) => x[1]))].sort((a, b) => a - b);
    const levels = [...new Set(s.by_level_ply.map((x) => x[0]))].sort((a, b) => a - b);
    const count = new Map(s.by_level_ply.map((x) => [x[0] + ":" + x[1], x[2]]));
    const t = document.getElementById("level-ply");
    const head = bf.el("tr");
    head.appendChild(bf.el("th", {}, "level \\ ply"));
    for (const p of plies) head.appendChild(bf.el("th", { class: "num" }, p));
    const frag = document.createDocumentFragment();
    frag.appendChild(head);
    for (const l of levels) {
      const tr = bf.el("tr");
      tr.appendChild(bf.el("th", {}, l));
      for (const p of plies) tr.appendChild(bf.el("td", { class: "num" }, count.has(l + ":" + p) ? bf.num(count.get(l + ":" + p)) : ""));
      frag.appendChild(tr);
    }
    t.replaceChildren(frag);
  }

  buildBoard();
  bf.poll(() => go(wanted, true), 2000);
  bf.poll(stats, 30000);
})();
