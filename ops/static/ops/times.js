// Times in the reader's zone (docs/web.md, "Times in the reader's zone"): every <time datetime="…Z"> on the
// page reads in the person's zone (the meta "reader-zone", chosen on /me/) or else the browser's, with a
// relative form ("3 min ago", "in 40 s"); its title keeps the exact UTC instant. Again after htmx swaps a
// part in, and the relative forms every 15 s. Without this script the pages read in UTC.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="reader-zone"]');
  var zone = (meta && meta.content) || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  var exact;
  try {
    exact = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
      second: "2-digit", hourCycle: "h23", timeZoneName: "short"
    });
  } catch (e) {
    zone = "UTC";
    exact = new Intl.DateTimeFormat("en-CA", {timeZone: "UTC", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short"});
  }

  function wall(date) {
    var parts = {};
    exact.formatToParts(date).forEach(function (p) { parts[p.type] = p.value; });
    return parts.year + "-" + parts.month + "-" + parts.day + " " + parts.hour + ":" + parts.minute + ":" +
      parts.second + " " + parts.timeZoneName;
  }

  function relative(date, now) {
    var seconds = Math.round((date - now) / 1000), ahead = seconds > 0, s = Math.abs(seconds), text;
    if (s < 60) { text = s + " s"; }
    else if (s < 3600) { text = Math.round(s / 60) + " min"; }
    else if (s < 172800) { text = Math.round(s / 3600) + " h"; }
    else { text = Math.round(s / 86400) + " d"; }
    return s < 1 ? "now" : (ahead ? "in " + text : text + " ago");
  }

  function render(root) {
    var now = new Date();
    (root || document).querySelectorAll("time[datetime]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) { return; }
      if (!el.dataset.utc) { el.dataset.utc = el.getAttribute("title") || el.textContent; }
      el.textContent = wall(date);
      el.title = el.dataset.utc + " · " + relative(date, now);
      if (el.dataset.relative === "off") { return; }
      var rel = el.nextElementSibling;
      if (!rel || !rel.classList.contains("time-relative")) {
        rel = document.createElement("span");
        rel.className = "time-relative";
        el.insertAdjacentElement("afterend", rel);
      }
      rel.textContent = " (" + relative(date, now) + ")";
    });
  }

  document.addEventListener("DOMContentLoaded", function () { render(document); });
  document.addEventListener("htmx:afterSwap", function (event) { render(event.target); });
  setInterval(function () { render(document); }, 15000);
  window.factoryTimes = {render: render, zone: function () { return zone; }};
})();
