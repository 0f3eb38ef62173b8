// The pages' live parts: the job page's log (a bounded window of lines,
// the tail followed over server-sent events, earlier lines fetched by byte
// range), timeline and the job's facts, actions and attempts, the runners
// table, a pipeline's graph and steps, and an evaluation's numbers and
// items. Every piece of HTML it inserts was rendered, escaped, by the hub;
// text it sets goes through textContent.
"use strict";
(function () {
  var log = document.getElementById("log");
  var status = document.getElementById("logstatus");
  var earlier = document.getElementById("earlier");
  var toTail = document.getElementById("totail");
  if (log) {
    var job = log.dataset.job, attempt = log.dataset.attempt;
    var max = parseInt(log.dataset.max, 10);
    var start = parseInt(log.dataset.start, 10);
    var following = true, missed = 0;
    var atBottom = function () { return log.scrollHeight - log.scrollTop - log.clientHeight < 40; };
    log.scrollTop = log.scrollHeight;
    // Drops lines from the top (following) or the bottom (reading back)
    // until at most max remain.
    var trim = function (fromTop) {
      var n = log.childElementCount - max;
      for (; n > 0; n--) {
        var el = fromTop ? log.firstElementChild : log.lastElementChild;
        log.removeChild(el);
      }
      if (fromTop && log.firstElementChild) {
        start = parseInt(log.firstElementChild.dataset.o, 10);
        earlier.hidden = start === 0;
      }
    };
    var es;
    if (!log.dataset.complete) {
      es = new EventSource("/jobs/" + encodeURIComponent(job) + "/log/live?attempt=" + attempt + "&from=" + log.dataset.end);
      es.addEventListener("log", function (e) {
        if (!following) {
          missed++;
          status.textContent = "new lines arrived";
          return;
        }
        var stick = atBottom();
        log.insertAdjacentHTML("beforeend", e.data);
        trim(true);
        if (stick) { log.scrollTop = log.scrollHeight; }
        log.dataset.end = e.lastEventId;
      });
      es.addEventListener("end", function () { es.close(); status.textContent = "log complete"; log.dataset.complete = "1"; });
      es.addEventListener("failure", function (e) { es.close(); status.textContent = e.data; });
    }
    earlier.addEventListener("click", function () {
      earlier.disabled = true;
      fetch("/jobs/" + encodeURIComponent(job) + "/log/window?attempt=" + attempt + "&end=" + start, { credentials: "same-origin" })
        .then(function (r) {
          if (!r.ok) { throw new Error("the hub answered " + r.status); }
          start = parseInt(r.headers.get("X-Log-Start"), 10);
          return r.text();
        })
        .then(function (html) {
          var h = log.scrollHeight;
          log.insertAdjacentHTML("afterbegin", html);
          log.scrollTop += log.scrollHeight - h;
          if (log.childElementCount > max) {
            trim(false);
            following = false;
            toTail.hidden = false;
          }
          earlier.hidden = start === 0;
        })
        .catch(function (err) { status.textContent = String(err); })
        .finally(function () { earlier.disabled = false; });
    });
    toTail.addEventListener("click", function () { location.reload(); });
  }

  // liveRegion puts the HTML of each kind event of source into el; an
  // update waits while the user is in one of its forms.
  var liveRegion = function (el, source, kind) {
    var pending = null;
    var busy = function () {
      return el.contains(document.activeElement) || el.querySelector("details[open]") !== null;
    };
    var apply = function () {
      if (pending !== null && !busy()) {
        el.innerHTML = pending;
        pending = null;
      }
    };
    source.addEventListener(kind, function (e) { pending = e.data; apply(); });
    el.addEventListener("focusout", function () { setTimeout(apply, 0); });
    el.addEventListener("toggle", function () { setTimeout(apply, 0); }, true);
  };

  var events = document.getElementById("events");
  if (events) {
    var jobLive = document.getElementById("job-live");
    var ev = new EventSource("/jobs/" + encodeURIComponent(events.dataset.job) + "/events/live?after=" +
      events.dataset.after + "&state=" + encodeURIComponent(events.dataset.state) +
      "&version=" + encodeURIComponent(jobLive.dataset.version));
    ev.addEventListener("ev", function (e) { events.insertAdjacentHTML("beforeend", e.data); });
    ev.addEventListener("state", function (e) {
      // The question and the change are not live: say when to reload.
      if (e.data !== events.dataset.state) { document.getElementById("stale").hidden = false; }
      events.dataset.state = e.data;
    });
    liveRegion(jobLive, ev, "job");
    ev.addEventListener("failure", function () { ev.close(); });
  }

  var runners = document.getElementById("runners-live");
  if (runners) {
    var rs = new EventSource("/runners/live?version=" + encodeURIComponent(runners.dataset.version));
    liveRegion(runners, rs, "runners");
    rs.addEventListener("failure", function () { rs.close(); });
  }

  var pipeline = document.getElementById("pipeline-live");
  if (pipeline) {
    var ps = new EventSource("/pipelines/" + encodeURIComponent(pipeline.dataset.pipeline) + "/live?version=" +
      encodeURIComponent(pipeline.dataset.version));
    liveRegion(pipeline, ps, "pipeline");
    ps.addEventListener("failure", function () { ps.close(); });
  }

  var evalLive = document.getElementById("eval-live");
  if (evalLive) {
    var es = new EventSource("/evals/" + encodeURIComponent(evalLive.dataset.eval) + "/live?version=" +
      encodeURIComponent(evalLive.dataset.version));
    liveRegion(evalLive, es, "eval");
    es.addEventListener("failure", function () { es.close(); });
  }
})();
