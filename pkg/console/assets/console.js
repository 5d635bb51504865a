// Slipway console: follow a job's events and a running rollout over
// Server-Sent Events. Text is added with textContent, never as markup.
(function () {
  "use strict";
  var ev = document.getElementById("events");
  if (ev && ev.dataset.src) {
    var s = new EventSource(ev.dataset.src);
    var status = document.getElementById("events-status");
    s.addEventListener("line", function (m) {
      var li = document.createElement("li");
      li.textContent = m.data;
      li.setAttribute("data-seq", m.lastEventId);
      ev.appendChild(li);
    });
    s.addEventListener("end", function (m) {
      if (status) { status.textContent = "stream ended: " + m.data; }
      s.close();
    });
    s.addEventListener("failure", function (m) {
      if (status) { status.textContent = "stream failed: " + m.data; }
      s.close();
    });
  }
  var tl = document.getElementById("timeline");
  if (tl && tl.dataset.src) {
    var r = new EventSource(tl.dataset.src);
    r.addEventListener("timeline", function (m) {
      var steps = JSON.parse(m.data);
      var list = document.createElement("ol");
      list.className = "timeline";
      steps.forEach(function (st) {
        var li = document.createElement("li");
        li.className = "step-" + st.result.replace(/ /g, "-");
        li.setAttribute("data-step", st.number);
        li.setAttribute("data-result", st.result);
        li.textContent = st.text;
        list.appendChild(li);
      });
      tl.replaceChildren(list);
    });
    r.addEventListener("end", function (m) {
      var o = document.getElementById("outcome");
      if (o) { o.textContent = m.data; }
      r.close();
    });
  }
})();
