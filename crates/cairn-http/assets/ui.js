// cairn web UI: the little the pages need beyond htmx. Every page works without it.
"use strict";
(function () {
  // htmx sends the session's CSRF token (from the page's <meta>) as a header on every
  // request it makes; plain forms carry it as a hidden field.
  document.addEventListener("htmx:configRequest", function (event) {
    var meta = document.querySelector('meta[name="csrf-token"]');
    if (meta) {
      event.detail.headers["X-CSRF-Token"] = meta.getAttribute("content");
    }
  });

  // The graph: pan by dragging, zoom with the wheel or the buttons (shown only when this
  // script runs), by changing the SVG's viewBox. Clicks on nodes stay plain links.
  function graph(svg) {
    var start = svg.getAttribute("viewBox").split(/\s+/).map(Number);
    var box = start.slice();
    function apply() { svg.setAttribute("viewBox", box.join(" ")); }
    function zoom(factor, cx, cy) {
      var w = box[2] * factor, h = box[3] * factor;
      if (w < start[2] / 20 || w > start[2] * 8) return;
      box = [cx - (cx - box[0]) * factor, cy - (cy - box[1]) * factor, w, h];
      apply();
    }
    function centre() { return [box[0] + box[2] / 2, box[1] + box[3] / 2]; }
    function point(event) {
      var rect = svg.getBoundingClientRect();
      return [box[0] + (event.clientX - rect.left) / rect.width * box[2],
              box[1] + (event.clientY - rect.top) / rect.height * box[3]];
    }
    svg.addEventListener("wheel", function (event) {
      event.preventDefault();
      var p = point(event);
      zoom(event.deltaY > 0 ? 1.15 : 1 / 1.15, p[0], p[1]);
    }, { passive: false });
    var drag = null;
    svg.addEventListener("pointerdown", function (event) {
      if (event.target.closest("a")) return;
      drag = { x: event.clientX, y: event.clientY, box: box.slice() };
      svg.setPointerCapture(event.pointerId);
      svg.classList.add("dragging");
    });
    svg.addEventListener("pointermove", function (event) {
      if (!drag) return;
      var rect = svg.getBoundingClientRect();
      box[0] = drag.box[0] - (event.clientX - drag.x) / rect.width * box[2];
      box[1] = drag.box[1] - (event.clientY - drag.y) / rect.height * box[3];
      apply();
    });
    function end() { drag = null; svg.classList.remove("dragging"); }
    svg.addEventListener("pointerup", end);
    svg.addEventListener("pointercancel", end);
    var tools = svg.previousElementSibling;
    if (tools && tools.classList.contains("graph-tools")) {
      tools.hidden = false;
      tools.addEventListener("click", function (event) {
        var button = event.target.closest("button[data-zoom]");
        if (!button) return;
        var c = centre();
        var what = button.getAttribute("data-zoom");
        if (what === "in") zoom(1 / 1.3, c[0], c[1]);
        else if (what === "out") zoom(1.3, c[0], c[1]);
        else { box = start.slice(); apply(); }
      });
    }
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("svg.graph").forEach(graph);
  });
})();
