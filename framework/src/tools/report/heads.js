// runner report's page, the parts of runs that runner ablate, runner prune, runner heads (and the
// lm trainer's head_scores_every) and runner rollout --write added to: the ablation grids, the
// pruning curves, the head-score grids and curves, and the rollout maps (docs/REPORT.md). This
// script runs before page.js, which calls parts.heads, parts.headScores and parts.rollout with its
// helpers (lib) in their place in the page. Text from the results files only enters as text nodes or Vega data.
(function () {
  "use strict";
  var parts = (window.attnlabReportParts = window.attnlabReportParts || {});
  var data, el, section, swatch, render, finalize, palette, tokenLabels, heatmapFigureSpec;
  function use(lib) {
    data = lib.data; el = lib.el; section = lib.section; swatch = lib.swatch; render = lib.render;
    finalize = lib.finalize; palette = lib.palette; tokenLabels = lib.tokenLabels; heatmapFigureSpec = lib.heatmapFigureSpec;
  }

  // ---- heads: runner ablate's head grids, runner prune's curves --------------------------------
  var headColumns = { delta_loss: "\u0394loss", delta_bleu: "\u0394BLEU", importance_normalized: "importance (normalised)",
    loss: "loss", bleu: "BLEU", importance: "importance" };
  var tipColumns = ["delta_loss", "delta_bleu", "importance_normalized"];
  function signed(v, digits) { return (v >= 0 ? "+" : "") + v.toFixed(digits); }
  function headValue(c, v) {
    if (v === null) return "-";
    return c === "delta_loss" ? signed(v, 4) : c === "delta_bleu" ? signed(v, 2) : v.toFixed(c === "bleu" ? 2 : 4);
  }
  // "decoder_cross layer 2 head 3: Δloss +0.0123, ΔBLEU -0.41", or "...: off in training".
  function headTip(a, row) {
    var name = a.module[row] + " layer " + a.layer[row] + " head " + a.head[row];
    var shown = tipColumns.filter(function (c) { return a.columns[c]; });
    if (!shown.length) shown = Object.keys(a.columns);
    var off = shown.every(function (c) { return a.columns[c][row] === null; });
    if (off) return name + ": off in training";
    return name + ": " + shown.map(function (c) { return headColumns[c] + " " + headValue(c, a.columns[c][row]); }).join(", ");
  }
  function numbers(list) { return list.slice().sort(function (x, y) { return x - y; }); }
  // One module's layers x heads grid of one column: diverging colours for the deltas (red: the
  // removal hurts), reds for the rest, one scale for every module of the ablation; grey cells:
  // the head was off in training.
  function headGridSpec(a, module, column) {
    var cells = [], layers = [], heads = [], top = 0;
    a.columns[column].forEach(function (v) { if (v !== null) top = Math.max(top, Math.abs(v)); });
    a.module.forEach(function (m, row) {
      if (m !== module) return;
      var v = a.columns[column][row];
      if (layers.indexOf(a.layer[row]) < 0) layers.push(a.layer[row]);
      if (heads.indexOf(a.head[row]) < 0) heads.push(a.head[row]);
      cells.push({ layer: String(a.layer[row]), head: String(a.head[row]), v: v, tip: headTip(a, row),
        text: v === null ? "off" : headValue(column, v) });
    });
    layers = numbers(layers).map(String);
    heads = numbers(heads).map(String);
    var size = Math.max(14, Math.min(44, Math.round(340 / Math.max(heads.length, layers.length, 1))));
    var delta = column.indexOf("delta_") === 0;
    top = top > 0 ? top : 1;
    var colour = delta ? { name: "c", type: "linear", domain: [-top, top], range: { scheme: "redblue" }, reverse: column === "delta_loss" }
      : { name: "c", type: "linear", domain: [0, top], range: { scheme: "reds" } };
    return {
      width: size * heads.length, height: size * layers.length, padding: 6, autosize: "pad",
      title: { text: module.replace(/_/g, " "), fontSize: 13, anchor: "start" },
      data: [{ name: "cells", values: cells }],
      scales: [{ name: "x", type: "band", domain: heads, range: "width" }, { name: "y", type: "band", domain: layers, range: "height" }, colour],
      axes: [{ orient: "top", scale: "x", title: "head" }, { orient: "left", scale: "y", title: "layer" }],
      legends: [{ fill: "c", type: "gradient", title: headColumns[column], titleFontSize: 10,
        gradientLength: Math.max(60, size * layers.length), tickCount: 3 }],
      marks: [
        { type: "rect", name: "hcell", from: { data: "cells" }, encode: { enter: {
          x: { scale: "x", field: "head" }, width: { scale: "x", band: 1 }, y: { scale: "y", field: "layer" }, height: { scale: "y", band: 1 },
          stroke: { value: "#fff" }, strokeWidth: { value: 0.5 },
          fill: { signal: "datum.v === null ? '#ccccd9' : scale('c', datum.v)" }, tooltip: { field: "tip" } } } },
        { type: "text", name: "hval", from: { data: "cells" }, interactive: false, encode: { enter: {
          x: { scale: "x", field: "head", band: 0.5 }, y: { scale: "y", field: "layer", band: 0.5 },
          align: { value: "center" }, baseline: { value: "middle" }, fontSize: { value: Math.min(10, size / 4.2) },
          fill: { signal: "datum.v !== null && abs(datum.v) > " + (0.6 * top) + " ? '#fff' : '#222'" },
          text: { signal: size >= 24 ? "datum.text" : "''" } } } }]
    };
  }
  function ablationBlock(s, a) {
    var r = data.runs[a.run];
    s.appendChild(el("h3", {}, [swatch(a.run), "Head importance of " + r.id + " " + r.label + ": ablation '" + a.name + "'"]));
    var about = "Split " + a.split + ", " + a.checkpoint + " checkpoint, method " + a.method;
    if (a.base_loss !== null) about += "; full model: loss " + a.base_loss.toFixed(4);
    if (a.base_bleu !== null) about += ", BLEU " + a.base_bleu.toFixed(2);
    about += ". \u0394 = with the head off alone \u2212 the full model; grey: off in training";
    if (a.trained_head_mask) about += " (" + a.trained_head_mask + ")";
    s.appendChild(el("p", { className: "muted", text: about + "." }));
    var cols = Object.keys(headColumns).filter(function (c) { return a.columns[c]; });
    var pick = el("select", { className: "head-quantity" });
    cols.forEach(function (c) { pick.appendChild(el("option", { value: c, text: headColumns[c] })); });
    s.appendChild(el("div", { className: "controls" }, [el("label", {}, ["show: ", pick])]));
    var grids = el("div", { className: "charts head-grids", "data-run": r.id, "data-ablation": a.name });
    s.appendChild(grids);
    var views = [];
    function draw() {
      views.forEach(finalize);
      views = [];
      grids.textContent = "";
      grids.setAttribute("data-column", pick.value);
      a.modules.forEach(function (m) {
        var div = el("div", { className: "chart head-grid", "data-module": m });
        grids.appendChild(div);
        views.push(render(div, headGridSpec(a, m, pick.value)));
      });
    }
    pick.addEventListener("change", draw);
    if (cols.length) draw();
  }
  // One split's pruning curves of one run: the mean over the repeats, a min-max band where there
  // are several (random order), the full model's value as a dashed rule.
  function pruningSpec(curves) {
    var metric = curves[0].metric, label = metric === "bleu" ? "BLEU" : "loss", pts = [], base = null;
    curves.forEach(function (c) {
      var order = c.order + (c.reestimate ? " (re-estimated)" : "") + (c.repeats > 1 ? " \u00d7" + c.repeats : "");
      var b = metric === "bleu" ? c.base_bleu : c.base_loss;
      if (b !== null && base === null) base = b;
      c.fraction.forEach(function (f, k) {
        if (c.mean[k] === null) return;
        var tip = order + ": " + (100 * f).toFixed(1) + "% of heads off (" + c.heads_off[k] + " of " + c.heads_total + "): " +
          label + " " + c.mean[k].toFixed(metric === "bleu" ? 2 : 4);
        if (c.repeats > 1) tip += " (min " + c.lo[k].toFixed(2) + ", max " + c.hi[k].toFixed(2) + ")";
        pts.push({ order: order, x: 100 * f, y: c.mean[k], lo: c.lo[k], hi: c.hi[k], band: c.repeats > 1, tip: tip });
      });
    });
    var orders = [];
    pts.forEach(function (p) { if (orders.indexOf(p.order) < 0) orders.push(p.order); });
    return {
      width: 420, height: 220, padding: 6, autosize: "pad",
      title: { text: label + " vs heads removed", fontSize: 13, anchor: "start" },
      data: [{ name: "pts", values: pts }, { name: "bands", source: "pts", transform: [{ type: "filter", expr: "datum.band" }] },
        { name: "base", values: base === null ? [] : [{ y: base }] }],
      scales: [
        { name: "x", type: "linear", domain: [0, 100], range: "width" },
        { name: "y", type: "linear", domain: { fields: [{ data: "pts", field: "lo" }, { data: "pts", field: "hi" }, { data: "pts", field: "y" }, { data: "base", field: "y" }] },
          range: "height", zero: false, nice: true },
        { name: "color", type: "ordinal", domain: orders, range: palette }],
      axes: [{ orient: "bottom", scale: "x", title: "heads removed (%)" }, { orient: "left", scale: "y", title: label, grid: true, gridOpacity: 0.35 }],
      legends: [{ stroke: "color", title: "order", symbolType: "stroke" }],
      marks: [
        { type: "rule", name: "pbase", from: { data: "base" }, encode: { enter: { x: { value: 0 }, x2: { signal: "width" },
          y: { scale: "y", field: "y" }, stroke: { value: "#777" }, strokeDash: { value: [4, 3] } } } },
        { type: "group", from: { facet: { name: "oneband", data: "bands", groupby: ["order"] } },
          marks: [{ type: "area", name: "pband", from: { data: "oneband" }, encode: { enter: { x: { scale: "x", field: "x" },
            y: { scale: "y", field: "lo" }, y2: { scale: "y", field: "hi" }, fill: { scale: "color", field: "order" }, fillOpacity: { value: 0.2 } } } }] },
        { type: "group", from: { facet: { name: "one", data: "pts", groupby: ["order"] } },
          marks: [{ type: "line", name: "pline", from: { data: "one" }, encode: { enter: { x: { scale: "x", field: "x" },
            y: { scale: "y", field: "y" }, stroke: { scale: "color", field: "order" }, strokeWidth: { value: 2 } } } }] },
        { type: "symbol", name: "ppt", from: { data: "pts" }, encode: { enter: { x: { scale: "x", field: "x" }, y: { scale: "y", field: "y" },
          fill: { scale: "color", field: "order" }, size: { value: 22 }, tooltip: { field: "tip" } } } }]
    };
  }
  function pruningBlock(s, curves) {
    var r = data.runs[curves[0].run];
    s.appendChild(el("h3", {}, [swatch(curves[0].run), "Pruning of " + r.id + " " + r.label + " on " + curves[0].split + ": " +
      curves.map(function (c) { return "'" + c.name + "'"; }).join(", ")]));
    var notes = curves.map(function (c) {
      return c.name + ": " + c.order + " order" + (c.repeats > 1 ? ", " + c.repeats + " repeats (band: min to max)" : "") +
        (c.within !== null ? "; up to " + (100 * c.within).toFixed(1) + "% of heads off within 0.5 BLEU of the full model" : "");
    });
    s.appendChild(el("p", { className: "muted", text: notes.join(". ") + ". Dashed: the full model." }));
    var div = el("div", { className: "chart pruning-curve", "data-run": r.id, "data-split": curves[0].split });
    s.appendChild(div);
    render(div, pruningSpec(curves));
  }
  parts.heads = function (lib) {
    use(lib);
    if (!data.ablations.length && !data.pruning.length) return;
    var s = section("heads", "Heads: ablation and pruning");
    data.ablations.forEach(function (a) { ablationBlock(s, a); });
    var groups = [];  // one chart per run and split: importance and random order together
    data.pruning.forEach(function (c) {
      var g = groups.filter(function (x) { return x[0].run === c.run && x[0].split === c.split; })[0];
      if (g) g.push(c); else groups.push([c]);
    });
    groups.forEach(function (g) { pruningBlock(s, g); });
  };

  // ---- head scores: runner heads, trainer.head_scores_every --------------------------------------
  var scoreKinds = ["induction", "previous_token", "duplicate_token", "first_token_mass", "val_first_token_mass"];
  var scoreNames = { induction: "induction", previous_token: "previous-token", duplicate_token: "duplicate-token",
    first_token_mass: "first-token mass", val_first_token_mass: "first-token mass (val rows)" };
  function kindsOf(g) { return scoreKinds.filter(function (k) { return g.scores[k]; }); }
  function scoreText(v) { return v === null ? "off" : v.toFixed(3); }
  // One kind's layers x heads grid of one measurement, on the fixed scale 0..1 (scores are shares
  // of attention), so that grids of runs and steps compare by colour.
  function scoreGridSpec(g, kind) {
    var cells = [], layers = [], heads = [];
    for (var l = 0; l < g.layers; ++l) layers.push(String(l + 1));
    for (var h = 0; h < g.heads; ++h) heads.push(String(h + 1));
    g.scores[kind].forEach(function (v, i) {
      var l = Math.floor(i / g.heads) + 1, h = i % g.heads + 1;
      cells.push({ layer: String(l), head: String(h), v: v, text: scoreText(v),
        tip: "layer " + l + " head " + h + ": " + scoreNames[kind] + " " + (v === null ? "(off in training)" : v.toFixed(4)) });
    });
    var size = Math.max(14, Math.min(40, Math.round(260 / Math.max(g.heads, g.layers, 1))));
    return {
      width: size * g.heads, height: size * g.layers, padding: 6, autosize: "pad",
      title: { text: scoreNames[kind], fontSize: 13, anchor: "start" },
      data: [{ name: "cells", values: cells }],
      scales: [{ name: "x", type: "band", domain: heads, range: "width" }, { name: "y", type: "band", domain: layers, range: "height" },
        { name: "c", type: "linear", domain: [0, 1], range: { scheme: "blues" } }],
      axes: [{ orient: "top", scale: "x", title: "head" }, { orient: "left", scale: "y", title: "layer" }],
      legends: [{ fill: "c", type: "gradient", titleFontSize: 10, gradientLength: Math.max(60, size * g.layers), tickCount: 3 }],
      marks: [
        { type: "rect", name: "scell", from: { data: "cells" }, encode: { enter: {
          x: { scale: "x", field: "head" }, width: { scale: "x", band: 1 }, y: { scale: "y", field: "layer" }, height: { scale: "y", band: 1 },
          stroke: { value: "#fff" }, strokeWidth: { value: 0.5 },
          fill: { signal: "datum.v === null ? '#ccccd9' : scale('c', datum.v)" }, tooltip: { field: "tip" } } } },
        { type: "text", name: "sval", from: { data: "cells" }, interactive: false, encode: { enter: {
          x: { scale: "x", field: "head", band: 0.5 }, y: { scale: "y", field: "layer", band: 0.5 },
          align: { value: "center" }, baseline: { value: "middle" }, fontSize: { value: Math.min(10, size / 4.2) },
          fill: { signal: "datum.v !== null && datum.v > 0.6 ? '#fff' : '#222'" },
          text: { signal: size >= 24 ? "datum.text" : "''" } } } }]
    };
  }
  // Every head's score of one kind against the optimizer step, a line per head.
  function scoreCurveSpec(points, kind) {
    var pts = [], names = [];
    points.forEach(function (g) {
      g.scores[kind].forEach(function (v, i) {
        if (v === null) return;
        var name = "L" + (Math.floor(i / g.heads) + 1) + " H" + (i % g.heads + 1);
        if (names.indexOf(name) < 0) names.push(name);
        pts.push({ step: g.step, head: name, v: v, tip: name + " after step " + g.step + ": " + scoreNames[kind] + " " + v.toFixed(4) });
      });
    });
    return {
      width: 460, height: 220, padding: 6, autosize: "pad",
      title: { text: scoreNames[kind] + " score over training", fontSize: 13, anchor: "start" },
      data: [{ name: "pts", values: pts }],
      scales: [{ name: "x", type: "linear", domain: { data: "pts", field: "step" }, range: "width", zero: false },
        { name: "y", type: "linear", domain: [0, 1], range: "height" },
        { name: "color", type: "ordinal", domain: names, range: palette }],
      axes: [{ orient: "bottom", scale: "x", title: "step" }, { orient: "left", scale: "y", title: scoreNames[kind], grid: true, gridOpacity: 0.35 }],
      legends: names.length <= 24 ? [{ stroke: "color", title: "head", symbolType: "stroke" }] : [],
      marks: [
        { type: "group", from: { facet: { name: "one", data: "pts", groupby: ["head"] } },
          marks: [{ type: "line", name: "sline", from: { data: "one" }, encode: { enter: { x: { scale: "x", field: "step" },
            y: { scale: "y", field: "v" }, stroke: { scale: "color", field: "head" }, strokeWidth: { value: 1.6 } } } }] },
        { type: "symbol", name: "spt", from: { data: "pts" }, encode: { enter: { x: { scale: "x", field: "step" }, y: { scale: "y", field: "v" },
          fill: { scale: "color", field: "head" }, size: { value: 14 }, tooltip: { field: "tip" } } } }]
    };
  }
  function scoreAbout(g) {
    var about = g.module + ", " + g.sequences + " sequences of " + g.length + " random tokens repeated once";
    if (g.token_range) about += ", " + g.token_range;
    if (g.checkpoint) about += ", " + g.checkpoint + " checkpoint";
    return about;
  }
  function scoreGrids(s, g, r) {
    var charts = el("div", { className: "charts score-grids", "data-run": r.id, "data-name": g.name });
    s.appendChild(charts);
    kindsOf(g).forEach(function (k) {
      var div = el("div", { className: "chart score-grid", "data-kind": k });
      charts.appendChild(div);
      render(div, scoreGridSpec(g, k));
    });
  }
  function trainingBlock(s, points) {
    var r = data.runs[points[0].run], last = points[points.length - 1];
    s.appendChild(el("h3", {}, [swatch(points[0].run), "Heads of " + r.id + " " + r.label + " over training"]));
    s.appendChild(el("p", { className: "muted", text: "trainer.head_scores_every: " + points.length + " measurements from step " +
      points[0].step + " to " + last.step + "; " + scoreAbout(last) + ". The grids: after step " + last.step + "." }));
    var kinds = kindsOf(last), pick = el("select", { className: "score-kind" });
    kinds.forEach(function (k) { pick.appendChild(el("option", { value: k, text: scoreNames[k] })); });
    s.appendChild(el("div", { className: "controls" }, [el("label", {}, ["show: ", pick])]));
    var div = el("div", { className: "chart score-curve", "data-run": r.id });
    s.appendChild(div);
    var view = null;
    function draw() {
      if (view) finalize(view);
      div.textContent = "";
      div.setAttribute("data-kind", pick.value);
      view = render(div, scoreCurveSpec(points, pick.value));
    }
    pick.addEventListener("change", draw);
    if (kinds.length) draw();
    scoreGrids(s, last, r);
  }
  parts.headScores = function (lib) {
    use(lib);
    if (!data.head_scores.length) return;
    var s = section("head-scores", "Head scores");
    s.appendChild(el("p", { className: "muted", text: "How much of each head's attention falls where a previous-token, " +
      "duplicate-token or induction head would put it, on random tokens repeated once (TransformerLens's head_detector, " +
      "\"mul\": a perfect induction head scores 0.5, a perfect previous-token head nearly 1), and its mean attention on the " +
      "first token (an attention sink). Scale 0 to 1; grey: off in training." }));
    data.runs.forEach(function (r, i) {
      var mine = data.head_scores.filter(function (g) { return g.run === i; });
      mine.filter(function (g) { return g.step === null; }).forEach(function (g) {
        s.appendChild(el("h3", {}, [swatch(i), "Head scores of " + r.id + " " + r.label + ": '" + g.name + "'"]));
        s.appendChild(el("p", { className: "muted", text: "runner heads: " + scoreAbout(g) + "." }));
        scoreGrids(s, g, r);
      });
      var points = mine.filter(function (g) { return g.step !== null; });
      if (points.length) trainingBlock(s, points);
    });
  };

  // ---- rollout: runner rollout --write ---------------------------------------------------------
  parts.rollout = function (lib) {
    use(lib);
    if (!data.rollout.length) return;
    var s = section("rollout", "Attention rollout and flow");
    s.appendChild(el("p", { className: "muted", text: "What runner rollout --write stored: each map is [queries, keys], rows summing to 1." }));
    data.rollout.forEach(function (x) {
      var r = data.runs[x.run];
      s.appendChild(el("h3", {}, [swatch(x.run), r.id + " " + r.label + ": ", el("span", { className: "sample-text", text: x.text })]));
      var charts = el("div", { className: "charts" });
      s.appendChild(charts);
      x.results.forEach(function (m) {
        var cells = [];
        for (var q = 0; q < m.queries; ++q) {
          var row = [];
          for (var k = 0; k < m.keys; ++k) row.push(m.w[q * m.keys + k] / data.attention.scale);
          cells.push(row);
        }
        var f = { title: m.name.replace(/_/g, " "), xlabel: "keys", ylabel: "queries",
          row_labels: tokenLabels(m.query_tokens, m.queries), column_labels: tokenLabels(m.key_tokens, m.keys), layers: [{ cells: cells }] };
        var div = el("div", { className: "chart rollout-map", "data-run": r.id, "data-result": m.name, title: m.definition });
        charts.appendChild(div);
        render(div, heatmapFigureSpec(f));
      });
    });
  };
})();
