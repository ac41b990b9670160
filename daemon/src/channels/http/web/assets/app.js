// Live updates for the owner's page: one EventSource on the session's stream; on news the
// page's live region is fetched again (htmx swaps it in place). No inline script anywhere.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live || !window.EventSource) {
    return;
  }
  var pending = false;
  function refresh() {
    if (pending) {
      return;
    }
    pending = true;
    // Coalesce bursts: one fetch for many events.
    setTimeout(function () {
      pending = false;
      var url = window.location.pathname + window.location.search;
      window.htmx.ajax("GET", url, { target: "#live", select: "#live", swap: "outerHTML" });
    }, 150);
  }
  var stream = new EventSource("/web/stream");
  ["message", "pending", "reply", "step_ended", "tool_result", "changed"].forEach(function (kind) {
    stream.addEventListener(kind, refresh);
  });
})();
