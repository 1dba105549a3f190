/* Conveyor docs: draw the data-only chart divs and the connection calculator.
 *
 * Pages carry <div class="cv-chart" data-cv-chart="{plotly data+layout JSON}"> and
 * <div class="cv-calc" data-cv-calc="{...}">. This one script draws them on every page view:
 * it subscribes to Material's document$, which emits on first load and after each instant
 * navigation. Charts are re-themed when the palette (data-md-color-scheme) changes.
 * plotly.js (4.8 MB) is loaded from the site itself, once, by the first page view that has a
 * chart (its URL comes from docs/overrides/main.html): pages without one never fetch it.
 */
(function () {
  "use strict";

  var observed = null;

  function cssVar(name, fallback) {
    var value = getComputedStyle(document.body).getPropertyValue(name).trim();
    return value || fallback;
  }

  function theme() {
    var fg = cssVar("--md-default-fg-color", "#222");
    var grid = cssVar("--md-default-fg-color--lightest", "rgba(128,128,128,0.2)");
    var axis = { color: fg, gridcolor: grid, zerolinecolor: grid, linecolor: grid };
    return {
      "paper_bgcolor": "rgba(0,0,0,0)",
      "plot_bgcolor": "rgba(0,0,0,0)",
      "font.color": fg,
      "title.font.color": fg,
      "legend.font.color": fg,
      "xaxis.color": axis.color,
      "xaxis.gridcolor": axis.gridcolor,
      "xaxis.zerolinecolor": axis.zerolinecolor,
      "yaxis.color": axis.color,
      "yaxis.gridcolor": axis.gridcolor,
      "yaxis.zerolinecolor": axis.zerolinecolor
    };
  }

  function applyTheme(layout) {
    var t = theme();
    Object.keys(t).forEach(function (path) {
      var parts = path.split(".");
      var node = layout;
      for (var i = 0; i < parts.length - 1; i++) {
        node[parts[i]] = node[parts[i]] || {};
        node = node[parts[i]];
      }
      node[parts[parts.length - 1]] = t[path];
    });
    return layout;
  }

  function drawChart(div) {
    if (div.getAttribute("data-cv-drawn") === "1") {
      return;
    }
    var spec = JSON.parse(div.getAttribute("data-cv-chart"));
    var layout = applyTheme(spec.layout || {});
    layout.autosize = true;
    layout.margin = { l: 70, r: 20, t: 50, b: 60 };
    var config = { responsive: true, displaylogo: false };
    Plotly.newPlot(div, spec.data, layout, config).then(function () {
      div.setAttribute("data-cv-drawn", "1");
    });
  }

  function retheme() {
    document.querySelectorAll(".cv-chart[data-cv-drawn='1']").forEach(function (div) {
      Plotly.relayout(div, theme());
    });
  }

  function watchPalette() {
    if (observed === document.body) {
      return;
    }
    observed = document.body;
    new MutationObserver(retheme).observe(document.body, {
      attributes: true,
      attributeFilter: ["data-md-color-scheme", "data-md-color-primary"]
    });
  }

  /* ---------------------------------------------------------------- calculator */

  function number(form, name) {
    var value = parseFloat(form.querySelector("[name='" + name + "']").value);
    return isFinite(value) && value >= 0 ? value : 0;
  }

  function formatBytes(bytes) {
    var units = ["B", "KiB", "MiB", "GiB"];
    var i = 0;
    while (bytes >= 1024 && i < units.length - 1) {
      bytes /= 1024;
      i++;
    }
    return (i === 0 ? bytes.toFixed(0) : bytes.toFixed(1)) + " " + units[i];
  }

  function perProcess(roles, concurrency) {
    return roles.reduce(function (sum, role) {
      if (role.steps) {  // measured counts: the one at the largest measured concurrency <= this one
        var count = role.steps[0][1];
        role.steps.forEach(function (step) { if (step[0] <= concurrency) { count = step[1]; } });
        return sum + count;
      }
      return sum + role.base + role.per_concurrency * concurrency;
    }, 0);
  }

  // Connections the queues past the first add to a worker process: each queue's worker holds its
  // own pump and maint connections (the idle waiter is shared), counted at the same concurrency.
  function extraQueues(queueRoles, queues, concurrency) {
    return perProcess(queueRoles, concurrency) * Math.max(0, queues - 1);
  }

  function compute(div, spec) {
    var form = div.querySelector("form");
    var workers = number(form, "workers");
    var concurrency = number(form, "concurrency");
    var producers = number(form, "producers");
    var producerPool = number(form, "producer_pool");
    var perConn = number(form, "bytes_per_connection");
    var queueRoles = spec.roles.filter(function (role) {
      return (spec.per_queue || []).indexOf(role.role) >= 0;
    });
    var queues = queueRoles.length ? Math.max(1, number(form, "queues")) : 1;
    var perWorker = spec.roles.length
      ? Math.ceil(perProcess(spec.roles, concurrency) + extraQueues(queueRoles, queues, concurrency))
      : number(form, "per_worker_input");
    var total = workers * perWorker + producers * producerPool;
    var maxclients = Math.ceil(total * (1 + spec.headroom)) + spec.reserved;
    var out = {
      per_worker: String(perWorker),
      total: String(total),
      maxclients: String(maxclients),
      memory: perConn > 0 ? formatBytes(total * perConn) : "enter bytes per connection"
    };
    Object.keys(out).forEach(function (key) {
      div.querySelector("[data-out='" + key + "']").textContent = out[key];
    });
  }

  function drawCalculator(div) {
    if (div.getAttribute("data-cv-drawn") === "1") {
      return;
    }
    var spec = JSON.parse(div.getAttribute("data-cv-calc"));
    var form = div.querySelector("form");
    form.addEventListener("input", function () { compute(div, spec); });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    compute(div, spec);
    div.setAttribute("data-cv-drawn", "1");
  }

  var plotlyLoading = null;

  // Run `then` once plotly.js is loaded, adding its script to <head> the first time.
  function withPlotly(then) {
    if (typeof Plotly !== "undefined") {
      then();
      return;
    }
    if (!plotlyLoading) {
      plotlyLoading = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = window.cvPlotlyUrl;
        script.onload = resolve;
        script.onerror = function () {
          plotlyLoading = null;  // a later page view tries again
          reject(new Error("cannot load " + window.cvPlotlyUrl));
        };
        document.head.appendChild(script);
      });
    }
    plotlyLoading.then(then, function (error) {
      console.error("Conveyor charts: plotly.js is not loaded: " + error.message);
    });
  }

  function drawAll() {
    document.querySelectorAll(".cv-calc").forEach(drawCalculator);
    if (!document.querySelector(".cv-chart")) {
      return;
    }
    withPlotly(function () {
      // the page the charts were on may have been left meanwhile: draw what is there now
      document.querySelectorAll(".cv-chart").forEach(drawChart);
      watchPalette();
    });
  }

  if (typeof document$ !== "undefined") {
    document$.subscribe(drawAll);
  } else {
    document.addEventListener("DOMContentLoaded", drawAll);
  }
})();
