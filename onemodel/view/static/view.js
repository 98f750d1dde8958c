// The page of `onemodel view`: reads the model's data (a JSON script element), lays out what is
// open with dagre (vendored, layered layout), draws it as SVG. Text from the model is only ever
// set with textContent or as an attribute value: nothing of the model is parsed as HTML or run.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("model-data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg"; // (the SVG namespace name: never fetched)
  const MAX_VISIBLE = 1500; // leaves laid out at once: dagre's time grows fast past this
  const FIRST_SCREEN = 60; // leaves opened at load
  const nodes = D.nodes, groups = D.groups, values = D.values;
  const expanded = new Set();
  const kidGroups = new Map(), kidNodes = new Map();
  groups.forEach((g, i) => push(kidGroups, g.p, i));
  nodes.forEach((n, i) => { if (!(n.p >= 0 && groups[n.p].k === "node" && groups[n.p].node === i)) push(kidNodes, n.p, i); });
  groups.forEach((g, i) => { if (g.k === "node") push(kidNodes, i, g.node); });
  let runMax = 0; // the largest finite output difference of a run (view A B --run)
  nodes.forEach(n => { if (n.rw === false && n.rd !== null && isFinite(n.rd)) runMax = Math.max(runMax, n.rd); });
  const diffGroups = new Set(); // groups holding an added or changed node (A B)
  nodes.forEach(n => { if (n.df || n.rw === false) for (let p = n.p; p >= 0; p = groups[p].p) diffGroups.add(p); });
  function push(m, k, v) { let a = m.get(k); if (!a) m.set(k, a = []); a.push(v); }
  const state = { layoutMs: 0, leaves: 0, selected: -1, ready: false, readyMs: 0, message: "" };
  window.onemodelView = { state: state, data: D, expand: expand, collapse: collapse, reveal: reveal, search: search };

  // ---- visibility -------------------------------------------------------------------------
  function hidden() { // group -> the collapsed ancestor hiding it, or -1
    const hid = new Int32Array(groups.length).fill(-2);
    function h(g) {
      if (hid[g] !== -2) return hid[g];
      const p = groups[g].p;
      let r = -1;
      if (p >= 0) { const hp = h(p); r = hp !== -1 ? hp : (expanded.has(p) ? -1 : p); }
      hid[g] = r; return r;
    }
    for (let g = 0; g < groups.length; g++) h(g);
    return hid;
  }
  function repOf(hid) { // node -> visible item id ("n3" or "g5")
    return function (k) {
      const p = nodes[k].p;
      if (p < 0) return "n" + k;
      if (hid[p] !== -1) return "g" + hid[p];
      return expanded.has(p) ? "n" + k : "g" + p;
    };
  }
  function leafCount() {
    const hid = hidden(); let c = 0;
    const top = (kidGroups.get(-1) || []).length + (kidNodes.get(-1) || []).length;
    c = top;
    expanded.forEach(g => { if (hid[g] === -1) c += kids(g) - 1; });
    return c;
  }
  function kids(g) { return (kidGroups.get(g) || []).length + (kidNodes.get(g) || []).length; }

  // ---- layout -----------------------------------------------------------------------------
  function label(k) {
    const n = nodes[k];
    if (n.k === "input") return ["Input", n.n];
    if (n.k === "output") return ["Output", n.n];
    return [n.o, n.n];
  }
  function textWidth(s) { return Math.min(280, 16 + 7 * s.length); }
  function layout() {
    const t0 = performance.now();
    const hid = hidden(), rep = repOf(hid);
    const g = new dagre.graphlib.Graph({ compound: true, multigraph: false });
    g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 36, marginx: 20, marginy: 20 });
    g.setDefaultEdgeLabel(() => ({}));
    const visibleGroups = [];
    for (let i = 0; i < groups.length; i++) if (hid[i] === -1 && (groups[i].p < 0 || expanded.has(groups[i].p))) visibleGroups.push(i);
    for (const i of visibleGroups) {
      const gr = groups[i];
      if (expanded.has(i)) g.setNode("g" + i, { cluster: true, paddingTop: 24 });
      else {
        const l = [groupLabel(i), groupCount(i)];
        g.setNode("g" + i, { width: Math.max(textWidth(l[0]), textWidth(l[1])), height: 44, group: i, lines: l });
      }
      if (gr.p >= 0) g.setParent("g" + i, "g" + gr.p);
    }
    for (let k = 0; k < nodes.length; k++) {
      const r = rep(k);
      if (r !== "n" + k) continue;
      const l = label(k);
      g.setNode(r, { width: Math.max(textWidth(l[0]), textWidth(l[1])), height: 40, node: k, lines: l });
      if (nodes[k].p >= 0) g.setParent(r, "g" + nodes[k].p);
    }
    const seen = new Set();
    for (let k = 0; k < nodes.length; k++) {
      const b = rep(k);
      for (const v of nodes[k].i) {
        if (v < 0) continue;
        const pr = values[v][3];
        if (pr < 0) continue;
        const a = rep(pr);
        if (a === b) continue;
        const key = a + ">" + b;
        if (seen.has(key)) continue;
        seen.add(key); g.setEdge(a, b);
      }
    }
    dagre.layout(g);
    state.layoutMs = performance.now() - t0;
    return g;
  }
  function groupLabel(i) {
    const gr = groups[i];
    if (gr.k === "function") return gr.l;
    if (gr.k === "subgraph") return "graph " + gr.l;
    return gr.l;
  }
  function groupCount(i) { return groups[i].c + (groups[i].c === 1 ? " node" : " nodes") + " \u25b8"; }

  // ---- drawing ----------------------------------------------------------------------------
  const svg = document.getElementById("canvas");
  const view = el("g", { id: "viewport" });
  svg.appendChild(view);
  let tf = { x: 0, y: 0, s: 1 }, laid = null;
  function el(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function applyTf() { view.setAttribute("transform", "translate(" + tf.x + "," + tf.y + ") scale(" + tf.s + ")"); }
  function category(k) { // (onemodel/view/categories.py: category)
    const n = nodes[k];
    if (n.k !== "op") return "io";
    if (n.fn !== undefined) return "call";
    return D.categories[n.o] || "other";
  }
  function draw() {
    const g = laid = layout();
    state.leaves = 0;
    while (view.firstChild) view.removeChild(view.firstChild);
    const clusters = el("g"), edges = el("g"), items = el("g");
    view.appendChild(clusters); view.appendChild(edges); view.appendChild(items);
    g.nodes().forEach(id => {
      const d = g.node(id);
      if (!d) return;
      if (d.cluster) {
        const i = +id.slice(1);
        const box = el("g", { class: "cluster k-" + groups[i].k, "data-group": i });
        box.appendChild(el("rect", { x: d.x - d.width / 2, y: d.y - d.height / 2, width: d.width, height: d.height, rx: 6 }));
        const head = el("text", { x: d.x - d.width / 2 + 8, y: d.y - d.height / 2 + 15, class: "head" }, clipText("\u25be " + groupLabel(i), d.width));
        box.appendChild(head);
        head.addEventListener("click", ev => { ev.stopPropagation(); collapse(i); });
        clusters.appendChild(box);
        return;
      }
      state.leaves++;
      const x = d.x - d.width / 2, y = d.y - d.height / 2;
      let box;
      if (d.node !== undefined) {
        const k = d.node, n = nodes[k];
        const cls = ["item", "node", "c-" + category(k)];
        if (n.f) cls.push("has-finding", "sev-" + worst(n.f));
        if (n.df) cls.push("diff-" + n.df);
        if (n.rw !== undefined) cls.push(n.rw ? (n.rd ? "run-within" : "run-equal") : "run-beyond");
        if (D.run && D.run.first === k) cls.push("run-first");
        if (k === state.selected) cls.push("selected");
        box = el("g", { class: cls.join(" "), "data-node": k, id: "node-" + k });
        box.addEventListener("click", ev => { ev.stopPropagation(); select(k); });
      } else {
        const i = d.group;
        box = el("g", { class: "item group k-" + groups[i].k + (diffGroups.has(i) ? " has-diff" : ""), "data-group": i, id: "group-" + i });
        box.addEventListener("click", ev => { ev.stopPropagation(); expand(i); });
      }
      const rect = el("rect", { x: x, y: y, width: d.width, height: d.height, rx: 4 });
      if (d.node !== undefined && nodes[d.node].rw === false) rect.setAttribute("style", "fill:" + heat(nodes[d.node].rd));
      box.appendChild(rect);
      box.appendChild(el("text", { x: d.x, y: y + 16, class: "l1" }, clipText(d.lines[0], d.width)));
      box.appendChild(el("text", { x: d.x, y: y + 32, class: "l2" }, clipText(d.lines[1] || "", d.width)));
      items.appendChild(box);
    });
    g.edges().forEach(e => {
      const pts = g.edge(e).points || [];
      if (!pts.length) return;
      edges.appendChild(el("path", { d: "M" + pts.map(p => p.x + "," + p.y).join("L"), class: "edge", "marker-end": "url(#arrow)" }));
    });
    document.getElementById("status").textContent = state.leaves + " shown \u00b7 " + nodes.length + " nodes \u00b7 " + groups.length + " groups \u00b7 layout " + Math.round(state.layoutMs) + " ms" + (state.message ? " \u00b7 " + state.message : "");
  }
  function heat(rd) { // a node's colour by the largest difference of its outputs (view A B --run)
    if (rd === null || rd === undefined || !isFinite(rd) || !runMax) return "rgb(220,0,0)";
    const t = Math.log1p(rd) / Math.log1p(runMax); // 0..1
    return "rgb(255," + Math.round(200 * (1 - t)) + "," + Math.round(160 * (1 - t)) + ")";
  }
  function clipText(s, w) { const n = Math.max(4, Math.floor((w - 12) / 7)); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function worst(fs) {
    let r = "info";
    for (const f of fs) { const s = D.findings[f].s; if (s === "error") return "error"; if (s === "warning") r = "warning"; }
    return r;
  }
  function fit() {
    if (!laid || !laid.nodeCount()) return; // (a graph without nodes: nothing to fit)
    const gg = laid.graph(), r = svg.getBoundingClientRect();
    if (!isFinite(gg.width) || !isFinite(gg.height)) return;
    const s = Math.min(2, (r.width - 20) / Math.max(1, gg.width), (r.height - 20) / Math.max(1, gg.height));
    tf = { s: s, x: (r.width - gg.width * s) / 2, y: Math.max(10, (r.height - gg.height * s) / 2) };
    applyTf();
  }
  function centerOn(id) {
    const d = laid && laid.node(id);
    if (!d) return;
    const r = svg.getBoundingClientRect();
    tf.s = Math.max(tf.s, 0.8);
    tf.x = r.width / 2 - d.x * tf.s; tf.y = r.height / 2 - d.y * tf.s;
    applyTf();
  }

  // ---- opening and closing ----------------------------------------------------------------
  function expand(i) {
    if (expanded.has(i)) return;
    if (leafCount() + kids(i) - 1 > MAX_VISIBLE) {
      state.message = "not opened: more than " + MAX_VISIBLE + " items would be shown; close a group first";
      draw(); return;
    }
    state.message = "";
    expanded.add(i); draw(); centerOn(laid.node("g" + i) ? "g" + i : null);
    showGroup(i);
  }
  function collapse(i) { expanded.delete(i); for (const c of kidGroups.get(i) || []) collapseAll(c); draw(); }
  function collapseAll(i) { expanded.delete(i); for (const c of kidGroups.get(i) || []) collapseAll(c); }
  function reveal(k) { // open every group above node k, lay out, center on it, select it
    for (let p = nodes[k].p; p >= 0; p = groups[p].p) expanded.add(p);
    state.message = "";
    select(k, true);
  }
  function openFirstScreen() {
    let count = leafCount();
    const queue = (kidGroups.get(-1) || []).slice();
    while (queue.length) {
      const i = queue.shift();
      if (count + kids(i) - 1 > FIRST_SCREEN) continue;
      expanded.add(i); count += kids(i) - 1;
      for (const c of kidGroups.get(i) || []) queue.push(c);
    }
  }

  // ---- the side panel ---------------------------------------------------------------------
  const panel = document.getElementById("panel");
  function h(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
  function clear() { while (panel.firstChild) panel.removeChild(panel.firstChild); panel.scrollTop = 0; }
  function table(rows, head) {
    const t = h("table");
    if (head) { const tr = h("tr"); head.forEach(c => tr.appendChild(h("th", c))); t.appendChild(tr); }
    rows.forEach(r => { const tr = h("tr"); r.forEach(c => { const td = h("td"); if (c instanceof Node) td.appendChild(c); else td.textContent = c; tr.appendChild(td); }); t.appendChild(tr); });
    return t;
  }
  function fmt(x) { return x === null || x === undefined ? "-" : (Number.isInteger(x) ? String(x) : x.toPrecision(6)); }
  function valueCell(v) {
    if (v < 0) return ["(none)", "", ""];
    const [name, t, init] = values[v];
    let extra = "";
    if (init >= 0) {
      const it = D.inits[init], st = it.st;
      extra = "initializer " + it.t + "[" + it.s.join(",") + "] " + it.b + " bytes";
      if (st && st.error) extra += "; statistics: " + st.error;
      else if (st) extra += "; min " + fmt(st.min) + " max " + fmt(st.max) + " mean " + fmt(st.mean) + " NaN " + st.nan + " Inf " + st.inf + (st.sampled ? " (sampled " + st.count + " of " + st.total + ")" : "");
    }
    return [name, t >= 0 ? D.types[t] : "?", extra];
  }
  function select(k, andCenter) {
    state.selected = k;
    draw();
    if (andCenter) centerOn(repOf(hidden())(k));
    const n = nodes[k];
    clear();
    panel.appendChild(h("h2", n.k === "op" ? n.o : (n.k === "input" ? "Input" : "Output")));
    const rows = [["name", n.n], ["op", n.o], ["domain", n.d || "ai.onnx"], ["version", n.v === null || n.v === undefined ? "-" : String(n.v)]];
    panel.appendChild(table(rows));
    if (n.fn !== undefined) {
      const b = h("button", "open " + groups[n.fn].l);
      b.addEventListener("click", () => expand(n.fn));
      panel.appendChild(b);
    }
    if (n.rw !== undefined) {
      panel.appendChild(h("h3", "Run"));
      panel.appendChild(h("p", "largest difference of its outputs: " + (n.rd === null ? "not comparable (type or shape)" : fmt(n.rd)) + (n.rw ? ", within tolerance" : ", beyond tolerance") + (D.run.first === k ? "; the first differing node: " + D.run.verdict : "")));
    }
    if (n.df) {
      panel.appendChild(h("h3", n.df === "added" ? "Added" : "Changed"));
      const ul = h("ul"); n.dr.forEach(r => ul.appendChild(h("li", r))); panel.appendChild(ul);
    }
    if (n.f) {
      panel.appendChild(h("h3", "Findings"));
      panel.appendChild(table(n.f.map(f => [D.findings[f].c, D.findings[f].s, D.findings[f].m]), ["code", "severity", "message"]));
    }
    if (n.a) { panel.appendChild(h("h3", "Attributes")); panel.appendChild(table(n.a)); }
    if (n.i.length) { panel.appendChild(h("h3", "Inputs")); panel.appendChild(table(n.i.map(valueCell), ["value", "type", ""])); }
    if (n.u.length) { panel.appendChild(h("h3", "Outputs")); panel.appendChild(table(n.u.map(valueCell), ["value", "type", ""])); }
    if (n.doc) { panel.appendChild(h("h3", "Documentation")); panel.appendChild(h("pre", n.doc)); }
  }
  function showGroup(i) {
    clear();
    const g = groups[i];
    panel.appendChild(h("h2", groupLabel(i)));
    panel.appendChild(table([["kind", g.k], ["nodes", String(g.c)]]));
  }
  function showSummary() {
    clear();
    panel.appendChild(h("h2", "Summary"));
    panel.appendChild(tree(D.summary, 0));
    if (D.run) {
      const r = D.run;
      panel.appendChild(h("h3", "Run (" + r.engines.join(" vs ") + "): " + r.differing + " of " + r.compared + " nodes differ"));
      if (r.first >= 0) {
        const li = h("p", "first differing node: " + nodes[r.first].o + " " + nodes[r.first].n + " (" + r.verdict + ")", "link");
        li.addEventListener("click", () => reveal(r.first)); panel.appendChild(li);
      }
    }
    if (D.diff) {
      const df = D.diff;
      panel.appendChild(h("h3", "Differences from " + df.against + ": " + df.added + " added, " + df.changed + " changed, " + df.removed.length + " removed"));
      const ul = h("ul");
      nodes.forEach((n, k) => {
        if (!n.df || ul.childNodes.length >= 500) return;
        const li = h("li", n.df + ": " + n.o + " " + n.n + " (" + n.dr.join("; ") + ")", "link diff-" + n.df);
        li.addEventListener("click", () => reveal(k)); ul.appendChild(li);
      });
      df.removed.slice(0, 500).forEach(r => ul.appendChild(h("li", "removed: " + r[1] + " " + r[0], "diff-removed")));
      panel.appendChild(ul);
    }
    if (D.notes.length) { panel.appendChild(h("h3", "Notes")); D.notes.forEach(n => panel.appendChild(h("p", n))); }
    panel.appendChild(h("h3", "Findings (" + D.findings.length + ")"));
    const ul = h("ul");
    D.findings.slice(0, 500).forEach(f => {
      const li = h("li", f.c + " " + f.s + ": " + f.m + (f.p ? " [" + f.p + "]" : ""), "sev-" + f.s);
      if (f.node >= 0) { li.classList.add("link"); li.addEventListener("click", () => reveal(f.node)); }
      ul.appendChild(li);
    });
    panel.appendChild(ul);
  }
  function tree(x, depth) {
    if (x === null || typeof x !== "object") return h("span", String(x));
    const t = h("table", undefined, "tree");
    const entries = Array.isArray(x) ? x.map((v, i) => [String(i), v]) : Object.entries(x);
    entries.slice(0, 200).forEach(([k, v]) => {
      const tr = h("tr"); tr.appendChild(h("th", k));
      const td = h("td"); td.appendChild(depth > 4 ? h("span", JSON.stringify(v)) : tree(v, depth + 1));
      tr.appendChild(td); t.appendChild(tr);
    });
    if (entries.length > 200) { const tr = h("tr"); tr.appendChild(h("td", "\u2026 " + entries.length + " in all")); t.appendChild(tr); }
    return t;
  }

  // ---- search -----------------------------------------------------------------------------
  function search(q) { // node indices whose name, op or a value name contains q (case folded)
    q = q.trim().toLowerCase();
    const out = [];
    if (!q) return out;
    for (let k = 0; k < nodes.length && out.length < 200; k++) {
      const n = nodes[k];
      if (n.n.toLowerCase().includes(q) || n.o.toLowerCase().includes(q) ||
          n.i.some(v => v >= 0 && values[v][0].toLowerCase().includes(q)) ||
          n.u.some(v => v >= 0 && values[v][0].toLowerCase().includes(q))) out.push(k);
    }
    return out;
  }
  const box = document.getElementById("search");
  box.addEventListener("keydown", ev => {
    if (ev.key !== "Enter") return;
    const found = search(box.value);
    clear();
    panel.appendChild(h("h2", "Search: " + found.length + (found.length === 200 ? "+" : "") + " found"));
    const ul = h("ul", undefined, "results");
    found.forEach(k => { const li = h("li", nodes[k].o + " " + nodes[k].n, "link"); li.addEventListener("click", () => reveal(k)); ul.appendChild(li); });
    panel.appendChild(ul);
    if (found.length) reveal(found[0]);
    ev.preventDefault();
  });

  // ---- pan and zoom -----------------------------------------------------------------------
  let drag = null;
  svg.addEventListener("mousedown", ev => { drag = { x: ev.clientX - tf.x, y: ev.clientY - tf.y }; });
  window.addEventListener("mousemove", ev => { if (drag) { tf.x = ev.clientX - drag.x; tf.y = ev.clientY - drag.y; applyTf(); } });
  window.addEventListener("mouseup", () => { drag = null; });
  function zoom(f, cx, cy) {
    const s = Math.min(8, Math.max(0.02, tf.s * f));
    tf.x = cx - (cx - tf.x) * s / tf.s; tf.y = cy - (cy - tf.y) * s / tf.s; tf.s = s; applyTf();
  }
  svg.addEventListener("wheel", ev => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    zoom(Math.exp(-ev.deltaY * 0.0015), ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  window.addEventListener("keydown", ev => {
    if (ev.target === box) { if (ev.key === "Escape") box.blur(); return; }
    const r = svg.getBoundingClientRect(), step = 60;
    switch (ev.key) {
      case "ArrowLeft": tf.x += step; break;
      case "ArrowRight": tf.x -= step; break;
      case "ArrowUp": tf.y += step; break;
      case "ArrowDown": tf.y -= step; break;
      case "+": case "=": zoom(1.25, r.width / 2, r.height / 2); return;
      case "-": zoom(0.8, r.width / 2, r.height / 2); return;
      case "0": case "f": fit(); return;
      case "/": box.focus(); ev.preventDefault(); return;
      case "s": showSummary(); return;
      default: return;
    }
    applyTf(); ev.preventDefault();
  });
  document.getElementById("fit").addEventListener("click", fit);
  document.getElementById("summary").addEventListener("click", showSummary);
  document.getElementById("close-all").addEventListener("click", () => { expanded.clear(); draw(); fit(); });

  openFirstScreen();
  draw(); fit(); showSummary();
  state.ready = true;
  state.readyMs = performance.now(); // (from the start of the navigation: performance.timeOrigin)
  document.body.setAttribute("data-ready", "1");
})();
