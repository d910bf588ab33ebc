// cairn web UI: the little the pages need beyond htmx. Everything works without it.
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
})();
