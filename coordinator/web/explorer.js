// Book explorer: walk the book by clicking moves, with the keyboard, or by pasting a game. Every
// legal move shows its value (or that it is not in the book), grade, level, lines and umigame
// numbers; the best line is written and numbered on the board; a pasted game gets its score and
// cumulative-loss graph. The URL holds the line (`/explorer?line=f5d6c3`, plus `game=` and the
// umigame options), each step is a history entry, so back, forward and shared links work.
// Nothing is polled while the view is settled: the page asks again every 2 seconds only while
// the book grows or a grade or umigame number is still being counted, and only while visible.
"use strict";
(function () {
  const FILES = "abcdefgh";
  const DEFAULTS = { umin: "-64", umax: "64", uloss: "0", udepth: "60" };
  const boardEl = document.getElementById("board");
  const errorEl = document.getElementById("error");

  // The view: the line shown, the pasted game (empty: none) and the umigame options.
  function readUrl() {
    const q = new URLSearchParams(location.search);
    const s = { line: (q.get("line") || "").toLowerCase(), game: (q.get("game") || "").toLowerCase() };
    for (const k of Object.keys(DEFAULTS)) s[k] = q.get(k) || DEFAULTS[k];
    return s;
  }
  function urlOf(s) {
    const q = new URLSearchParams();
    if (s.line) q.set("line", s.line);
    if (s.game) q.set("game", s.game);
    for (const k of Object.keys(DEFAULTS)) if (s[k] !== DEFAULTS[k]) q.set(k, s[k]);
    const t = q.toString();
    return location.pathname + (t ? "?" + t : "");
  }
  function positionUrl(s) {
    return "/api/v1/book/position?moves=" + encodeURIComponent(s.line) +
      "&umigame_min=" + encodeURIComponent(s.umin) + "&umigame_max=" + encodeURIComponent(s.umax) +
      "&umigame_loss=" + encodeURIComponent(s.uloss) + "&umigame_depth=" + encodeURIComponent(s.udepth);
  }
  const sq = (m) => (m === "pass" ? "pa" : m);

  const cells = [];
  function buildBoard() {
    boardEl.appendChild(bf.el("div", { class: "lbl top" }));
    for (const f of FILES) boardEl.appendChild(bf.el("div", { class: "lbl top" }, f.toUpperCase()));
    for (let r = 0; r < 8; r++) {
      boardEl.appendChild(bf.el("div", { class: "lbl" }, r + 1));
      for (let f = 0; f < 8; f++) {
        const name = FILES[f] + (r + 1);
        const c = bf.el("button", { class: "cell", type: "button", "data-sq": name, "aria-label": name });
        c.addEventListener("click", () => { if (c.classList.contains("legal")) step(name); });
        boardEl.appendChild(c);
        cells.push(c);
      }
    }
  }

  function umi(u, black) {
    if (!u) return "–";
    const [n, exact] = black ? [u.black, u.black_exact] : [u.white, u.white_exact];
    return (exact ? "" : "≥") + n;
  }
  function grade(a, pending) { return a !== null ? a : pending ? "…" : "–"; }
  function pendingIn(p) {
    const inexact = (u) => u && !(u.black_exact && u.white_exact);
    return p.grade_pending || inexact(p.umigame) ||
      p.move_info.some((m) => m.grade_pending || inexact(m.umigame));
  }

  let cur = readUrl();
  let pos = null; // the position shown
  let shownText = "";
  function render(p) {
    const text = JSON.stringify(p);
    if (text === shownText) return;
    shownText = text;
    pos = p;
    boardEl.dataset.board = p.board;
    boardEl.dataset.moves = p.moves;
    const info = new Map(p.move_info.map((m) => [m.move, m]));
    // The best line on the board: each of its squares numbered in order.
    const pvAt = new Map();
    let n = 0;
    for (const m of p.pv) { n += 1; if (m !== "pass") pvAt.set(m, n); }
    cells.forEach((c, i) => {
      const name = c.dataset.sq;
      const m = info.get(name);
      c.replaceChildren();
      c.classList.toggle("legal", !!m);
      c.dataset.kind = m ? m.kind : "";
      const d = p.board[i];
      if (d !== "-") c.appendChild(bf.el("span", { class: "disc " + d }));
      else if (m && m.value !== null) c.appendChild(bf.el("span", { class: "score " + m.kind }, bf.signed(m.value)));
      else if (m) c.appendChild(bf.el("span", { class: "dot", title: "not in the book" }));
      if (pvAt.has(name)) c.appendChild(bf.el("span", { class: "pvn" }, pvAt.get(name)));
      c.setAttribute("aria-label", name + (m ? (m.value === null ? " not in book" : " value " + m.value) : ""));
    });
    document.getElementById("pass").hidden = !info.has("pass");
    document.getElementById("line").textContent = p.moves || "(start)";
    const op = document.getElementById("opening");
    op.textContent = p.opening ? p.opening.name : "";
    op.dataset.ply = p.opening ? p.opening.ply : "";
    document.getElementById("title").textContent = p.ply === 0 ? "Start position" : "After " + p.ply + " plies";
    bf.set("ply", String(p.ply), p.ply);
    bf.set("to_move", p.game_over ? "game over" : p.black_to_move ? "Black" : "White");
    bf.set("in_book", p.in_book ? "yes" : "no", p.in_book);
    bf.set("level", p.level === null ? "–" : String(p.level), p.level);
    bf.set("best", p.value === null ? "–" : bf.signed(p.value) + " [" + bf.signed(p.lower) + ", " + bf.signed(p.upper) + "]", p.value);
    bf.set("wdl", p.in_book ? p.wins + " / " + p.draws + " / " + p.losses : "–");
    bf.set("lines", p.in_book ? String(p.lines) : "–", p.lines);
    bf.set("accuracy", grade(p.accuracy, p.grade_pending));
    bf.set("umigame", p.umigame ? umi(p.umigame, true) + " / " + umi(p.umigame, false) : "–");
    bf.set("searching", p.searching === null ? (p.growing ? "no (the book is growing)" : "no") : p.searching, p.searching);

    const pv = document.getElementById("pv");
    pv.dataset.moves = p.pv.map(sq).join("");
    const pvFrag = document.createDocumentFragment();
    let acc = p.moves;
    p.pv.forEach((m, i) => {
      acc += sq(m);
      const to = acc;
      const a = bf.el("a", { href: urlOf(Object.assign({}, cur, { line: to })), "data-line": to }, (i + 1) + "." + m);
      a.addEventListener("click", (e) => { e.preventDefault(); go(Object.assign({}, cur, { line: to }), "push"); });
      pvFrag.appendChild(a);
      pvFrag.appendChild(document.createTextNode(" "));
    });
    if (!p.pv.length) pvFrag.appendChild(document.createTextNode(p.in_book ? "(no book move)" : "(not in the book)"));
    pv.replaceChildren(pvFrag);

    const frag = document.createDocumentFragment();
    for (const m of p.move_info) {
      const tr = bf.el("tr", {
        "data-move": m.move, "data-value": m.value === null ? "" : m.value, "data-kind": m.kind,
        "data-accuracy": m.accuracy || "", "data-umi-black": umi(m.umigame, true), "data-umi-white": umi(m.umigame, false),
        tabindex: "0",
      });
      tr.appendChild(bf.el("td", {}, m.move));
      tr.appendChild(bf.el("td", { class: "num" }, m.value === null ? "not in book" : bf.signed(m.value)));
      tr.appendChild(bf.el("td", {}, m.kind));
      tr.appendChild(bf.el("td", {}, grade(m.accuracy, m.grade_pending)));
      tr.appendChild(bf.el("td", { class: "num" }, m.level === null ? "–" : m.level));
      tr.appendChild(bf.el("td", { class: "num" }, m.lines === null ? "–" : bf.num(m.lines)));
      tr.appendChild(bf.el("td", { class: "num" }, umi(m.umigame, true)));
      tr.appendChild(bf.el("td", { class: "num" }, umi(m.umigame, false)));
      tr.addEventListener("click", () => step(sq(m.move)));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") step(sq(m.move)); });
      frag.appendChild(tr);
    }
    document.querySelector("#moves tbody").replaceChildren(frag);

    const exp = document.querySelector(".export");
    exp.hidden = !p.in_book;
    for (const f of ["dat", "egbk3", "lines"]) {
      document.getElementById("export-" + f).href = "/api/v1/book/export?moves=" + encodeURIComponent(p.moves) + "&format=" + f;
    }
    for (const k of Object.keys(DEFAULTS)) document.getElementById(k).value = cur[k];
  }

  // The pasted game: its table and its graph (score from Black, each side's cumulative loss).
  let gameShown = null;
  let gameChart = null;
  let leftAt = null;
  function renderGame(g) {
    const sec = document.getElementById("game");
    sec.hidden = !g;
    gameShown = g ? g.moves : "";
    if (!g) return;
    leftAt = g.left_book === null ? null : g.left_book + 1;
    const sum = document.getElementById("game-summary");
    sum.dataset.leftBook = g.left_book === null ? "" : g.left_book;
    const last = g.plies[g.plies.length - 1];
    const losses = last ? " Losses against the book: Black " + last.black_loss + ", White " + last.white_loss + "." : "";
    sum.textContent = (g.left_book === null
      ? "The game stays in the book (" + g.plies.length + " moves)."
      : "The game leaves the book with move " + (g.left_book + 1) + " (" + g.plies[g.left_book].move + ").") + losses;
    const frag = document.createDocumentFragment();
    let line = "";
    g.plies.forEach((p, i) => {
      line += sq(p.move);
      const to = line;
      const tr = bf.el("tr", {
        "data-index": i, "data-loss": p.loss === null ? "" : p.loss, "data-score": p.score === null ? "" : p.score,
        class: (i === g.left_book ? "left " : "") + (g.left_book !== null && i > g.left_book ? "out" : ""), tabindex: "0",
      });
      const cellsOf = [i + 1, (p.black ? "● " : "○ ") + p.move, p.value === null ? "–" : bf.signed(p.value),
        p.best === null ? "–" : bf.signed(p.best), p.loss === null ? "?" : p.loss, p.score === null ? "–" : bf.signed(p.score),
        p.black_loss, p.white_loss];
      cellsOf.forEach((t, j) => tr.appendChild(bf.el("td", j === 1 ? {} : { class: "num" }, t)));
      tr.addEventListener("click", () => go(Object.assign({}, cur, { line: to }), "push"));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") go(Object.assign({}, cur, { line: to }), "push"); });
      frag.appendChild(tr);
    });
    document.querySelector("#game-plies tbody").replaceChildren(frag);
    const xs = [0].concat(g.plies.map((_, i) => i + 1));
    const data = [xs, [g.start_score].concat(g.plies.map((p) => p.score)),
      [0].concat(g.plies.map((p) => p.black_loss)), [0].concat(g.plies.map((p) => p.white_loss))];
    if (!gameChart) {
      gameChart = bf.chart(document.getElementById("chart-game"), [
        { label: "score (Black)", stroke: "#2b5fa8", width: 2, spanGaps: false },
        { label: "Black's loss", stroke: "#111", dash: [4, 3] },
        { label: "White's loss", stroke: "#b07d00", dash: [4, 3] },
      ], {
        scales: { x: { time: false } },
        axes: [{ incrs: [1, 2, 5, 10, 20] }, {}],
        hooks: {
          // Where the game left the book: a red vertical line.
          draw: [(u) => {
            if (leftAt === null) return;
            const x = Math.round(u.valToPos(leftAt, "x", true));
            const ctx = u.ctx;
            ctx.save();
            ctx.strokeStyle = "#a3261b";
            ctx.lineWidth = 2;
            ctx.setLineDash([6, 4]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.restore();
          }],
        },
      });
    }
    gameChart.setData(data);
  }

  // Only the newest request's answer is shown.
  let seq = 0;
  let timer = null;
  let statsAt = 0;
  async function go(next, how) {
    const mine = ++seq;
    clearTimeout(timer);
    try {
      const [p, g] = await Promise.all([
        bf.api(positionUrl(next)),
        next.game && next.game !== gameShown
          ? bf.api("/api/v1/book/game?moves=" + encodeURIComponent(next.game)) : Promise.resolve(undefined),
      ]);
      if (mine !== seq) return;
      if (how !== "refresh") errorEl.hidden = true;
      const state = Object.assign({}, next, { line: p.moves });
      if (g !== undefined) state.game = g.moves;
      const url = urlOf(state);
      if (how === "push" && url !== location.pathname + location.search) history.pushState(null, "", url);
      else if (url !== location.pathname + location.search) history.replaceState(null, "", url);
      cur = state;
      render(p);
      if (g !== undefined || !state.game) renderGame(g || null);
      // Asked again only while something is changing or still being counted.
      if ((p.growing || pendingIn(p)) && !document.hidden) timer = setTimeout(() => go(cur, "refresh"), 2000);
      if (p.growing && Date.now() - statsAt > 30000) stats().catch(() => { /* shown in the header */ });
    } catch (e) {
      if (mine !== seq) return;
      errorEl.textContent = e.message;
      errorEl.hidden = false;
    }
  }
  function step(m) { go(Object.assign({}, cur, { line: cur.line + m }), "push"); }
  function back() {
    if (cur.line) go(Object.assign({}, cur, { line: cur.line.slice(0, -2) }), "push");
  }
  // Forward: the pasted game's next move while on it, else the book's best move.
  function forward() {
    if (cur.game && cur.game.startsWith(cur.line) && cur.game.length > cur.line.length) {
      step(cur.game.slice(cur.line.length, cur.line.length + 2));
    } else if (pos && pos.pv.length) step(sq(pos.pv[0]));
  }
  function toEnd() {
    if (cur.game && cur.game.startsWith(cur.line) && cur.game.length > cur.line.length) {
      go(Object.assign({}, cur, { line: cur.game }), "push");
    } else if (pos && pos.pv.length) go(Object.assign({}, cur, { line: cur.line + pos.pv.map(sq).join("") }), "push");
  }

  document.getElementById("paste").addEventListener("submit", (e) => {
    e.preventDefault();
    const g = document.getElementById("transcript").value.replace(/\s+/g, "").toLowerCase();
    go(Object.assign({}, cur, { line: g, game: g }), "push");
  });
  document.getElementById("umigame-options").addEventListener("submit", (e) => {
    e.preventDefault();
    const s = Object.assign({}, cur);
    for (const k of Object.keys(DEFAULTS)) s[k] = document.getElementById(k).value.trim() || DEFAULTS[k];
    go(s, "push");
  });
  document.getElementById("start").addEventListener("click", () => go(Object.assign({}, cur, { line: "" }), "push"));
  document.getElementById("back").addEventListener("click", back);
  document.getElementById("forward").addEventListener("click", forward);
  document.getElementById("end").addEventListener("click", toEnd);
  document.getElementById("pass").addEventListener("click", () => step("pa"));
  document.addEventListener("keydown", (e) => {
    if (e.target.closest("input, textarea, select") || e.altKey || e.ctrlKey || e.metaKey) return;
    const keys = { ArrowLeft: back, ArrowRight: forward, Home: () => go(Object.assign({}, cur, { line: "" }), "push"), End: toEnd };
    if (keys[e.key]) { e.preventDefault(); keys[e.key](); }
  });
  window.addEventListener("popstate", () => go(readUrl(), "none"));
  document.addEventListener("visibilitychange", () => { if (!document.hidden && pos && (pos.growing || pendingIn(pos))) go(cur, "refresh"); });

  let scoreChart = null;
  async function stats() {
    statsAt = Date.now();
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
  if (cur.game) document.getElementById("transcript").value = cur.game;
  go(cur, "none");
  stats().catch(() => { /* shown in the header */ });
})();
