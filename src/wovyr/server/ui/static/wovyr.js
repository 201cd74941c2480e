/* Wovyr web UI: the one script. Pages work without it; with it, times stay relative and a
   running execution refreshes itself politely: every 2 s while it changes, backing off to
   10 s while it does not, paused while the tab is hidden, stopped when it finishes. The
   text its model calls stream is shown as it arrives (Server-Sent Events; the browser
   resumes after a dropped connection with Last-Event-ID), a retried answer below the one
   it supersedes. */
(function () {
  "use strict";

  var FAST = 2000, SLOW = 10000, LIST_FAST = 5000, LIST_SLOW = 30000;

  function relative(date, now) {
    var delta = (date.getTime() - now) / 1000, s = Math.abs(delta);
    if (s < 5) return "just now";
    var units = [[31536000, "y"], [86400, "d"], [3600, "h"], [60, "m"], [1, "s"]];
    for (var i = 0; i < units.length; i++) {
      var size = units[i][0];
      if (s >= size * (units[i][1] === "s" ? 1 : 0.95)) {
        var n = Math.max(1, Math.round(s / size));
        return delta > 0 ? "in " + n + units[i][1] : n + units[i][1] + " ago";
      }
    }
    return "just now";
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function clockText(date) {
    var now = new Date(), hm = pad(date.getHours()) + ":" + pad(date.getMinutes());
    if (date.toDateString() === now.toDateString()) return hm;
    return date.toLocaleDateString(undefined, { month: "short", day: "2-digit" }) + " " + hm;
  }

  function refreshTimes(root) {
    var now = Date.now(), nodes = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i], date = new Date(el.getAttribute("datetime"));
      if (isNaN(date.getTime())) continue;
      if (!el.dataset.utc) el.dataset.utc = el.getAttribute("title") || "";
      el.title = date.toLocaleString() + (el.dataset.utc ? " (" + el.dataset.utc + ")" : "");
      if (el.hasAttribute("data-local")) {  // the full local date and time, with its zone
        el.textContent = date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
        continue;
      }
      el.textContent = el.hasAttribute("data-rel") ? relative(date, now) : clockText(date);
    }
  }

  function dirty(part) {
    if (part.contains(document.activeElement) && document.activeElement !== document.body) return true;
    var fields = part.querySelectorAll("input:not([type=hidden]), textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return true;
    }
    return false;
  }

  function keepState(oldPart, newPart) {
    var before = oldPart.querySelectorAll("details"), after = newPart.querySelectorAll("details");
    if (before.length === after.length) {
      for (var i = 0; i < before.length; i++) after[i].open = before[i].open;
    }
    var scrollers = oldPart.querySelectorAll(".dag-scroll"), fresh = newPart.querySelectorAll(".dag-scroll");
    return function () {
      for (var j = 0; j < scrollers.length && j < fresh.length; j++) {
        fresh[j].scrollLeft = scrollers[j].scrollLeft;
        fresh[j].scrollTop = scrollers[j].scrollTop;
      }
    };
  }

  function swapParts(container, doc) {
    var parts = doc.querySelectorAll("[data-live]");
    for (var i = 0; i < parts.length; i++) {
      var name = parts[i].getAttribute("data-live");
      var current = container.querySelector('[data-live="' + name + '"]');
      if (!current) continue;
      if (current.hasAttribute("data-key") &&
          (current.getAttribute("data-key") === parts[i].getAttribute("data-key") || dirty(current))) {
        continue; /* action forms: swap only when they must change and nobody is typing */
      }
      var fresh = document.importNode(parts[i], true), restore = keepState(current, fresh);
      current.parentNode.replaceChild(fresh, current);
      restore();
      refreshTimes(fresh);
    }
  }

  function poller(container, url, fast, slow, apply) {
    var delay = fast, timer = null, stopped = false, busy = false;
    function schedule(ms) {
      if (stopped) return;
      clearTimeout(timer);
      timer = setTimeout(tick, ms);
    }
    function tick() {
      if (stopped || busy) return;
      if (document.hidden) return; /* resumed by visibilitychange */
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (r.status === 401 || r.status === 404) { stopped = true; return null; }
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text();
        })
        .then(function (html) {
          busy = false;
          if (html === null) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var outcome = apply(doc);
          if (outcome === "stop") { stopped = true; return; }
          delay = outcome === "changed" ? fast : Math.min(slow, Math.round(delay * 1.5));
          schedule(delay);
        })
        .catch(function () {
          busy = false;
          delay = Math.min(slow * 3, delay * 2);
          schedule(delay);
        });
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && !stopped) { delay = fast; schedule(250); }
    });
    schedule(delay);
  }

  function watchExecution(container) {
    if (container.getAttribute("data-finished") === "true") return;
    poller(container, container.getAttribute("data-live-url"), FAST, SLOW, function (doc) {
      var summary = doc.querySelector('[data-live="summary"]');
      if (!summary) return "same";
      var version = summary.getAttribute("data-version");
      var finished = summary.getAttribute("data-finished") === "true";
      if (version === container.getAttribute("data-version") && !finished) {
        refreshTimes(container);
        return "same";
      }
      container.setAttribute("data-version", version);
      swapParts(container, doc);
      if (finished) { container.setAttribute("data-finished", "true"); return "stop"; }
      return "changed";
    });
  }

  function signature(root) {
    var rows = root.querySelectorAll("tr[data-execution]"), out = [];
    for (var i = 0; i < rows.length; i++) out.push(rows[i].getAttribute("data-execution") + ":" + rows[i].textContent.replace(/\s+/g, " ").replace(/\d+[smhdy] ago|in \d+[smhdy]|just now/g, ""));
    return out.join("|");
  }

  function watchList(container) {
    poller(container, container.getAttribute("data-live-url"), LIST_FAST, LIST_SLOW, function (doc) {
      var before = signature(container);
      swapParts(container, doc);
      if (!doc.querySelector("[data-live-list]")) return "stop";
      return signature(container) === before ? "same" : "changed";
    });
  }

  function watchStream(section) {
    var box = section.querySelector("#stream-text"), current = {};
    var source = new EventSource(section.getAttribute("data-stream-url"));
    function key(d) { return d.activity + "/" + d.turn; }
    source.addEventListener("attempt", function (e) {
      var d = JSON.parse(e.data), k = key(d), before = current[k];
      if (before) before.className = "generation superseded";
      var block = document.createElement("div"), title = document.createElement("h3");
      var text = document.createElement("pre");
      block.className = "generation";
      block.setAttribute("data-activity", d.activity);
      block.setAttribute("data-attempt", d.attempt);
      title.textContent = d.activity + " · attempt " + d.attempt +
        (d.recovery ? " (re-run " + d.recovery + " after a lost worker)" : "") +
        (d.turn > 1 ? " · turn " + d.turn : "");
      block.appendChild(title);
      block.appendChild(text);
      box.appendChild(block);
      current[k] = block;
      section.hidden = false;
    });
    source.addEventListener("token", function (e) {
      var d = JSON.parse(e.data), block = current[key(d)];
      if (block) block.querySelector("pre").appendChild(document.createTextNode(d.text));
    });
    source.addEventListener("end", function () { source.close(); });
  }

  function copyButtons() {  // each shown only with the script; copies the <pre> after it
    document.documentElement.classList.add("js");
    document.addEventListener("click", function (e) {
      var button = e.target.closest ? e.target.closest("button.copy") : null;
      if (!button || !navigator.clipboard) return;
      var pre = button.nextElementSibling;
      if (!pre || pre.tagName !== "PRE") return;
      navigator.clipboard.writeText(pre.textContent).then(function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 1500);
      });
    });
  }

  function fileReaders() {  // a file input (shown only with the script) fills a textarea
    var inputs = document.querySelectorAll("input[type=file][data-read-into]");
    for (var i = 0; i < inputs.length; i++) {
      var input = inputs[i], into = document.getElementById(input.getAttribute("data-read-into"));
      if (!into || !window.FileReader) continue;
      input.closest("label").hidden = false;
      input.addEventListener("change", function (e) {
        var file = e.target.files && e.target.files[0];
        if (!file) return;
        var target = document.getElementById(e.target.getAttribute("data-read-into"));
        var reader = new FileReader();
        reader.onload = function () { target.value = reader.result; };
        reader.readAsText(file);
      });
    }
  }

  function start() {
    copyButtons();
    fileReaders();
    refreshTimes(document);
    setInterval(function () { if (!document.hidden) refreshTimes(document); }, 30000);
    var live = document.getElementById("live");
    if (live && live.getAttribute("data-live-url") && window.fetch && window.DOMParser) watchExecution(live);
    var stream = document.getElementById("stream");
    if (stream && window.EventSource) watchStream(stream);
    var list = document.querySelector("[data-live-list]");
    if (list && window.fetch && window.DOMParser) watchList(list);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
