/* kprof's HTML timeline: rows per thread and per queue, zoom (wheel, pinch), pan (drag, one
 * finger), tooltips (hover, tap).
 *
 * The data (in #kprof-data) is columnar, per track: s (start, ns from the trace's base), d
 * (duration, ns), n (name index), k (kind), z (nesting depth), optional b (bytes, -1: none),
 * f (flags: 1 host-timed, 2 unresolved) and st (launch site: an index into the profile's
 * sites, [label, file:line], -1: none), items sorted by start; md is the longest duration. Only
 * what is visible is drawn: a binary search finds the first item that can reach the view, and
 * items narrower than a pixel that fall where something is already drawn are skipped.
 */
(function () {
  "use strict";
  var KINDS = ["launch", "kernel", "copy", "device range", "range", "marker"];
  var ROW = 18, HEAD = 22, AXIS = 24, PAD = 3;
  var status = document.getElementById("kprof-status");
  var data = JSON.parse(document.getElementById("kprof-data").textContent);
  var labels = document.getElementById("kprof-labels");
  var view = document.getElementById("kprof-view");
  var canvas = document.getElementById("kprof-canvas");
  var tip = document.getElementById("kprof-tip");
  var ctx = canvas.getContext("2d");

  function fmtTime(ns) {
    var a = Math.abs(ns), sign = ns < 0 ? "-" : "";
    function g3(v) { return String(Number(v.toPrecision(3))); }
    if (a < 999.5) return sign + a.toFixed(0) + " ns";
    if (a < 999.5e3) return sign + g3(a / 1e3) + " µs";
    if (a < 999.5e6) return sign + g3(a / 1e6) + " ms";
    return sign + g3(a / 1e9) + " s";
  }
  // An axis tick: in the unit of the view's far end, with as many decimals as the step needs
  // (zoomed in at 180 ms, ticks 0.5 ms apart read 179.5 ms, 180 ms, 180.5 ms, not 180 ms twice).
  function fmtTick(ns, step, far) {
    var units = [[1e9, " s"], [1e6, " ms"], [1e3, " µs"], [1, " ns"]], u = units[3];
    for (var i = 0; i < units.length; i++) if (far >= units[i][0] * 0.9995) { u = units[i]; break; }
    var places = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / u[0]) - 1e-9)));
    return (ns / u[0]).toFixed(places) + u[1];
  }
  function fmtBytes(n) {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"];
    for (var i = 0; i < units.length; i++) {
      if (n < 1023.5 || i === units.length - 1) {
        return i === 0 ? n.toFixed(0) + " B" : String(Number(n.toPrecision(3))) + " " + units[i];
      }
      n /= 1024;
    }
  }
  function escapeHtml(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;"}[c];
    });
  }
  function bisect(arr, x) {  // first index with arr[i] >= x
    var lo = 0, hi = arr.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  }
  var hueCache = {};
  function hue(name) {
    var h = hueCache[name];
    if (h === undefined) {
      h = 2166136261;  // FNV-1a, then spread by the golden angle so similar names differ
      for (var i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
      h = hueCache[name] = Math.round((h % 1000) * 137.508) % 360;
    }
    return h;
  }
  function color(kind, name, hostTimed) {
    var h = hue(name);
    if (kind === 0) return "hsl(" + h + ",45%,72%)";          // launch
    if (kind === 1) return hostTimed ? "hsl(" + h + ",25%,62%)" : "hsl(" + h + ",62%,55%)";
    if (kind === 2) return "hsl(" + h + ",70%,42%)";          // copy
    if (kind === 3) return "hsl(" + h + ",35%,80%)";          // device range
    return "hsl(" + h + ",40%,80%)";                          // host range
  }

  // -- layout: a header per process, a row per track, each as tall as its nesting ------------
  // Labels are shown in full: the label column is as wide as the longest label, up to
  // labelBound(), and a label longer than that wraps, its row made as tall as its lines.
  var rows = [], labelled = [], nItems = 0, span = data.span_ns;
  var dataStart = Infinity, dataEnd = -Infinity, height = AXIS + 8;
  function label(cls, kind, text, title) {
    var el = document.createElement("div");
    el.className = cls;
    el.setAttribute("data-kind", kind);
    el.textContent = text;
    el.title = title;
    labels.appendChild(el);
    return el;
  }
  data.profiles.forEach(function (prof) {
    prof.processes.forEach(function (proc) {
      labelled.push({el: label("kprof-proc", proc.kind, proc.name, proc.title || proc.name)});
      proc.tracks.forEach(function (tr) {
        var row = {tr: tr, proc: proc, prof: prof, y: 0, h: tr.depth * ROW + 2 * PAD};
        row.el = label("kprof-row", tr.kind, tr.name, proc.name + " — " + tr.name);
        labelled.push(row);
        rows.push(row);
        nItems += tr.s.length;
        if (tr.s.length) dataStart = Math.min(dataStart, tr.s[0]);
        for (var i = 0; i < tr.s.length; i++) dataEnd = Math.max(dataEnd, tr.s[i] + (tr.d[i] || 0));
      });
    });
  });
  // At most 40 % of the window (a phone keeps most of its width for the timeline), at most
  // 480 px, and never less than 140 px.
  function labelBound() { return Math.max(140, Math.min(480, Math.round(window.innerWidth * 0.4))); }
  function layOut() {
    labels.className = "kprof-measure";  // labels on one line, as wide as their text
    var need = labels.querySelector(".kprof-axis-label").offsetWidth;
    labelled.forEach(function (x) { need = Math.max(need, x.el.offsetWidth); });
    labels.className = "";
    var w = Math.min(labelBound(), need + 2);
    labels.style.flexBasis = w + "px";
    labels.setAttribute("data-width", String(w));
    var y = AXIS;
    labelled.forEach(function (x) {
      var base = x.tr ? x.tr.depth * ROW + 2 * PAD : HEAD;
      x.el.style.top = y + "px";
      x.el.style.height = "auto";
      var h = Math.max(base, x.el.offsetHeight);
      x.el.style.height = h + "px";
      x.y = y;
      x.h = h;
      y += h;
    });
    height = y + 8;
    labels.style.height = height + "px";
  }
  layOut();

  // -- the view: [t0, t1] in ns from the base ------------------------------------------------
  var t0, t1, width = 0, dpr = 1, pending = false, drawn = 0, ticks = [];
  // The full view fits what was recorded (not the time before the first record, such as a
  // script's start-up), with a little room on each side.
  function reset() {
    var a = dataStart <= dataEnd ? dataStart : 0, b = dataStart <= dataEnd ? dataEnd : span;
    var pad = Math.max((b - a) * 0.01, 50);
    t0 = a - pad; t1 = b + pad;
  }
  reset();

  function resize() {
    width = Math.max(100, view.clientWidth);
    dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
  }

  function niceStep(range, px) {
    var target = range / Math.max(1, px / 110);
    var p = Math.pow(10, Math.floor(Math.log10(target)));
    var m = target / p;
    return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
  }

  function draw() {
    pending = false;
    var scale = width / (t1 - t0);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    // time grid and axis
    var step = niceStep(t1 - t0, width);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ticks = [];
    for (var g = Math.ceil(t0 / step) * step; g <= t1; g += step) {
      var gx = Math.round((g - t0) * scale) + 0.5;
      ctx.fillStyle = "#eef0f3";
      ctx.fillRect(gx, AXIS, 1, height - AXIS);
      ctx.fillStyle = "#667085";
      var tick = fmtTick(g, step, Math.max(Math.abs(t0), Math.abs(t1)));
      ticks.push(tick);
      ctx.fillText(tick, gx + 3, AXIS / 2);
    }
    ctx.fillStyle = "#d9dde5";
    ctx.fillRect(0, AXIS - 1, width, 1);
    drawn = 0;
    var t = ctx;
    for (var r = 0; r < rows.length; r++) {
      if (rows[r].tr.kind === "counter") { drawCounter(rows[r], scale); continue; }
      var row = rows[r], tr = row.tr, names = row.prof.names;
      var s = tr.s, d = tr.d, z = tr.z, k = tr.k, f = tr.f;
      var last = [], lastMark = [];  // per depth: the rightmost pixel drawn so far
      var i = bisect(s, t0 - tr.md), n = s.length;
      for (; i < n && s[i] <= t1; i++) {
        var x0 = (s[i] - t0) * scale, x1 = x0 + d[i] * scale;
        var yy = row.y + PAD + z[i] * ROW;
        if (k[i] === 5) {  // marker: a diamond, unless one is drawn within 6 px already
          if (x0 < -6 || (lastMark[z[i]] !== undefined && x0 - lastMark[z[i]] < 6)) continue;
          lastMark[z[i]] = x0;
          t.fillStyle = "#d92d20";
          t.beginPath();
          t.moveTo(x0, yy + 3); t.lineTo(x0 + 4, yy + ROW / 2); t.lineTo(x0, yy + ROW - 3);
          t.lineTo(x0 - 4, yy + ROW / 2); t.closePath(); t.fill();
          drawn++;
          continue;
        }
        if (x1 < 0) continue;
        var lx = last[z[i]];
        if (x1 - x0 < 1) {
          if (lx !== undefined && Math.floor(x0) <= lx) continue;  // that pixel is painted
          x1 = x0 + 1;
        }
        last[z[i]] = Math.floor(x1);
        var name = names[tr.n[i]];
        t.fillStyle = color(k[i], name, f ? f[i] & 1 : 0);
        var cx0 = Math.max(x0, -2), cx1 = Math.min(x1, width + 2);
        t.fillRect(cx0, yy + 1, cx1 - cx0, ROW - 2);
        drawn++;
        if (cx1 - cx0 > 36) {
          t.save();
          t.beginPath(); t.rect(cx0, yy, cx1 - cx0 - 2, ROW); t.clip();
          t.fillStyle = k[i] === 2 ? "#ffffff" : "#101828";  // copies are dark
          t.fillText(name, cx0 + 3, yy + ROW / 2);
          t.restore();
        }
      }
    }
  }
  // A counter (live bytes of a device): a step line from each event to the next, filled.
  function drawCounter(row, scale) {
    var tr = row.tr, s = tr.s, v = tr.v, n = s.length, top = row.y + PAD, h = row.h - 2 * PAD;
    if (!n || !tr.max) return;
    var t = ctx, i = Math.max(0, bisect(s, t0) - 1), base = top + h;
    t.fillStyle = "#b2ddff";
    for (; i < n && s[i] <= t1; i++) {
      var x0 = Math.max((s[i] - t0) * scale, -2);
      var x1 = i + 1 < n ? Math.min((s[i + 1] - t0) * scale, width + 2) : width + 2;
      var yy = base - (v[i] / tr.max) * h;
      if (x1 > x0) t.fillRect(x0, yy, Math.max(x1 - x0, 1), base - yy);
      drawn++;
    }
    t.fillStyle = "#667085";
    t.fillText("peak " + fmtBytes(tr.max), 4, top + 7);
  }
  function redraw() { if (!pending) { pending = true; window.requestAnimationFrame(draw); } }

  // -- interaction -----------------------------------------------------------------------------
  function rowAt(py) {
    for (var r = 0; r < rows.length; r++) if (py >= rows[r].y && py < rows[r].y + rows[r].h) return rows[r];
    return null;
  }
  function itemAt(px, py) {
    var row = rowAt(py);
    if (!row || row.tr.kind === "counter") return null;
    var tr = row.tr, s = tr.s, d = tr.d, z = tr.z;
    var depth = Math.floor((py - row.y - PAD) / ROW);
    var scale = width / (t1 - t0), t = t0 + px / scale, tol = 3 / scale;
    var best = -1, bestDist = Infinity;
    for (var i = bisect(s, t - tr.md - tol); i < s.length && s[i] <= t + tol; i++) {
      if (z[i] !== depth) continue;
      var a = s[i] - tol, b = s[i] + d[i] + tol;
      if (t < a || t > b) continue;
      var dist = Math.abs(t - (s[i] + d[i] / 2)) - d[i] / 2;
      if (dist < bestDist) { bestDist = dist; best = i; }
    }
    return best < 0 ? null : {row: row, i: best};
  }
  function showTip(hit, cx, cy) {
    var tr = hit.row.tr, i = hit.i, kind = tr.k[i];
    var name = hit.row.prof.names[tr.n[i]];
    var lines = ["<b>" + escapeHtml(name) + "</b> <span class=k>" + KINDS[kind] + "</span>"];
    lines.push("<span class=k>start</span> " + fmtTime(tr.s[i] - hit.row.prof.start_ns));
    if (kind !== 5) lines.push("<span class=k>duration</span> " + fmtTime(tr.d[i]));
    lines.push("<span class=k>on</span> " + escapeHtml(hit.row.proc.name + ", " + tr.name));
    if (tr.b && tr.b[i] >= 0) {
      var rate = tr.d[i] > 0 ? " (" + fmtBytes(tr.b[i] * 1e9 / tr.d[i]) + "/s)" : "";
      lines.push("<span class=k>bytes</span> " + fmtBytes(tr.b[i]) + rate);
    }
    if (tr.st && tr.st[i] >= 0) {
      var site = hit.row.prof.sites[tr.st[i]];
      lines.push("<span class=k>site</span> " + escapeHtml(site[0]) +
                 " <span class=k>" + escapeHtml(site[1]) + "</span>");
    }
    if (tr.f && tr.f[i] & 1) lines.push("timed on the host, synchronizing: no device timestamps");
    if (tr.f && tr.f[i] & 4) lines.push("approximate: completion observed on the host (queue without profiling)");
    if (tr.f && tr.f[i] & 2) lines.push("unresolved: the device never gave a time (see below)");
    tip.innerHTML = lines.join("<br>");
    tip.style.display = "block";
    var w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.min(cx + 14, window.innerWidth - w - 8) + "px";
    tip.style.top = Math.min(cy + 14, window.innerHeight - h - 8) + "px";
  }

  var drag = null;
  view.addEventListener("mousedown", function (e) {
    drag = {x: e.clientX, t0: t0, t1: t1};
    view.className = "dragging";
    e.preventDefault();
  });
  window.addEventListener("mouseup", function () { drag = null; view.className = ""; });
  window.addEventListener("mousemove", function (e) {
    var rect = canvas.getBoundingClientRect();
    if (drag) {
      var dt = (e.clientX - drag.x) * (drag.t1 - drag.t0) / width;
      t0 = drag.t0 - dt; t1 = drag.t1 - dt;
      tip.style.display = "none";
      redraw();
      return;
    }
    var px = e.clientX - rect.left, py = e.clientY - rect.top;
    var hit = px >= 0 && px < width && py >= 0 && py < height ? itemAt(px, py) : null;
    if (hit) showTip(hit, e.clientX, e.clientY); else tip.style.display = "none";
  });
  view.addEventListener("wheel", function (e) {
    e.preventDefault();
    var rect = canvas.getBoundingClientRect();
    var tm = t0 + (e.clientX - rect.left) * (t1 - t0) / width;
    var factor = Math.exp(e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
    if ((t1 - t0) * factor < 20) factor = 20 / (t1 - t0);  // no closer than 20 ns across
    t0 = tm - (tm - t0) * factor;
    t1 = tm + (t1 - tm) * factor;
    redraw();
  }, {passive: false});
  view.addEventListener("dblclick", function () { reset(); redraw(); });

  // Touch screens: one finger pans sideways (the page still scrolls up and down: the view's
  // touch-action is pan-y), two pinch to zoom around their midpoint, a tap shows the details.
  var touch = null;
  function touchStart(ts) {
    var rect = canvas.getBoundingClientRect();
    if (ts.length >= 2) {
      var a = ts[0].clientX - rect.left, b = ts[1].clientX - rect.left;
      return {n: 2, mid: (a + b) / 2, dist: Math.max(Math.abs(a - b), 1), t0: t0, t1: t1};
    }
    return {n: 1, x: ts[0].clientX, y: ts[0].clientY, t0: t0, t1: t1, moved: false};
  }
  view.addEventListener("touchstart", function (e) {
    touch = e.touches.length ? touchStart(e.touches) : null;
  });
  view.addEventListener("touchmove", function (e) {
    var ts = e.touches;
    if (!touch || !ts.length) return;
    if ((ts.length >= 2) !== (touch.n === 2)) touch = touchStart(ts);
    var rect = canvas.getBoundingClientRect();
    if (touch.n === 2) {
      var a = ts[0].clientX - rect.left, b = ts[1].clientX - rect.left;
      var span0 = touch.t1 - touch.t0;
      var span = Math.max(span0 * touch.dist / Math.max(Math.abs(a - b), 1), 20);
      var tm = touch.t0 + touch.mid * span0 / width;  // the time under the fingers at first
      t0 = tm - ((a + b) / 2) * span / width;
      t1 = t0 + span;
    } else {
      var dx = ts[0].clientX - touch.x;
      if (Math.abs(dx) > 4) touch.moved = true;
      var dt = dx * (touch.t1 - touch.t0) / width;
      t0 = touch.t0 - dt; t1 = touch.t1 - dt;
    }
    if (e.cancelable) e.preventDefault();
    tip.style.display = "none";
    redraw();
  }, {passive: false});
  view.addEventListener("touchend", function (e) {
    if (touch && touch.n === 1 && !touch.moved && !e.touches.length) {
      var rect = canvas.getBoundingClientRect();
      var px = touch.x - rect.left, py = touch.y - rect.top;
      var hit = px >= 0 && px < width && py >= 0 && py < height ? itemAt(px, py) : null;
      if (hit) showTip(hit, touch.x, touch.y); else tip.style.display = "none";
    }
    touch = e.touches.length ? touchStart(e.touches) : null;
  });
  window.addEventListener("resize", function () { layOut(); resize(); redraw(); });

  // For the console, tests and docs/screenshots.py: the view (ns from the base) to read and to
  // set, the rows, and the hit test.
  window.kprofTimeline = {
    view: function () { return [t0, t1]; },
    setView: function (a, b) { if (b > a) { t0 = a; t1 = b; draw(); } },
    rows: rows,
    ticks: function () { return ticks.slice(); },  // the axis's labels, as last drawn
    itemAt: itemAt,
    AXIS: AXIS, ROW: ROW, PAD: PAD
  };

  resize();
  draw();
  status.setAttribute("data-rows", String(rows.length));
  status.setAttribute("data-processes", String(labels.querySelectorAll(".kprof-proc").length));
  status.setAttribute("data-items", String(nItems));
  status.setAttribute("data-drawn", String(drawn));
  if (!window.kprofErrors.length) {
    status.setAttribute("data-state", "ready");
    status.textContent = rows.length + " rows, " + nItems + " entries over " + fmtTime(span);
  }
})();

/* The flame graphs of the summary (renderers/tree_html.py): a click on a box zooms to it. Each
 * box has its level and its place (data-left, data-width, in percent of the whole graph); the
 * boxes inside the clicked one's span above it are its descendants, those below it that span
 * it its ancestors (drawn across, dimmed), the rest are hidden. The root shows all again.
 */
(function () {
  "use strict";
  var EPS = 1e-3;  // places are written with 4 decimals
  Array.prototype.forEach.call(document.querySelectorAll(".kprof-flame"), function (graph) {
    var boxes = Array.prototype.map.call(graph.querySelectorAll(".kprof-box"), function (el) {
      return {el: el, level: +el.getAttribute("data-level"),
              left: +el.getAttribute("data-left"), width: +el.getAttribute("data-width")};
    });
    function zoom(b) {
      var w = Math.max(b.width, 1e-9);
      boxes.forEach(function (x) {
        var show, above = false, left = 0, width = 100;
        if (x.level <= b.level) {
          show = x.left <= b.left + EPS && x.left + x.width >= b.left + b.width - EPS;
          above = x !== b;
        } else {
          show = x.left >= b.left - EPS && x.left + x.width <= b.left + b.width + EPS;
          left = (x.left - b.left) / w * 100;
          width = x.width / w * 100;
        }
        x.el.style.display = show ? "" : "none";
        x.el.classList.toggle("kprof-above", show && above && b.level > 0);
        if (show) { x.el.style.left = left.toFixed(4) + "%"; x.el.style.width = width.toFixed(4) + "%"; }
      });
      graph.setAttribute("data-zoom", b.level ? b.el.textContent : "");
    }
    graph.setAttribute("data-zoomable", "");
    graph.addEventListener("click", function (e) {
      var el = e.target.closest ? e.target.closest(".kprof-box") : null;
      for (var i = 0; el && i < boxes.length; i++) if (boxes[i].el === el) { zoom(boxes[i]); return; }
    });
  });
})();
