// runner report's page: builds the report from the JSON in #attnlab-data with the embedded Vega.
// Text from the results files only ever enters the page as text nodes or Vega data (never as HTML).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("attnlab-data").textContent);
  var main = document.getElementById("report");
  var palette = vega.scheme("tableau10");
  var pending = [];
  var report = (window.attnlabReport = { data: data, views: [], ready: false });

  // ---- helpers ---------------------------------------------------------------------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "className") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function runColor(i) { return palette[i % palette.length]; }
  function runIds() { return data.runs.map(function (r) { return r.id; }); }
  function swatch(i) { var s = el("span", { className: "swatch" }); s.style.background = runColor(i); return s; }
  function section(id, title) {
    var s = el("section", { id: id }, [el("h2", { text: title })]);
    main.appendChild(s);
    return s;
  }
  function render(container, spec, renderer) {
    var view = new vega.View(vega.parse(spec), { renderer: renderer || "svg", container: container, hover: true });
    report.views.push(view);
    pending.push(view.runAsync());
    return view;
  }
  function finalize(view) {
    var i = report.views.indexOf(view);
    if (i >= 0) report.views.splice(i, 1);
    view.finalize();
  }

  // ---- header ----------------------------------------------------------------------------------
  function header() {
    var runs = data.runs;
    var title = runs.length === 1 ? "Run " + runs[0].experiment : runs.length + " runs";
    if (data.group_by.length) title += " grouped by " + data.group_by.join(", ");
    main.appendChild(el("h1", { text: title }));
    main.appendChild(el("nav", {}, [
      el("a", { href: "#runs", text: "Runs" }), el("a", { href: "#curves", text: "Curves" }),
      el("a", { href: "#tables", text: "Tables" }),
      data.ablations.length || data.pruning.length ? el("a", { href: "#heads", text: "Heads" }) : null,
      data.head_scores.length ? el("a", { href: "#head-scores", text: "Head scores" }) : null,
      el("a", { href: "#attention", text: "Attention" }),
      data.rollout.length ? el("a", { href: "#rollout", text: "Rollout" }) : null,
      el("a", { href: "#predictions", text: "Outputs" })]));
    var s = section("runs", "Runs");
    s.appendChild(el("p", {}, [el("b", { text: "Differing config keys: " }),
      data.differing.length ? data.differing.join(", ") : "none"]));
    var list = el("ul", { className: "runs-list" });
    runs.forEach(function (r, i) {
      var li = el("li", {}, [swatch(i), el("b", { text: r.id }), " ",
        el("span", { className: "status status-" + r.status, text: r.status }), " ",
        r.experiment, r.label && r.label !== r.experiment ? " \u2014 " + r.label : "",
        r.group ? " [group " + r.group + "]" : "", " ", el("span", { className: "muted", text: r.path })]);
      if (r.detail) li.appendChild(el("div", { className: "muted", text: r.detail }));
      list.appendChild(li);
    });
    s.appendChild(list);
    runs.forEach(function (r) {
      var when = r.started ? " (started " + r.started + (r.finished ? ", finished " + r.finished : "") + ")" : "";
      s.appendChild(el("details", {}, [el("summary", { text: "Config of " + r.id + ": " + r.experiment + when }),
        el("pre", { text: r.config || "(no /config stored)" })]));
    });
  }

  // ---- curves ----------------------------------------------------------------------------------
  function isLoss(name) { return name.indexOf("loss") >= 0; }
  // Tick values of a y axis over [lo, hi]: 1-2-5 steps per decade on a log axis, thinned to at
  // most 8; a log range too narrow for three of those (val/loss between 2.5 and 3.4) gets about
  // five linear 1-2-5 ticks instead, so no panel shows a single label.
  function yTicks(lo, hi, log) {
    if (!isFinite(lo) || !isFinite(hi)) return [];
    if (!(hi > lo)) return [lo];
    var ticks = [];
    if (log) {
      [[1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 5], [1]].some(function (ms) {
        ticks = [];
        for (var d = Math.floor(Math.log10(lo)); d <= Math.ceil(Math.log10(hi)); d++)
          ms.forEach(function (m) { var v = m * Math.pow(10, d); if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push(v); });
        return ticks.length <= 8;
      });
      if (ticks.length >= 3) return ticks;
    }
    var raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; }).filter(function (v) { return v >= raw; })[0];
    ticks = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
    return ticks;
  }
  function curveSpec(metric, logMode, hidden) {
    var log = logMode === "log" || (logMode === "losses" && isLoss(metric.name));
    var values = [];
    metric.series.forEach(function (s) {
      if (hidden[s.run]) return;
      var r = data.runs[s.run];
      s.x.forEach(function (x, k) {
        var y = s.y[k];
        if (y === null || (log && !(y > 0))) return;
        values.push({ run: r.id, label: r.label, x: x, y: y });
      });
    });
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) { lo = Math.min(lo, v.y); hi = Math.max(hi, v.y); });
    return {
      $schema: "https://vega.github.io/schema/vega/v5.json",
      width: 340, height: 190, padding: 6, autosize: "pad",
      title: { text: metric.name, fontSize: 13, anchor: "start" },
      data: [{ name: "pts", values: values }],
      signals: [{ name: "hover", value: null,
        on: [{ events: "@pt:mouseover", update: "datum" }, { events: "@pt:mouseout", update: "null" }] }],
      scales: [
        { name: "x", type: "linear", domain: { data: "pts", field: "x" }, range: "width", zero: false, nice: false },
        { name: "y", type: log ? "log" : "linear", domain: { data: "pts", field: "y" }, range: "height", zero: false, nice: !log },
        { name: "color", type: "ordinal", domain: runIds(), range: palette }],
      axes: [
        { orient: "bottom", scale: "x", title: metric.per_step ? "optimizer step" : "epoch", tickCount: 6, format: "~d" },
        { orient: "left", scale: "y", values: yTicks(lo, hi, log), grid: true, gridOpacity: 0.35,
          encode: { labels: { update: { text: { signal:
            "abs(datum.value) >= 1e6 || (datum.value !== 0 && abs(datum.value) < 1e-4) ? format(datum.value, '.2~e') : format(datum.value, ',.4~r')" } } } } }],
      marks: [
        { type: "group", name: "series", from: { facet: { name: "one", data: "pts", groupby: ["run"] } },
          marks: [{ type: "line", name: "curve", from: { data: "one" },
            encode: { enter: { x: { scale: "x", field: "x" }, y: { scale: "y", field: "y" },
              stroke: { scale: "color", field: "run" }, strokeWidth: { value: 2 } } } }] },
        { type: "symbol", name: "pt", from: { data: "pts" },
          encode: {
            enter: { x: { scale: "x", field: "x" }, y: { scale: "y", field: "y" }, fill: { scale: "color", field: "run" },
              tooltip: { signal: "datum.run + ' ' + datum.label + ': ' + datum.x + ' \u2192 ' + format(datum.y, '.5~g')" } },
            update: { size: { signal: "hover && hover.run === datum.run && hover.x === datum.x ? 90 : 16" } } } },
        { type: "text", encode: { update: { x: { signal: "width" }, y: { value: -6 }, align: { value: "right" },
          fontSize: { value: 11 }, fill: { value: "#333" },
          text: { signal: "hover ? hover.run + ' @' + hover.x + ': ' + format(hover.y, '.5~g') : ''" } } } }]
    };
  }
  function curves() {
    var s = section("curves", "Curves");
    if (!data.metrics.length) { s.appendChild(el("p", { className: "muted", text: "No metric series." })); return; }
    var mode = el("select", { id: "yscale" }, [el("option", { value: "losses", text: "log for losses" }),
      el("option", { value: "log", text: "log" }), el("option", { value: "linear", text: "linear" })]);
    var controls = el("div", { className: "controls" }, [el("label", {}, ["y axis: ", mode])]);
    var hidden = {};
    data.runs.forEach(function (r, i) {
      var box = el("input", { type: "checkbox", "data-run": String(i) });
      box.checked = true;
      box.addEventListener("change", function () { hidden[i] = !box.checked; draw(); });
      controls.appendChild(el("label", { title: r.path }, [box, swatch(i), r.id + " " + r.label]));
    });
    s.appendChild(controls);
    var charts = el("div", { className: "charts" });
    s.appendChild(charts);
    var views = [];
    function draw() {
      views.forEach(finalize);
      views = [];
      charts.textContent = "";
      data.metrics.forEach(function (m) {
        var div = el("div", { className: "chart", "data-metric": m.name });
        charts.appendChild(div);
        views.push(render(div, curveSpec(m, mode.value, hidden)));
      });
    }
    mode.addEventListener("change", draw);
    draw();
  }

  // ---- tables ----------------------------------------------------------------------------------
  function sortKey(text) {
    var v = parseFloat(text);
    return isNaN(v) ? null : v;
  }
  function dataTable(t) {
    var table = el("table", { className: "data", "data-table": t.id });
    var head = el("tr");
    var body = el("tbody");
    var order = { col: -1, dir: 1 };
    t.header.forEach(function (h, c) {
      var th = el("th", { text: h, title: "sort by " + h });
      th.addEventListener("click", function () {
        order.dir = order.col === c ? -order.dir : 1;
        order.col = c;
        Array.prototype.forEach.call(head.children, function (x) { x.className = ""; });
        th.className = order.dir > 0 ? "sorted-asc" : "sorted-desc";
        var rows = Array.prototype.slice.call(body.children);
        rows.sort(function (a, b) {
          var x = a.children[c].textContent, y = b.children[c].textContent;
          var nx = t.numeric[c] ? sortKey(x) : null, ny = t.numeric[c] ? sortKey(y) : null;
          if (nx !== null && ny !== null) return (nx - ny) * order.dir;
          if (nx !== null) return -1;  // numbers before "-"
          if (ny !== null) return 1;
          return x.localeCompare(y, undefined, { numeric: true }) * order.dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
      head.appendChild(th);
    });
    // A continuation row (compare's "best" under "final", first cell blank) repeats its group's
    // name, greyed, so a sorted table still says which metric each row is.
    var group = "";
    t.rows.forEach(function (row) {
      body.appendChild(el("tr", {}, row.map(function (cell, c) {
        if (c === 0 && cell === "" && group !== "") return el("td", { className: "repeat", text: group });
        if (c === 0) group = cell;
        return el("td", { className: t.numeric[c] ? "num" : "", text: cell });
      })));
    });
    table.appendChild(el("thead", {}, [head]));
    table.appendChild(body);
    return el("div", { className: "table-wrap" }, [table]);
  }
  function tables() {
    var s = section("tables", "Tables");
    s.appendChild(el("p", { className: "muted", text: "As runner compare prints them; click a column header to sort." }));
    data.tables.forEach(function (t) {
      s.appendChild(el("h3", { text: t.title }));
      s.appendChild(dataTable(t));
    });
  }

  // ---- attention explorer ----------------------------------------------------------------------
  function tokenLabels(tokens, n) {
    var out = [];
    for (var i = 0; i < n; ++i) out.push(tokens.length === n ? tokens[i] : "#" + i);
    return out;
  }
  function mapMax(m) {
    var top = 0;
    for (var i = 0; i < m.w.length; ++i) if (m.w[i] > top) top = m.w[i];
    return Math.max(top, 1) / data.attention.scale;
  }
  function weightAt(m, l, h, q, k) {
    return m.w[((l * m.heads + h) * m.queries + q) * m.keys + k] / data.attention.scale;
  }
  // Whether head h of the map's layer row l was switched off while the run trained
  // (interventions.head_mask): its weights are what it computed, its output was multiplied by 0.
  function headOff(run, m, l, h) {
    var off = (run.heads_off || {})[m.module] || [];
    return off.some(function (x) { return x[0] === m.layers[l] && x[1] === h; });
  }
  // The model view: rows = layers, columns = heads, one small heatmap each; a head switched off in
  // training is greyed and labelled "off".
  function modelSpec(m, sel, run) {
    var size = Math.max(36, Math.min(90, Math.floor(540 / m.heads) - 8)), gap = 8, left = 52, top = 16;
    var cw = size / m.keys, ch = size / m.queries, cells = [], frames = [], labels = [];
    for (var l = 0; l < m.layers.length; ++l) {
      labels.push({ x: left - 6, y: top + l * (size + gap) + size / 2, t: "layer " + (m.layers[l] + 1), a: "right" });
      for (var h = 0; h < m.heads; ++h) {
        var ox = left + h * (size + gap), oy = top + l * (size + gap);
        if (l === 0) labels.push({ x: ox + size / 2, y: top - 5, t: "head " + (h + 1), a: "center" });
        var off = headOff(run, m, l, h);
        frames.push({ l: l, h: h, x: ox, y: oy, s: size, off: off });
        for (var q = 0; q < m.queries; ++q) {
          for (var k = 0; k < m.keys; ++k) {
            cells.push({ l: l, h: h, x: ox + k * cw, y: oy + q * ch, w: weightAt(m, l, h, q, k),
              off: off ? " (switched off in training)" : "" });
          }
        }
      }
    }
    return {
      width: left + m.heads * (size + gap), height: top + m.layers.length * (size + gap), padding: 2, autosize: "none",
      data: [{ name: "cells", values: cells }, { name: "frames", values: frames }, { name: "labels", values: labels },
        { name: "off", source: "frames", transform: [{ type: "filter", expr: "datum.off" }] }],
      signals: [{ name: "sel", value: sel },
        { name: "pick", value: null, on: [{ events: "@mvcell:click, @mvframe:click", update: "{l: datum.l, h: datum.h}" }] }],
      scales: [{ name: "color", type: "linear", domain: [0, mapMax(m)], range: { scheme: "blues" }, zero: true }],
      marks: [
        { type: "rect", name: "mvcell", from: { data: "cells" },
          encode: { enter: { x: { field: "x" }, y: { field: "y" }, width: { value: cw + 0.02 }, height: { value: ch + 0.02 },
            fill: { scale: "color", field: "w" }, cursor: { value: "pointer" },
            tooltip: { signal: "'layer ' + (datum.l + 1) + ' head ' + (datum.h + 1) + ': ' + format(datum.w, '.3f') + datum.off" } } } },
        { type: "rect", name: "mvoff", from: { data: "off" }, interactive: false,
          encode: { enter: { x: { field: "x" }, y: { field: "y" }, width: { field: "s" }, height: { field: "s" },
            fill: { value: "#888" }, fillOpacity: { value: 0.55 } } } },
        { type: "text", name: "mvofftext", from: { data: "off" }, interactive: false,
          encode: { enter: { x: { signal: "datum.x + datum.s / 2" }, y: { signal: "datum.y + datum.s / 2" }, text: { value: "off" },
            align: { value: "center" }, baseline: { value: "middle" }, fill: { value: "#fff" }, fontWeight: { value: "bold" },
            fontSize: { value: 12 } } } },
        { type: "rect", name: "mvframe", from: { data: "frames" },
          encode: { enter: { x: { field: "x" }, y: { field: "y" }, width: { field: "s" }, height: { field: "s" },
            fill: { value: "transparent" }, cursor: { value: "pointer" } },
            update: { stroke: { signal: "sel.l === datum.l && sel.h === datum.h ? '#d62728' : '#ccc'" },
              strokeWidth: { signal: "sel.l === datum.l && sel.h === datum.h ? 2.5 : 0.5" } } } },
        { type: "text", from: { data: "labels" }, encode: { enter: { x: { field: "x" }, y: { field: "y" },
          text: { field: "t" }, align: { field: "a" }, baseline: { value: "middle" }, fontSize: { value: 10.5 } } } }]
    };
  }
  // One head, large: query tokens down the left, key tokens along the top.
  // `width`: the panel's width in pixels (room for the key tokens; the query tokens take ~170).
  function headSpec(m, l, h, width) {
    var q = tokenLabels(m.query_tokens, m.queries), k = tokenLabels(m.key_tokens, m.keys);
    var c = Math.max(12, Math.min(44, Math.floor(Math.min((width - 180) / m.keys, 600 / m.queries))));
    var font = Math.min(12, c - 2);
    var cells = [];
    for (var i = 0; i < m.queries; ++i) {
      for (var j = 0; j < m.keys; ++j) cells.push({ q: i, k: j, w: weightAt(m, l, h, i, j), qt: q[i], kt: k[j] });
    }
    var idx = function (tokens) { return tokens.map(function (t, i) { return { i: i, t: t }; }); };
    var numbers = c >= 18;
    return {
      width: m.keys * c, height: m.queries * c, padding: 4, autosize: "pad",
      data: [{ name: "cells", values: cells }, { name: "qtoks", values: idx(q) }, { name: "ktoks", values: idx(k) }],
      signals: [
        { name: "hq", value: -1, on: [{ events: "@qtok:mouseover", update: "datum.i" },
          { events: "@cell:mouseover", update: "datum.q" }, { events: "@qtok:mouseout, @cell:mouseout", update: "-1" }] },
        { name: "hk", value: -1, on: [{ events: "@ktok:mouseover", update: "datum.i" },
          { events: "@cell:mouseover", update: "datum.k" }, { events: "@ktok:mouseout, @cell:mouseout", update: "-1" }] }],
      scales: [
        { name: "x", type: "band", domain: { data: "ktoks", field: "i" }, range: "width" },
        { name: "y", type: "band", domain: { data: "qtoks", field: "i" }, range: "height" },
        { name: "color", type: "linear", domain: [0, mapMax(m)], range: { scheme: "blues" }, zero: true }],
      marks: [
        { type: "rect", name: "cell", from: { data: "cells" },
          encode: {
            enter: { x: { scale: "x", field: "k" }, width: { scale: "x", band: 1 }, y: { scale: "y", field: "q" },
              height: { scale: "y", band: 1 }, fill: { scale: "color", field: "w" },
              tooltip: { signal: "datum.qt + ' \u2192 ' + datum.kt + ': ' + format(datum.w, '.3f')" } },
            update: {
              opacity: { signal: "(hq < 0 && hk < 0) || datum.q === hq || datum.k === hk ? 1 : 0.3" },
              stroke: { signal: "datum.q === hq || datum.k === hk ? '#d62728' : null" }, strokeWidth: { value: 0.6 } } } },
        { type: "text", name: "weights", from: { data: "cells" }, interactive: false,
          encode: { enter: { x: { scale: "x", field: "k", band: 0.5 }, y: { scale: "y", field: "q", band: 0.5 },
            align: { value: "center" }, baseline: { value: "middle" }, fontSize: { value: Math.min(10, c * 0.38) },
            fill: { signal: "datum.w > " + mapMax(m) * 0.55 + " ? 'white' : 'black'" } },
            update: { text: { signal: numbers ? "datum.q === hq || datum.k === hk ? format(datum.w, '.2f') : ''" : "''" } } } },
        { type: "text", name: "qtok", from: { data: "qtoks" },
          encode: { enter: { x: { value: -5 }, y: { scale: "y", field: "i", band: 0.5 }, text: { field: "t" }, limit: { value: 150 },
            align: { value: "right" }, baseline: { value: "middle" }, fontSize: { value: font }, cursor: { value: "pointer" } },
            update: { fill: { signal: "datum.i === hq ? '#d62728' : '#222'" },
              fontWeight: { signal: "datum.i === hq ? 'bold' : 'normal'" } } } },
        { type: "text", name: "ktok", from: { data: "ktoks" },
          encode: { enter: { x: { scale: "x", field: "i", band: 0.5 }, y: { value: -5 }, text: { field: "t" }, limit: { value: 150 },
            angle: { value: -55 }, align: { value: "left" }, baseline: { value: "middle" }, fontSize: { value: font },
            cursor: { value: "pointer" } },
            update: { fill: { signal: "datum.i === hk ? '#d62728' : '#222'" },
              fontWeight: { signal: "datum.i === hk ? 'bold' : 'normal'" } } } }]
    };
  }
  // The readout under a head: the strongest weights of the hovered query's row (or key's column).
  function describeRow(m, l, h, qi, ki) {
    var q = tokenLabels(m.query_tokens, m.queries), k = tokenLabels(m.key_tokens, m.keys);
    if (qi < 0 && ki < 0) return "Hover a token (or a cell) to highlight its row or column and read its weights.";
    var byRow = qi >= 0, n = byRow ? m.keys : m.queries, parts = [];
    for (var i = 0; i < n; ++i) {
      parts.push({ t: byRow ? k[i] : q[i], w: byRow ? weightAt(m, l, h, qi, i) : weightAt(m, l, h, i, ki) });
    }
    parts.sort(function (a, b) { return b.w - a.w; });
    var head = byRow ? (m.query_side || "query") + " '" + q[qi] + "' attends to: "
                     : (m.key_side || "key") + " '" + k[ki] + "' is attended by: ";
    return head + parts.slice(0, 6).map(function (p) { return "'" + p.t + "' " + p.w.toFixed(3); }).join(", ");
  }
  function explorer() {
    var s = section("attention", "Attention explorer");
    var A = data.attention;
    if (!A.samples.length) { s.appendChild(el("p", { className: "muted", text: "No attention recorded." })); return; }
    if (A.note) s.appendChild(el("p", { className: "note", text: A.note }));
    var sampleSel = el("select", { id: "att-sample" }), moduleSel = el("select", { id: "att-module" });
    A.samples.forEach(function (x, i) { sampleSel.appendChild(el("option", { value: String(i), text: x.text })); });
    var headInfo = el("span", { className: "muted" });
    s.appendChild(el("div", { className: "controls" }, [el("label", {}, ["sample: ", sampleSel]),
      el("label", {}, ["module: ", moduleSel]), headInfo]));
    var panels = el("div", { className: "att-runs" });
    s.appendChild(panels);
    var state = { layer: 0, head: 0 }, views = [];
    function modules() {
      var names = [];
      A.samples[+sampleSel.value].runs.forEach(function (r) {
        r.maps.forEach(function (m) { if (names.indexOf(m.module) < 0) names.push(m.module); });
      });
      var order = ["encoder_self", "decoder_self", "decoder_cross"];
      return names.sort(function (a, b) {
        var x = order.indexOf(a), y = order.indexOf(b);
        return (x < 0 ? 99 : x) - (y < 0 ? 99 : y) || a.localeCompare(b);
      });
    }
    function fillModules() {
      var keep = moduleSel.value;
      moduleSel.textContent = "";
      modules().forEach(function (m) { moduleSel.appendChild(el("option", { value: m, text: m.replace("_", " ") })); });
      if (modules().indexOf(keep) >= 0) moduleSel.value = keep;
    }
    function draw() {
      views.forEach(finalize);
      views = [];
      panels.textContent = "";
      var sample = A.samples[+sampleSel.value], heads = [];
      sample.runs.forEach(function (entry) {
        var m = entry.maps.filter(function (x) { return x.module === moduleSel.value; })[0];
        var r = data.runs[entry.run];
        var panel = el("div", { className: "att-panel", "data-run": r.id, "data-hover-row": "-1", "data-hover-col": "-1" });
        panel.appendChild(el("h3", {}, [swatch(entry.run), r.id + " " + r.label]));
        panels.appendChild(panel);
        if (!m) { panel.appendChild(el("p", { className: "muted", text: "not recorded for this run" })); return; }
        var l = Math.min(state.layer, m.layers.length - 1), h = Math.min(state.head, m.heads - 1);
        panel.appendChild(el("div", { className: "muted", text: m.queries + " " + (m.query_side || "queries") + " \u00d7 " +
          m.keys + " " + (m.key_side || "keys") + "; model view (click a head):" }));
        var mv = el("div", { className: "model-view" }), hv = el("div", { className: "head-view" });
        var readout = el("div", { className: "readout", text: describeRow(m, l, h, -1, -1) });
        panel.appendChild(mv);
        panel.appendChild(el("div", { className: headOff(r, m, l, h) ? "muted head-off" : "muted",
          text: "layer " + (m.layers[l] + 1) + ", head " + (h + 1) + (headOff(r, m, l, h)
            ? ": switched off while training (interventions.head_mask " + r.head_mask + "): the weights it computed; its output was multiplied by 0"
            : ":") }));
        panel.appendChild(readout);
        panel.appendChild(hv);
        var cells = m.layers.length * m.heads * m.queries * m.keys;
        var model = render(mv, modelSpec(m, { l: l, h: h }, r), cells > 60000 ? "canvas" : "svg");
        model.addSignalListener("pick", function (name, v) {
          if (!v) return;
          state.layer = v.l;
          state.head = v.h;
          draw();
        });
        var head = render(hv, headSpec(m, l, h, panel.clientWidth));
        heads.push(head);
        var update = function () {
          var hq = head.signal("hq"), hk = head.signal("hk");
          panel.setAttribute("data-hover-row", String(hq));
          panel.setAttribute("data-hover-col", String(hk));
          readout.textContent = describeRow(m, l, h, hq, hk);
          heads.forEach(function (other) {  // the same row in the other runs, side by side
            if (other !== head && (other.signal("hq") !== hq || other.signal("hk") !== hk)) {
              other.signal("hq", hq).signal("hk", hk).runAsync();
            }
          });
        };
        head.addSignalListener("hq", update);
        head.addSignalListener("hk", update);
        views.push(model, head);
      });
      headInfo.textContent = "showing layer " + (state.layer + 1) + ", head " + (state.head + 1) +
        (sample.runs.length > 1 ? "; the runs side by side" : "");
    }
    sampleSel.addEventListener("change", function () { fillModules(); draw(); });
    moduleSel.addEventListener("change", draw);
    fillModules();
    draw();
  }

  // ---- translations and declared figures ------------------------------------------------------
  // A figure is drawn from its kind alone (the run's trainer or dataset declared it; the page knows
  // no plugin): curve, sequences, heatmap, table.
  function layerColors(f) {
    if (f.kind === "sequences") return ["#222", palette[0], palette[2], palette[1], palette[3]];
    return palette;
  }
  function scaleDomain(lim, data, fields) {
    return lim ? lim : { fields: fields.map(function (d) { return { data: d, field: data }; }) };
  }
  function curveFigureSpec(f) {
    var lines = [], points = [], labels = [], colors = layerColors(f);
    f.layers.forEach(function (l, i) {
      var name = l.label || ("layer " + i);
      labels.push(name);
      l.x.forEach(function (x, k) {
        var v = { layer: name, order: k, x: x, y: l.y[k], shape: l.marker === "cross" ? "cross" : "circle",
          dashed: l.style === "dashed" };
        if (v.y === null || v.x === null) return;
        if (l.style !== "points") lines.push(v);
        if (l.style === "points" || l.marker !== "none") points.push(v);  // a line's marks on it
      });
    });
    return {
      width: 420, height: 240, padding: 6, autosize: "pad",
      title: { text: f.title, fontSize: 13, anchor: "start" },
      data: [{ name: "lines", values: lines }, { name: "points", values: points }],
      scales: [{ name: "x", type: "linear", domain: scaleDomain(f.xlim, "x", ["lines", "points"]), range: "width", zero: false, nice: !f.xlim },
        { name: "y", type: "linear", domain: scaleDomain(f.ylim, "y", ["lines", "points"]), range: "height", zero: false, nice: !f.ylim },
        { name: "layer", type: "ordinal", domain: labels, range: colors }],
      axes: [{ orient: "bottom", scale: "x", title: f.xlabel }, { orient: "left", scale: "y", title: f.ylabel, grid: true, gridOpacity: 0.35 }],
      legends: [{ stroke: "layer", orient: "top-left" }],
      marks: [
        { type: "symbol", name: "point", from: { data: "points" }, clip: true, encode: { enter: { x: { scale: "x", field: "x" }, y: { scale: "y", field: "y" },
          fill: { scale: "layer", field: "layer" }, opacity: { value: 0.6 }, size: { value: 24 }, shape: { field: "shape" },
          tooltip: { signal: "datum.layer + ': (' + format(datum.x, '.4~g') + ', ' + format(datum.y, '.4~g') + ')'" } } } },
        { type: "group", from: { facet: { name: "line", data: "lines", groupby: "layer" } }, clip: true,
          marks: [{ type: "line", name: "curve", from: { data: "line" }, sort: { field: "datum.order" },
            encode: { enter: { x: { scale: "x", field: "x" }, y: { scale: "y", field: "y" },
            stroke: { scale: "layer", field: "layer" }, strokeWidth: { value: 2 },
            strokeDash: { signal: "datum.dashed ? [6, 4] : [1, 0]" } } } }] }]
    };
  }
  function sequencesFigureSpec(f) {
    var pts = [], labels = [], colors = layerColors(f), outline = [];
    var lo = Infinity, hi = -Infinity;
    f.layers.forEach(function (l, li) {
      var name = l.label || ("layer " + li);
      labels.push(name);
      l.sequences.forEach(function (seq, i) {
        seq.forEach(function (p, k) {
          // A continued layer's first point is its source's last: its line starts there, unmarked.
          pts.push({ seq: i, title: f.panel_titles[i], layer: name, order: k, x: p[0], y: p[1],
            dashed: l.style === "dashed", line: l.style !== "points", mark: l.marker !== "none" && !(l.continues && k === 0),
            shape: l.marker === "cross" ? "cross" : "circle" });
          lo = Math.min(lo, p[0], p[1]); hi = Math.max(hi, p[0], p[1]);
        });
      });
    });
    f.outline.forEach(function (p, k) { outline.push({ order: k, x: p[0], y: p[1] }); lo = Math.min(lo, p[0], p[1]); hi = Math.max(hi, p[0], p[1]); });
    if (!(lo <= hi)) { lo = -1; hi = 1; }
    var pad = 0.1 * Math.max(hi - lo, 1e-6);
    var xd = f.xlim || [lo - pad, hi + pad], yd = f.ylim || [lo - pad, hi + pad];
    return {
      padding: 6, autosize: "pad", layout: { columns: 5, padding: 14, bounds: "full" },
      data: [{ name: "pts", values: pts }, { name: "outline", values: outline }],
      scales: [{ name: "layer", type: "ordinal", domain: labels, range: colors }],
      legends: [{ stroke: "layer", orient: "none", legendX: 0, legendY: -28, direction: "horizontal" }],
      marks: [{ type: "group", name: "sequence", from: { facet: { name: "seq", data: "pts", groupby: ["seq", "title"] } },
        sort: { field: "datum.seq" }, encode: { enter: { width: { value: 150 }, height: { value: 150 }, stroke: { value: "#ddd" } } },
        scales: [{ name: "x", type: "linear", domain: xd, range: [0, 150] },
          { name: "y", type: "linear", domain: yd, range: [150, 0] }],
        marks: [
          { type: "text", encode: { enter: { x: { value: 75 }, y: { value: -5 }, text: { signal: "parent.title" },
            align: { value: "center" }, fontSize: { value: 11 }, fontWeight: { value: "bold" } } } },
          { type: "line", from: { data: "outline" }, sort: { field: "datum.order" }, encode: { enter: { x: { scale: "x", field: "x" },
            y: { scale: "y", field: "y" }, stroke: { value: "#aaa" }, strokeDash: { value: [3, 3] } } } },
          { type: "group", from: { facet: { name: "line", data: "seq", groupby: "layer" } },
            marks: [{ type: "line", from: { data: "line" }, sort: { field: "datum.order" }, encode: { enter: { x: { scale: "x", field: "x" },
              y: { scale: "y", field: "y" }, stroke: { scale: "layer", field: "layer" }, strokeWidth: { value: 2 },
              strokeOpacity: { signal: "datum.line ? 1 : 0" },
              strokeDash: { signal: "datum.dashed ? [4, 3] : [1, 0]" } } } },
            { type: "symbol", from: { data: "line" }, encode: { enter: { x: { scale: "x", field: "x" }, y: { scale: "y", field: "y" },
              fill: { scale: "layer", field: "layer" }, size: { value: 28 }, opacity: { signal: "datum.mark ? 1 : 0" },
              shape: { field: "shape" },
              tooltip: { signal: "datum.layer + ' ' + datum.order + ': (' + format(datum.x, '.2f') + ', ' + format(datum.y, '.2f') + ')'" } } } }] }]
      }]
    };
  }
  function heatmapFigureSpec(f) {
    var cells = f.layers[0].cells, values = [], hi = 0;
    var rows = cells.map(function (_, r) { return f.row_labels.length ? r + ": " + f.row_labels[r] : String(r); });
    var cols = (cells[0] || []).map(function (_, c) { return f.column_labels.length ? c + ": " + f.column_labels[c] : String(c); });
    cells.forEach(function (row, r) {
      row.forEach(function (v, c) { values.push({ row: rows[r], col: cols[c], v: v }); if (v !== null) hi = Math.max(hi, v); });
    });
    var size = Math.max(4, Math.min(28, Math.round(360 / Math.max(rows.length, cols.length, 1))));
    return {
      width: size * cols.length, height: size * rows.length, padding: 6, autosize: "pad",
      title: { text: f.title, fontSize: 13, anchor: "start" },
      data: [{ name: "cells", values: values }],
      scales: [{ name: "x", type: "band", domain: cols, range: "width" }, { name: "y", type: "band", domain: rows, range: "height" },
        { name: "c", type: "linear", domain: [0, hi > 0 ? hi : 1], range: { scheme: "reds" } }],
      axes: [{ orient: "bottom", scale: "x", title: f.xlabel, labelAngle: -90, labelAlign: "right", labelBaseline: "middle",
          encode: { labels: { update: { text: { signal: "split(datum.value, ': ')[1] || datum.value" } } } } },
        { orient: "left", scale: "y", title: f.ylabel, encode: { labels: { update: { text: { signal: "split(datum.value, ': ')[1] || datum.value" } } } } }],
      legends: [{ fill: "c", type: "gradient", title: "" }],
      marks: [{ type: "rect", name: "cell", from: { data: "cells" }, encode: { enter: { x: { scale: "x", field: "col" }, width: { scale: "x", band: 1 },
        y: { scale: "y", field: "row" }, height: { scale: "y", band: 1 },
        fill: { signal: "datum.v === null ? '#ccccd9' : scale('c', datum.v)" },
        tooltip: { signal: "datum.row + ' \u00d7 ' + datum.col + ': ' + (datum.v === null ? 'no value' : format(datum.v, '.4~g'))" } } } }]
    };
  }
  function figure(s, f) {
    var r = data.runs[f.run];
    s.appendChild(el("h3", {}, [swatch(f.run), f.title + " (" + f.name + ") of " + r.id + " " + r.label]));
    var about = "Declared by " + f.declared_by + ".";
    if (f.note) about += " Shown: " + f.note + ".";
    s.appendChild(el("p", { className: "muted", text: about }));
    if (f.kind === "table") {
      var numeric = f.layers.map(function (l) { return l.column.every(function (v) { return v === "" || !isNaN(Number(v)); }); });
      var rows = (f.layers[0] ? f.layers[0].column : []).map(function (_, k) { return f.layers.map(function (l) { return l.column[k]; }); });
      s.appendChild(dataTable({ id: "figure-" + r.id + "-" + f.name, header: f.layers.map(function (l) { return l.label; }), numeric: numeric, rows: rows }));
      return;
    }
    var div = el("div", { className: "chart figure figure-" + f.kind, "data-run": r.id, "data-figure": f.name });
    s.appendChild(div);
    render(div, f.kind === "curve" ? curveFigureSpec(f) : f.kind === "sequences" ? sequencesFigureSpec(f) : heatmapFigureSpec(f));
  }
  function outputs() {
    var s = section("predictions", "Translations, generated text & figures");  // the id of its first links
    var any = false;
    data.translations.forEach(function (t) {
      any = true;
      var r = data.runs[t.run];
      s.appendChild(el("h3", {}, [swatch(t.run), "Translations of " + r.id + " " + r.label + " (sentence BLEU)"]));
      s.appendChild(dataTable({ id: "translations-" + r.id, header: ["source", "reference", "hypothesis", "BLEU"],
        numeric: [false, false, false, true],
        rows: t.rows.map(function (x) { return [x.source, x.reference, x.hypothesis, x.bleu === null ? "-" : x.bleu.toFixed(3)]; }) }));
    });
    data.runs.forEach(function (r, i) {  // a language model's generations: the prompt in bold, then its continuation
      var mine = data.generations.filter(function (g) { return g.run === i; });
      if (!mine.length) return;
      any = true;
      s.appendChild(el("h3", {}, [swatch(i), "Text generated by " + r.id + " " + r.label]));
      mine.forEach(function (g) {
        s.appendChild(el("div", { className: "generation", "data-run": r.id, "data-name": g.name }, [
          el("div", { className: "muted", text: g.name + ": " + g.how }),
          el("pre", { className: "generated" }, [el("b", { text: g.prompt }), g.continuation])]));
      });
    });
    data.figures.forEach(function (f) { any = true; figure(s, f); });
    data.figure_problems.forEach(function (p) {
      any = true;
      s.appendChild(el("p", { className: "problem" }, [swatch(p.run), "A declared figure could not be drawn: " + p.text]));
    });
    if (!any) s.appendChild(el("p", { className: "muted", text: "No translations, generated text or figures stored." }));
  }

  // ---- parts drawn by other scripts (heads.js: runner ablate, prune, heads and rollout --write) --
  var lib = { data: data, el: el, section: section, swatch: swatch, render: render, finalize: finalize,
    palette: palette, tokenLabels: tokenLabels, heatmapFigureSpec: heatmapFigureSpec };
  function part(name) {
    var parts = window.attnlabReportParts || {};
    if (parts[name]) parts[name](lib);
  }

  header();
  curves();
  tables();
  part("heads");
  part("headScores");
  explorer();
  part("rollout");
  outputs();
  Promise.all(pending).then(function () {
    report.ready = true;
    document.body.setAttribute("data-ready", "1");
    // The sections exist only now: follow a #section in the address (a link to a part of the page).
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) target.scrollIntoView();
  }, function (e) {
    document.body.setAttribute("data-ready", "error");
    throw e;
  });
})();
