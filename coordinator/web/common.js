// bookfarm web UI: helpers shared by the pages. Data from the API is only ever inserted as
// text (textContent), never as markup, so names chosen by volunteers cannot inject anything.
"use strict";
const bf = {
  // GET a JSON API path; marks the connection state in the header.
  async api(path) {
    const conn = document.getElementById("conn");
    try {
      const r = await fetch(path, { cache: "no-store" });
      const body = await r.json();
      if (!r.ok) throw new Error(body.error || r.statusText);
      if (conn) { conn.textContent = "live"; conn.classList.remove("bad"); }
      return body;
    } catch (e) {
      if (conn) { conn.textContent = "offline: " + e.message; conn.classList.add("bad"); }
      throw e;
    }
  },
  // An element with attributes and text content.
  el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  },
  // Set an element's text (by id) and keep the raw value in data-value for tools.
  set(id, text, raw) {
    const e = document.getElementById(id);
    if (!e) return;
    e.textContent = text;
    e.dataset.value = raw === undefined ? text : String(raw);
  },
  num(x, digits) {
    if (x === null || x === undefined) return "–";
    return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits || 0, minimumFractionDigits: digits || 0 });
  },
  duration(s) {
    if (s === null || s === undefined) return "unknown";
    if (s > 0 && s < 1) return "<1s";
    s = Math.round(s);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + "m";
  },
  signed(v) { return v > 0 ? "+" + v : String(v); },
  // Run fn now and then every ms milliseconds after each run finishes (no overlap).
  poll(fn, ms) {
    const tick = async () => { try { await fn(); } catch (e) { /* shown in the header */ } setTimeout(tick, ms); };
    tick();
  },
  // A uPlot chart of width fitting its container.
  chart(target, series, opts) {
    const width = Math.max(300, target.clientWidth || 400);
    const o = Object.assign({ width, height: 180, series: [{}].concat(series), legend: { show: true } }, opts || {});
    return new uPlot(o, [[]].concat(series.map(() => [])), target);
  },
};
