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
  function streaming(event) {
    var live = document.getElementById("live");
    if (!live || window.location.pathname !== "/chat") {
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
    line.querySelector("pre").textContent = JSON.parse(event.data).text;
  }
  var stream = new EventSource("/web/stream");
  stream.addEventListener("changed", refresh);
  stream.addEventListener("partial", streaming);
})();
