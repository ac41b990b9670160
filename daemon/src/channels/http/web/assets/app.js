// Live updates for the owner's page: one EventSource on the session's stream. On news the
// page's live region is fetched again (htmx swaps it in place); on the chat page an answer
// that is still streaming in is shown as it grows, until the answer itself replaces it.
// No inline script anywhere.
(function () {
  "use strict";
  if (!document.getElementById("live") || !window.EventSource) {
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
  // The answer streaming in, until `answered`: shown again after every swap of the live
  // region (a refresh, or the page htmx loads after a form), so no swap loses it.
  var partial = null;
  function showPartial() {
    var live = document.getElementById("live");
    if (partial === null || !live || window.location.pathname !== "/chat") {
      return;
    }
    var line = document.getElementById("streaming");
    if (!line) {
      line = document.createElement("div");
      line.id = "streaming";
      line.className = "line";
      var who = document.createElement("span");
      who.className = "who";
      who.textContent = "Steward (writing…)";
      line.appendChild(who);
      line.appendChild(document.createElement("pre"));
      live.appendChild(line);
    }
    line.querySelector("pre").textContent = partial;
  }
  document.addEventListener("htmx:afterSettle", showPartial);
  var stream = new EventSource("/web/stream");
  // Whether the page is live, for the stylesheet and for tests: `data-live` on <html>.
  stream.addEventListener("open", function () {
    document.documentElement.setAttribute("data-live", "on");
  });
  stream.addEventListener("error", function () {
    document.documentElement.setAttribute("data-live", "off");
  });
  stream.addEventListener("changed", refresh);
  stream.addEventListener("partial", function (event) {
    partial = JSON.parse(event.data).text;
    showPartial();
  });
  stream.addEventListener("answered", function () {
    partial = null;
    refresh();
  });
})();
