// Live updates: when the page's stream says the plane's view moved, fetch
// the page again and swap its main content. Nothing else runs here.
(function () {
  var main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource || !main.dataset.live) return;
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        if (next) { main.innerHTML = next.innerHTML; }
      })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  new EventSource(main.dataset.live).onmessage = refresh;
})();
