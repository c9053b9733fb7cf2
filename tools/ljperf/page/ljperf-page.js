/* ljperf flame graph page: draws the profile inlined in #ljperf-data (see
** build_tree in ljperf.py: {n: name, v: weight incl. children, k: kind,
** c: children}) with d3-flame-graph, coloured by frame kind.
**
** Palette (hue, saturation, lightness range; each name gets a stable shade
** inside its kind's range so neighbours stay distinguishable):
**   lua      green    Lua functions run by the interpreter
**   trace    aqua     Lua code running as a compiled JIT trace (_[j])
**   builtin  yellow   LuaJIT library functions (string.byte, ffi.meta___call)
**   vm       purple   LuaJIT itself: interpreter (--keep-vm), runtime, C API
**   c        red      the host program and its libraries
**   kernel   orange   kernel frames
**   root     grey     "all" and the process (comm) frames
**   unknown  light grey  addresses nothing names
**   search matches: magenta
**
** Units (data.unit): "ns" (clock events), "bytes" (memory profiles: B,
** KiB, MiB..., named data.weightName: "alloc space", "in-use space"), ""
** (a count of samples of data.event).
**
** Diff mode (`ljperf diff`, data.mode "diff", see ljperf/diff.py):
** each node also has a (BEFORE's weight) and b (AFTER's), v is the mean of
** the two shares; frames are red where the share grew, blue where it
** shrank (deeper linearly with |change| / data.maxDelta, so noise stays
** pale), grey when unchanged.
*/
(function () {
  "use strict";

  var PALETTE = {
    lua:     { label: "Lua function",  h: 112, s: 52, l0: 52, l1: 68, dh: 14 },
    trace:   { label: "JIT trace",     h: 182, s: 62, l0: 48, l1: 64, dh: 10 },
    builtin: { label: "builtin",       h: 52,  s: 86, l0: 54, l1: 66, dh: 8 },
    vm:      { label: "VM / runtime",  h: 270, s: 48, l0: 70, l1: 82, dh: 12 },
    c:       { label: "C",             h: 6,   s: 78, l0: 60, l1: 71, dh: 12 },
    kernel:  { label: "kernel",        h: 32,  s: 92, l0: 55, l1: 65, dh: 6 },
    root:    { label: "process / all", h: 0,   s: 0,  l0: 72, l1: 78, dh: 0 },
    unknown: { label: "[unknown]",     h: 0,   s: 0,  l0: 86, l1: 88, dh: 0 }
  };
  var ORDER = ["lua", "trace", "builtin", "vm", "c", "kernel", "root", "unknown"];
  var HIGHLIGHT = "#e600e6";
  var GROWN = 0, SHRUNK = 220;           /* hues of the diff colours */

  var data = JSON.parse(document.getElementById("ljperf-data").textContent);
  var total = data.total || 1;
  var diff = data.mode === "diff";
  var fg = window.flamegraph;
  var make = fg && (typeof fg === "function" ? fg : fg["default"]);
  var chartEl = document.getElementById("chart");
  var detailsEl = document.getElementById("details");
  var zoomEl = document.getElementById("zoom");
  var searchEl = document.getElementById("search");
  var searchText = "";
  var zoomed = null;

  function hash(s, seed) {             /* FNV-1a -> [0, 1) */
    var h = 2166136261 ^ seed;
    for (var i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return (h >>> 0) / 4294967296;
  }

  function colour(kind, name) {
    var p = PALETTE[kind] || PALETTE.c;
    var h = p.h + (hash(name, 7) - 0.5) * p.dh;
    var l = p.l0 + hash(name, 0) * (p.l1 - p.l0);
    return "hsl(" + h.toFixed(1) + "," + p.s + "%," + l.toFixed(1) + "%)";
  }

  /* Diff mode: the change of a node (share points, or weight with
  ** --absolute) and its colour. */
  function delta(n) {
    if (data.absolute) return n.b - n.a;
    return n.b / (data.after.total || 1) - n.a / (data.before.total || 1);
  }

  function diffColour(n) {
    var d = delta(n), m = data.maxDelta || 1;
    if (!d || n.k === "root") return "hsl(0,0%,86%)";
    var x = Math.min(1, Math.abs(d) / m);    /* linear: noise stays pale */
    return "hsl(" + (d > 0 ? GROWN : SHRUNK) + "," + (60 + 30 * x).toFixed(0) + "%," +
      (92 - 42 * x).toFixed(1) + "%)";
  }

  function pct(v, of) {
    if (!v) return "0%";
    var p = 100 * v / (of || 1);
    return (p >= 10 ? p.toFixed(1) : p >= 0.1 ? p.toFixed(2) : p.toFixed(3)) + "%";
  }

  function si(v) {
    var units = ["", "k", "M", "G", "T"], i = 0;
    while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return (i ? v.toFixed(v >= 100 ? 0 : 1) : String(Math.round(v))) + units[i];
  }

  function bytes(v) {                  /* binary prefixes, as allocators count */
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(Math.abs(v) >= 100 ? 0 : 1) : String(Math.round(v))) + " " + units[i];
  }

  function amount(v) {
    if (data.unit === "bytes")           /* memory: "1.5 MiB alloc space" */
      return bytes(v) + (data.weightName ? " " + data.weightName : "");
    if (data.unit === "ns") {
      var ms = v / 1e6;
      return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" :
             ms >= 10 ? ms.toFixed(0) + " ms" : ms.toFixed(2) + " ms";
    }
    return si(v) + " " + (data.event ? data.event.split(":")[0] : data.weightName || "samples");
  }

  function selfValue(node) {
    var s = node.v, c = node.c || [];
    for (var i = 0; i < c.length; i++) s -= c[i].v;
    return s;
  }

  function kindLabel(k) { return (PALETTE[k] || PALETTE.c).label; }

  function signedDelta(n) {
    var d = delta(n);
    var s = data.absolute ? amount(Math.abs(d)) : (100 * Math.abs(d)).toFixed(2) + " pp";
    return (d > 0 ? "+" : d < 0 ? "\u2212" : "\u00b1") + s;
  }

  function describeDiff(d, long) {
    var n = d.data, only = !n.a ? " (only after)" : !n.b ? " (only before)" : "";
    var before = pct(n.a, data.before.total) + " (" + amount(n.a) + ")";
    var after = pct(n.b, data.after.total) + " (" + amount(n.b) + ")";
    var change = "change " + signedDelta(n);
    if (!long) return n.n + "  \u2014  " + before + " \u2192 " + after + ", " + change + only;
    return [n.n, kindLabel(n.k), "before " + before, "after  " + after,
            change + (data.absolute ? "" : data.unit === "bytes" ? " of all bytes" :
                      " of all samples") + only].join("\n");
  }

  /* Tooltip (long) and the details line (short) of a frame. */
  function describe(d, long) {
    if (diff) return describeDiff(d, long);
    var n = d.data, lines = [];
    var head = kindLabel(n.k) + " \u00b7 " + pct(n.v, total) + " of all (" + amount(n.v) + ")";
    if (!long) return n.n + "  \u2014  " + head + ", self " + pct(selfValue(n), total);
    lines.push(n.n);
    lines.push(head);
    lines.push("self " + pct(selfValue(n), total) + " (" + amount(selfValue(n)) + ")");
    if (zoomed && zoomed.depth > 0 && zoomed !== d && d.depth > zoomed.depth)
      lines.push(pct(n.v, zoomed.data.v) + " of " + zoomed.data.n);
    else if (d.parent && d.depth > 1)
      lines.push(pct(n.v, d.parent.data.v) + " of its caller " + d.parent.data.n);
    return lines.join("\n");
  }

  /* The chart's tooltip interface: tip(selection), tip.show(event, d),
  ** tip.hide(), tip.destroy(). Ours measures itself once shown, so it stays
  ** inside the window at the right and bottom edges. */
  function makeTooltip() {
    var el = null;
    function tip() {
      if (el) return;
      el = document.createElement("div");
      el.className = "d3-flame-graph-tip ljperf-tip";
      el.setAttribute("role", "tooltip");
      el.style.display = "none";
      document.body.appendChild(el);
    }
    tip.show = function (event, d) {
      tip();
      el.textContent = describe(d, true);
      el.style.left = "0px";
      el.style.top = "0px";
      el.style.display = "block";
      var w = el.offsetWidth, h = el.offsetHeight;
      var sx = window.scrollX, sy = window.scrollY;
      var right = sx + document.documentElement.clientWidth - 4;
      var bottom = sy + document.documentElement.clientHeight - 4;
      var x = event.pageX + 12, y = event.pageY + 14;
      if (x + w > right) x = Math.max(sx + 4, event.pageX - w - 12);
      if (y + h > bottom) y = Math.max(sy + 4, event.pageY - h - 14);
      el.style.left = x + "px";
      el.style.top = y + "px";
      return tip;
    };
    tip.hide = function () {
      if (el) el.style.display = "none";
      return tip;
    };
    tip.destroy = function () {
      if (el) el.parentNode.removeChild(el);
      el = null;
    };
    return tip;
  }

  function widthNow() {
    return Math.max(480, chartEl.clientWidth - 28);
  }

  function setDetails(text) {
    detailsEl.textContent = text || searchText || "\u00a0";
  }

  function showZoom(d) {
    zoomed = d && d.depth > 0 ? d : null;
    document.body.setAttribute("data-zoom", zoomed ? zoomed.data.n : "");
    if (!zoomed) {
      zoomEl.textContent = "Click a frame to zoom in.";
      return;
    }
    var path = [], p = zoomed;
    while (p) { path.unshift(p.data.n); p = p.parent; }
    zoomEl.textContent = "Zoomed into " + zoomed.data.n + " (" + pct(zoomed.data.v, total) +
      " of all): " + path.join(" \u203a ") + ".  Click a frame below it or Reset zoom to go back.";
  }

  function header() {
    document.getElementById("title").textContent = "ljperf: " + (data.title || "profile");
    var m = [];
    if (data.event) m.push(data.event);
    if (data.frequency) m.push(data.frequency + " Hz");
    if (data.recorded) m.push("recorded " + data.recorded);
    if (diff) {
      m.push("before " + amount(data.before.total) + ", after " + amount(data.after.total));
      m.push(data.absolute ? "raw weights" : "shares of each profile's total");
    } else {
      m.push("total " + amount(total));
    }
    document.getElementById("meta").textContent = m.join(" \u00b7 ");
    if (diff) return diffLegend();
    var present = {};
    (function walk(n) {                    /* kinds present in the tree */
      var stack = [n];
      while (stack.length) {
        var x = stack.pop();
        present[x.k] = true;
        if (x.c) for (var i = 0; i < x.c.length; i++) stack.push(x.c[i]);
      }
    })(data.tree);
    var legend = document.getElementById("legend");
    var cap = document.createElement("li");
    cap.className = "caption";
    cap.textContent = data.unit === "bytes" ? "Self space by kind:" : "Self time by kind:";
    legend.appendChild(cap);
    ORDER.forEach(function (k) {
      if (!present[k]) return;
      var li = document.createElement("li");
      li.setAttribute("data-kind", k);
      var sw = document.createElement("span");
      sw.className = "sw";
      sw.style.background = colour(k, k);
      li.appendChild(sw);
      li.appendChild(document.createTextNode(PALETTE[k].label));
      var self = (data.kindSelf || {})[k] || 0;
      if (self > 0 || k !== "root") {
        var s = document.createElement("span");
        s.className = "pct";
        s.textContent = pct(self, total);
        s.title = data.unit === "bytes" ?
          "share of the bytes allocated where the innermost frame is of this kind" :
          "share of the samples whose innermost frame is of this kind";
        li.appendChild(s);
      }
      legend.appendChild(li);
    });
  }

  function diffLegend() {
    var legend = document.getElementById("legend");
    [["grown", "share grew", GROWN], ["shrunk", "share shrank", SHRUNK],
     ["same", "unchanged", null]].forEach(function (x) {
      var li = document.createElement("li");
      li.setAttribute("data-kind", x[0]);
      var sw = document.createElement("span");
      sw.className = "sw";
      sw.style.background = x[2] === null ? "hsl(0,0%,86%)" : "hsl(" + x[2] + ",90%,50%)";
      li.appendChild(sw);
      li.appendChild(document.createTextNode(x[1]));
      legend.appendChild(li);
    });
    var note = document.createElement("li");
    note.className = "caption";
    note.textContent = "width: mean of both " + (data.absolute ? "weights" : "shares");
    legend.appendChild(note);
  }

  header();
  if (!make || !window.d3) {
    chartEl.textContent = "The flame graph renderer (d3-flame-graph) did not load.";
    return;
  }

  var chart = make()
    .width(widthNow())
    .cellHeight(18)
    .transitionDuration(350)
    .minFrameSize(0.5)
    .sort(true)
    .title("")
    .selfValue(false)
    .setColorMapper(function (d) {
      return d.highlight ? HIGHLIGHT : diff ? diffColour(d.data) : colour(d.data.k, d.data.n);
    })
    .setLabelHandler(function (d) { return describe(d, false); })
    .setDetailsHandler(setDetails)
    .setSearchMatch(function (d, term) {
      return !!term && d.data.n.toLowerCase().indexOf(term.toLowerCase()) >= 0;
    })
    .setSearchHandler(function (results) {
      if (!searchEl.value) { searchText = ""; setDetails(); return; }
      var sum = 0, frames = 0;
      results.forEach(function (d) {
        for (var p = d.parent; p; p = p.parent) if (p.highlight) return;
        sum += d.data.v;                 /* outermost matches only */
      });
      frames = results.length;
      searchText = "search \u201c" + searchEl.value + "\u201d: " + frames + " frame" +
        (frames === 1 ? "" : "s") + ", " + pct(sum, total) + " of all (" + amount(sum) + ")";
      setDetails();
    })
    .onClick(showZoom);
  chart.setDetailsElement(detailsEl);
  chart.tooltip(makeTooltip());

  window.d3.select(chartEl).datum(data.tree).call(chart);
  showZoom(null);
  setDetails();

  function search() {
    if (searchEl.value) chart.search(searchEl.value);
    else { chart.clear(); searchText = ""; setDetails(); }
  }
  document.getElementById("search-form").addEventListener("submit", function (e) {
    e.preventDefault();
    search();
  });
  var timer = null;
  searchEl.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(search, 250);
  });
  document.getElementById("clear").addEventListener("click", function () {
    searchEl.value = "";
    search();
  });
  document.getElementById("reset").addEventListener("click", function () {
    chart.resetZoom();
    showZoom(null);
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && document.activeElement !== searchEl) {
      e.preventDefault();
      searchEl.focus();
    } else if (e.key === "Escape" && document.activeElement === searchEl) {
      searchEl.value = "";
      search();
    }
  });
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      chart.width(widthNow());
      chart.update();
    }, 150);
  });

  /* For tests and the console. */
  window.ljperf = { chart: chart, data: data, zoomed: function () { return zoomed; } };
})();
