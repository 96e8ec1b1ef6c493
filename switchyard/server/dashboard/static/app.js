// Switchyard dashboard: plain JavaScript, no dependencies, no build step.
//
// Safety rule of this file: every string that comes from the server (route and session names,
// prompts, tool names, reasons, errors — many are chosen by whoever sends requests to the proxy)
// reaches the page through text nodes (textContent / createTextNode) or SVG attributes set with
// setAttribute on elements built here. Nothing is ever parsed as HTML.
"use strict";

(function () {
  const KEY_STORE = "switchyard.dashboard.key";
  const SVG_NS = "http://www.w3.org/2000/svg";
  const VIEWS = ["overview", "decisions", "reliability", "sessions", "session"];

  const state = {
    key: sessionStorage.getItem(KEY_STORE),
    view: "overview",
    session: null,
    windowS: null,
    pollS: 5,
    timer: null,
    busy: false,
  };

  // -- DOM helpers ---------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
    for (const child of children) {
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const $ = (id) => document.getElementById(id);

  // -- formatting ----------------------------------------------------------------------------

  const usd = (v) => (v === null || v === undefined ? "—" : (v < 0 ? "-$" : "$") + Math.abs(Number(v)).toFixed(6));
  const pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + "%");
  const ms = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(v < 10 ? 2 : 0) + " ms");
  const usdTick = (v) => (v === 0 ? "$0" : "$" + Number(v).toPrecision(3));
  const int = (v) => (v === null || v === undefined ? "—" : String(v));
  const time = (t) => new Date(t * 1000).toLocaleTimeString();
  const when = (t) => new Date(t * 1000).toLocaleString();

  function short(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value === "number" && !Number.isInteger(value)) return String(Number(value.toPrecision(4)));
    if (typeof value === "object") {
      const text = JSON.stringify(value);
      return text.length > 300 ? text.slice(0, 300) + "…" : text;
    }
    return String(value);
  }

  // A figure: shown formatted, with the raw number in data-value (tests compare it).
  function figure(label, value, fmt, field, hint) {
    return el(
      "div",
      { class: "figure" },
      el("div", { class: "figure-label" }, label),
      el("div", { class: "figure-value", "data-field": field, "data-value": value === null ? "" : value }, fmt(value)),
      hint ? el("div", { class: "figure-hint muted" }, hint) : null
    );
  }

  function table(headers, rows, attrs) {
    return el(
      "table",
      attrs || {},
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows.length ? rows : [el("tr", {}, el("td", { colspan: headers.length, class: "muted" }, "nothing yet"))])
    );
  }

  function totalsRow(name, t, field) {
    return el(
      "tr",
      { "data-row": field },
      el("td", {}, name),
      el("td", { class: "num" }, int(t.requests)),
      el("td", { class: "num" }, pct(t.capable_share)),
      el("td", { class: "num" }, usd(t.total_usd)),
      el("td", { class: "num" }, usd(t.router_usd + t.feature_usd)),
      el("td", { class: "num" }, usd(t.always_capable_usd)),
      el("td", { class: "num" }, usd(t.saved_usd))
    );
  }

  const TOTALS_HEAD = ["", "requests", "capable", "spent", "router + features", "always-capable", "saved"];

  function tierBadge(tier) {
    return el("span", { class: "badge tier-" + (tier === "capable" || tier === "efficient" ? tier : "other") }, tier || "—");
  }

  // -- charts (inline SVG) -------------------------------------------------------------------

  function lineChart(title, points, lines, opts) {
    const W = 640, H = 170, L = 66, R = 12, T = 14, B = 24;
    const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title });
    const t0 = opts.from, t1 = Math.max(opts.to, opts.from + 1), step = opts.step || 0;
    let max = opts.max || 0;
    for (const p of points) for (const line of lines) max = Math.max(max, p[line.key] || 0);
    if (max <= 0) max = 1;
    const x = (t) => L + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    const tick = opts.tick || opts.fmt;
    box.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }));
    box.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
    box.appendChild(svg("line", { x1: L, y1: T, x2: W - R, y2: T, class: "grid" }));
    box.appendChild(svg("text", { x: L - 6, y: T + 4, class: "tick", "text-anchor": "end" }, tick(max)));
    box.appendChild(svg("text", { x: L - 6, y: H - B, class: "tick", "text-anchor": "end" }, tick(0)));
    box.appendChild(svg("text", { x: L, y: H - 6, class: "tick" }, time(t0)));
    box.appendChild(svg("text", { x: W - R, y: H - 6, class: "tick", "text-anchor": "end" }, time(t1)));
    for (const line of lines) {
      const coords = [];
      if (line.cumulative) {
        // A step line from 0 at the window's start: each bucket adds its spend at its end.
        let acc = 0;
        coords.push([x(t0), y(0)]);
        for (const p of points) {
          coords.push([x(p.t), y(acc)]);
          acc += p[line.key] || 0;
          coords.push([x(p.t + step), y(acc)]);
        }
        coords.push([x(t1), y(acc)]);
      } else {
        for (const p of points) coords.push([x(p.t + step / 2), y(p[line.key] || 0)]);
        for (const [cx, cy] of coords) box.appendChild(svg("circle", { cx: cx.toFixed(1), cy: cy.toFixed(1), r: 2.5, class: "dot " + line.cls }));
      }
      if (coords.length > 1) {
        box.appendChild(svg("polyline", { points: coords.map(([a, b]) => a.toFixed(1) + "," + b.toFixed(1)).join(" "), class: "line " + line.cls }));
      }
    }
    const legend = el("div", { class: "legend" }, lines.map((l) => el("span", { class: "key " + l.cls }, l.label)));
    return el("div", { class: "card chart-card" }, el("h3", {}, title), box, legend);
  }

  function cumulativeMax(points, keys) {
    let max = 0;
    for (const key of keys) {
      let acc = 0;
      for (const p of points) acc += p[key] || 0;
      max = Math.max(max, acc);
    }
    return max;
  }

  function bars(rows, fmt) {
    // rows: [{label, value, share}] — share in [0, 1]
    const W = 640, rowH = 22, L = 230, H = Math.max(rowH, rows.length * rowH);
    const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "bars", role: "img", "aria-label": "shares" });
    rows.forEach((r, i) => {
      const yy = i * rowH;
      box.appendChild(svg("text", { x: L - 8, y: yy + 15, class: "tick", "text-anchor": "end" }, r.label));
      box.appendChild(svg("rect", { x: L, y: yy + 4, width: Math.max(1, r.share * (W - L - 80)), height: rowH - 8, class: "bar" }));
      box.appendChild(svg("text", { x: L + r.share * (W - L - 80) + 6, y: yy + 15, class: "tick" }, fmt(r)));
    });
    return box;
  }

  // -- data ------------------------------------------------------------------------------------

  async function api(path) {
    const headers = { Accept: "application/json" };
    if (state.key) headers.Authorization = "Bearer " + state.key;
    const res = await fetch(path, { headers, cache: "no-store", credentials: "omit", redirect: "error" });
    if (res.status === 401) {
      showLogin(state.key ? "That key was not accepted." : null);
      throw new Error("unauthorized");
    }
    if (!res.ok) {
      let error = { message: "HTTP " + res.status, code: null };
      try {
        error = (await res.json()).error;
      } catch (e) {
        /* keep the status */
      }
      if (error.code === "not_admin") {
        showLogin(error.message);
        throw new Error("unauthorized");
      }
      throw new Error(error.message);
    }
    return res.json();
  }

  function windowQuery() {
    return state.windowS ? "?window_s=" + encodeURIComponent(state.windowS) : "";
  }

  // -- views -----------------------------------------------------------------------------------

  function renderReplica(data) {
    const r = data.replica;
    const node = clear($("replica"));
    const mode = r.mode === "offline" ? "offline over " + (r.source || "a decision log") : "live";
    append(node, [
      el("span", { class: "muted" }, "Replica "),
      el("strong", { "data-field": "replica.id" }, r.id),
      el("span", { class: "muted" }, " · " + mode + " · since " + when(r.started)),
    ]);
    if (data.fleet && data.fleet.replicas) {
      append(node, [el("span", { class: "muted" }, " · " + data.fleet.replicas.length + " replica(s) share the state store")]);
    }
  }

  function renderOverview(data) {
    const view = clear($("view-overview"));
    const since = data.since_start.usd.total;
    const win = data.window;
    const w = win.total;
    const windowNote = win.covers_whole_window ? "" : " (partial: " + partialWhy(data) + ")";
    append(view, [
      el("h2", {}, data.replica.mode === "offline" ? "Whole log" : "Since start"),
      el(
        "div",
        { class: "figures", "data-block": "since" },
        figure("Requests", since.requests, int, "since.requests"),
        figure("Spent", since.total_usd, usd, "since.total_usd", "answers + router + features"),
        figure("Always-capable", since.always_capable_usd, usd, "since.always_capable_usd", "same tokens at the capable price"),
        figure("Saved", since.saved_usd, usd, "since.saved_usd", since.saved_share === null ? "" : pct(since.saved_share) + " of always-capable"),
        figure("Capable share", since.capable_share, pct, "since.capable_share"),
        figure("Router + features", since.router_usd + since.feature_usd, usd, "since.router_usd")
      ),
      data.fleet ? renderFleet(data.fleet) : null,
      el("h2", {}, "Last " + windowLabel(win.window_s) + windowNote),
      el(
        "div",
        { class: "figures", "data-block": "window" },
        figure("Requests", w.requests, int, "window.requests"),
        figure("Spent", w.total_usd, usd, "window.total_usd"),
        figure("Always-capable", w.always_capable_usd, usd, "window.always_capable_usd"),
        figure("Saved", w.saved_usd, usd, "window.saved_usd"),
        figure("Capable share", w.capable_share, pct, "window.capable_share")
      ),
      el(
        "div",
        { class: "charts" },
        lineChart("Spend vs always-capable (cumulative over the window)", win.series, [
          { key: "always_capable_usd", label: "always-capable", cls: "baseline", cumulative: true },
          { key: "total_usd", label: "spent", cls: "spent", cumulative: true },
        ], { from: win.from, to: win.to, step: win.step_s, fmt: usd, tick: usdTick, max: cumulativeMax(win.series, ["total_usd", "always_capable_usd"]) }),
        lineChart("Capable share", win.series, [{ key: "capable_share", label: "capable share", cls: "share" }], {
          from: win.from, to: win.to, step: win.step_s, fmt: pct, max: 1,
        })
      ),
      el("h3", {}, "Per route — since start"),
      table(TOTALS_HEAD, Object.entries(data.since_start.usd.routes).map(([n, t]) => totalsRow(n, t, "since-route:" + n)), { "data-table": "since-routes" }),
      el("h3", {}, "Per route — window"),
      table(TOTALS_HEAD, Object.entries(win.routes).map(([n, t]) => totalsRow(n, t, "window-route:" + n)), { "data-table": "window-routes" }),
      el("h3", {}, "Per target — window"),
      table(TOTALS_HEAD, Object.entries(win.targets).map(([n, t]) => totalsRow(n, t, "window-target:" + n)), { "data-table": "window-targets" }),
    ]);
  }

  function renderFleet(fleet) {
    const t = fleet.total;
    return [
      el("h2", {}, "All replicas (shared state store) — " + fleet.replicas.length + " heard from in the last " + Math.round(3 * fleet.every_s) + " s"),
      el(
        "div",
        { class: "figures", "data-block": "fleet" },
        figure("Requests", t.requests, int, "fleet.requests"),
        figure("Spent", t.total_usd, usd, "fleet.total_usd"),
        figure("Always-capable", t.always_capable_usd, usd, "fleet.always_capable_usd"),
        figure("Saved", t.saved_usd, usd, "fleet.saved_usd"),
        figure("Capable share", t.capable_share, pct, "fleet.capable_share")
      ),
      table(["replica", "since", "requests", "last heard"], fleet.replicas.map((r) =>
        el("tr", {}, el("td", {}, r.id), el("td", {}, when(r.started)), el("td", { class: "num" }, int(r.requests)), el("td", {}, time(r.at))))),
    ];
  }

  function partialWhy(data) {
    if (data.window.missed_records) return data.window.missed_records + " records left memory unseen";
    return data.replica.mode === "offline" ? "the log's span" : "this process started within the window";
  }

  function windowLabel(s) {
    const round = (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
    if (s >= 86400 * 2) return round(s / 86400) + " days";
    if (s >= 3600) return round(s / 3600) + " h";
    if (s >= 60) return round(s / 60) + " min";
    return Math.round(s) + " s";
  }

  function renderDecisions(data) {
    const view = clear($("view-decisions"));
    const sources = data.window.sources;
    const byRoute = {};
    for (const s of sources) (byRoute[s.route] = byRoute[s.route] || []).push(s);
    append(view, [
      el("h2", {}, "Decision sources — last " + windowLabel(data.window.window_s)),
      el("p", { class: "muted" }, "Why each request went where it went: override, hold, tests_passed, cascade stage, advisor approve/redo, escalation, fall_open …"),
      el("div", { class: "card" }, bars(sources.map((s) => ({ label: s.route + " · " + s.source, share: s.share, n: s.requests })), (r) => pct(r.share) + " (" + r.n + ")")),
      Object.entries(byRoute).map(([route, rows]) => {
        const total = rows.reduce((a, r) => a + r.requests, 0);
        return el(
          "div",
          { class: "card" },
          el("h3", {}, "Route " + route),
          table(
            ["source", "requests", "share of route", "share of all"],
            rows.map((r) => el("tr", { "data-row": "source:" + r.route + ":" + r.source },
              el("td", {}, r.source), el("td", { class: "num" }, int(r.requests)),
              el("td", { class: "num" }, pct(r.requests / total)), el("td", { class: "num" }, pct(r.share))))
          )
        );
      }),
      experimentCards(data.experiment),
    ]);
  }

  // A mean or difference with its 95 % interval: "0.41 [0.37, 0.45]".
  function interval(found, key, fmt) {
    if (!found || found[key] === null || found[key] === undefined) return "—";
    if (found.low === null || found.low === undefined) return fmt(found[key]);
    return fmt(found[key]) + " [" + fmt(found.low) + ", " + fmt(found.high) + "]";
  }

  const num3 = (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(3));

  // Shadow's predicted share of the baseline's cost, with its bootstrap interval once mirrors measured it.
  function shadowShare(shadow) {
    const b = shadow.predicted_saved_share_interval;
    return pct(shadow.predicted_saved_share) + (b && b.low !== null && b.low !== undefined ? " [" + pct(b.low) + ", " + pct(b.high) + "]" : "");
  }

  // What shadow's prediction rests on: mirrored sessions (and what they cost), or equal verbosity.
  function shadowBasis(shadow) {
    if (shadow.basis !== "mirrors") {
      return "assumes the chosen targets write as much as the baseline (no mirrored session: set experiment.mirror_share)";
    }
    return "corrected by " + int(shadow.mirrored_sessions) + " mirrored sessions (" + int(shadow.mirrored_requests) +
      " requests): would-be cost / priced estimate " + interval(shadow.cost_ratio, "mean", num3) +
      "; at equal verbosity " + pct(shadow.equal_verbosity.predicted_saved_share) +
      "; mirrors cost " + usd(shadow.mirror_cost_usd);
  }

  // Routes with an experiment: block (docs/rollout.md): arms, routed vs control, shadow's saving.
  function experimentCards(experiment) {
    const routes = Object.entries(experiment || {});
    if (!routes.length) return [];
    return [
      el("h2", {}, "Experiments — routed vs control (records in memory)"),
      el("p", { class: "muted" }, "Per session, with 95 % intervals; outcomes from POST /v1/feedback. See docs/rollout.md."),
      routes.map(([route, view]) => {
        const rows = Object.entries(view.arms).map(([arm, a]) => el("tr", { "data-row": "experiment:" + route + ":" + arm },
          el("td", {}, arm), el("td", { class: "num" }, int(a.sessions)), el("td", { class: "num" }, int(a.requests)),
          el("td", { class: "num" }, interval(a.cost_per_session, "mean", usd)), el("td", { class: "num" }, int(a.with_feedback)),
          el("td", { class: "num" }, interval(a.resolved, "mean", pct)), el("td", { class: "num" }, interval(a.score, "mean", num3))));
        const vs = view.routed_vs_control;
        const shadow = view.shadow;
        return el(
          "div",
          { class: "card", "data-experiment": route },
          el("h3", {}, "Route " + route),
          table(["arm", "sessions", "requests", "$ / session", "with feedback", "resolved", "mean score"], rows),
          vs ? el("p", { "data-field": "routed-vs-control:" + route },
            "routed − control: $ / session " + interval(vs.cost_per_session, "diff", usd) +
            (vs.resolved ? "; resolved " + interval(vs.resolved, "diff", pct) : "") +
            (vs.score ? "; score " + interval(vs.score, "diff", num3) : "")) : null,
          shadow ? el("p", { "data-field": "shadow-saving:" + route },
            "shadow: predicted saving per session " + interval(shadow.predicted_saving_per_session, "mean", usd) +
            " (" + shadowShare(shadow) + " of the baseline's cost)") : null,
          shadow ? el("p", { class: "muted small", "data-field": "shadow-basis:" + route }, shadowBasis(shadow)) : null
        );
      }),
    ];
  }

  function renderReliability(data) {
    const view = clear($("view-reliability"));
    const lat = data.window.latency;
    const rel = data.window.reliability;
    const counters = (data.since_start.reliability || {}).counters || {};
    const latRow = (name, h, hint) => el("tr", {}, el("td", {}, name, el("div", { class: "muted small" }, hint)),
      el("td", { class: "num" }, int(h.count)), el("td", { class: "num" }, ms(h.p50)), el("td", { class: "num" }, ms(h.p90)),
      el("td", { class: "num" }, ms(h.p99)), el("td", { class: "num" }, ms(h.max)));
    const errorRows = Object.entries(rel.errors);
    const maxErr = errorRows.reduce((a, [, n]) => Math.max(a, n), 0) || 1;
    append(view, [
      el("h2", {}, "Latency — last " + windowLabel(data.window.window_s)),
      table(["", "requests", "p50", "p90", "p99", "max"], [
        latRow("Routing overhead", lat.overhead_ms, "time the router took before the answer call (judges included)"),
        latRow("Upstream", lat.upstream_ms, "the answering attempt (streams: to first content)"),
        latRow("Whole request", lat.duration_ms, "first byte in to last byte out"),
      ], { "data-table": "latency" }),
      el("h2", {}, "Fallbacks, retries and errors — last " + windowLabel(data.window.window_s)),
      el("div", { class: "figures" },
        figure("Upstream attempts", rel.attempts, int, "window.attempts"),
        figure("Retries", rel.retries, int, "window.retries"),
        figure("Fallbacks", rel.fallbacks, int, "window.fallbacks"),
        figure("Failed requests", rel.failed_requests, int, "window.failed_requests"),
        figure("Router calls", rel.router_calls, int, "window.router_calls", rel.router_failures + " failed")),
      el("h3", {}, "Failed attempts by error class"),
      el("div", { class: "card" }, errorRows.length
        ? bars(errorRows.map(([c, n]) => ({ label: c, share: n / maxErr, n })), (r) => String(r.n))
        : el("p", { class: "muted" }, "no failed attempts in the window")),
      el("h3", {}, "Since start (reliability counters)"),
      table(["counter", "value"], Object.entries(counters).map(([k, v]) =>
        el("tr", { "data-row": "counter:" + k }, el("td", {}, k), el("td", { class: "num" }, int(v)))), { "data-table": "counters" }),
    ]);
  }

  function renderSessions(data) {
    const view = clear($("view-sessions"));
    // With inbound keys every session belongs to a tenant: one id may appear once per tenant.
    const tenanted = data.sessions.some((s) => s.tenant);
    const rows = data.sessions.map((s) =>
      el("tr", { "data-session": s.key },
        el("td", {}, el("a", { href: "#session=" + encodeURIComponent(s.key), class: "session-link" }, s.session_id)),
        tenanted ? el("td", { "data-field": "tenant" }, s.tenant || "—") : null,
        el("td", {}, s.route),
        el("td", {}, s.agents.length ? s.agents.join(", ") : "—"),
        el("td", { class: "num" }, int(s.turns)),
        el("td", {}, s.escalated ? el("span", { class: "badge tier-capable" }, "escalated · " + s.capable_turns) : el("span", { class: "badge tier-efficient" }, "no")),
        el("td", { class: "num" }, usd(s.total_usd)),
        el("td", { class: "num" }, usd(s.always_capable_usd)),
        el("td", {}, s.last_source),
        el("td", {}, time(s.last_ts)))
    );
    append(view, [
      el("h2", {}, "Recent sessions"),
      table(["session", ...(tenanted ? ["tenant"] : []), "route", "agent", "turns", "escalated", "cost", "always-capable", "last source", "last active"], rows, { "data-table": "sessions" }),
    ]);
  }

  // Nested objects one level deep become "outer.inner" rows (a judge's verdict, an advisor's state).
  function flatten(obj) {
    const out = {};
    for (const [k, v] of Object.entries(obj || {})) {
      if (v && typeof v === "object" && !Array.isArray(v)) {
        for (const [k2, v2] of Object.entries(v)) out[k + "." + k2] = v2;
      } else {
        out[k] = v;
      }
    }
    return out;
  }

  function kv(obj) {
    const entries = Object.entries(flatten(obj));
    if (!entries.length) return el("span", { class: "muted" }, "—");
    return el("dl", { class: "kv" }, entries.map(([k, v]) => [el("dt", {}, k), el("dd", {}, short(v))]));
  }

  function renderSession(data) {
    const view = clear($("view-session"));
    const s = data.session;
    const head = s
      ? el("div", { class: "figures" },
          figure("Turns", s.turns, int, "session.turns"),
          figure("Capable turns", s.capable_turns, int, "session.capable_turns"),
          figure("Cost", s.total_usd, usd, "session.total_usd"),
          figure("Always-capable", s.always_capable_usd, usd, "session.always_capable_usd"))
      : null;
    const turns = data.turns.map((t, i) =>
      el("article", { class: "turn card", "data-turn": i },
        el("div", { class: "turn-head" },
          el("span", { class: "turn-no" }, "turn " + t.turn), tierBadge(t.tier),
          el("span", { class: "target", "data-field": "turn.selected" }, t.selected || "—"),
          el("span", { class: "muted" }, t.model || ""),
          el("span", { class: "source", "data-field": "turn.source" }, t.source),
          el("span", { class: "muted right" }, time(t.ts) + (t.agent ? " · agent " + t.agent : ""))),
        t.prompt ? el("pre", { class: "prompt", "data-field": "turn.prompt" }, t.prompt) : null,
        el("p", { class: "reason", "data-field": "turn.reason" }, t.reason || ""),
        el("div", { class: "turn-grid" },
          el("div", {}, el("h4", {}, "Signals the router read"), kv(t.signals)),
          el("div", {}, el("h4", {}, "Judge / advisor verdict"), kv(t.verdict)),
          el("div", {}, el("h4", {}, "Tokens & cost"), kv({
            input: t.input_tokens, output: t.output_tokens, cache_read: t.cache_read_tokens,
            cost: usd(t.cost_usd), router: usd(t.router_usd) + " (" + t.router_calls + " calls)",
            "always-capable": usd(t.always_capable_usd),
          })),
          el("div", {}, el("h4", {}, "Serving"), kv({
            status: t.status, overhead: ms(t.overhead_ms), duration: ms(t.duration_ms), fallbacks: t.fallbacks,
            attempts: t.attempts.length
              ? t.attempts.map((a) => a.target + (a.ok ? " ok" : " " + (a.error_class || "failed")) + (a.retry ? " (retry " + a.retry + ")" : "")).join(", ")
              : "none: the router's own call answered",
            error: t.error,
          })),
          Object.keys(t.details).length ? el("div", {}, el("h4", {}, "Other details"), kv(t.details)) : null))
    );
    append(view, [
      el("p", {}, el("a", { href: "#sessions" }, "← all sessions")),
      el("h2", {}, "Session ", el("span", { "data-field": "session.id" }, s ? s.session_id : ""), s ? el("span", { class: "muted" }, " on route " + s.route + (s.tenant ? " · tenant " + s.tenant : "")) : null),
      head,
      data.turns_not_in_memory ? el("p", { class: "muted" }, data.turns_not_in_memory + " earlier turn(s) are no longer in memory.") : null,
      el("div", { class: "timeline", "data-table": "timeline" }, turns),
    ]);
  }

  // -- the loop ---------------------------------------------------------------------------------

  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    $("live").classList.add("busy");
    try {
      if (state.view === "sessions") {
        const data = await api("api/sessions?limit=100");
        renderReplica(data);
        renderSessions(data);
      } else if (state.view === "session") {
        const data = await api("api/session?key=" + encodeURIComponent(state.session || ""));
        renderReplica(data);
        renderSession(data);
      } else {
        const data = await api("api/summary" + windowQuery());
        state.pollS = data.poll_s || state.pollS;
        if (!state.windowS) {
          state.windowS = data.window.window_s;
          const select = $("window");
          if (![...select.options].some((o) => o.value === String(state.windowS))) {
            select.appendChild(el("option", { value: state.windowS }, windowLabel(state.windowS)));
          }
          select.value = String(state.windowS);
        }
        renderReplica(data);
        if (state.view === "overview") renderOverview(data);
        if (state.view === "decisions") renderDecisions(data);
        if (state.view === "reliability") renderReliability(data);
      }
      hideNotice();
      document.body.setAttribute("data-loaded", state.view);
    } catch (err) {
      if (err.message !== "unauthorized") showNotice(err.message);
    } finally {
      state.busy = false;
      $("live").classList.remove("busy");
    }
  }

  function schedule() {
    clearTimeout(state.timer);
    // A hidden tab does not poll: an open but unwatched page costs the server nothing.
    if (document.hidden || !$("login").hidden) return;
    state.timer = setTimeout(async () => {
      await refresh();
      schedule();
    }, state.pollS * 1000);
  }

  function route() {
    const hash = location.hash.replace(/^#/, "");
    if (hash.startsWith("session=")) {
      state.view = "session";
      try {
        state.session = decodeURIComponent(hash.slice("session=".length));
      } catch (e) {
        state.session = ""; // a hand-edited, malformed link: the server answers 404
      }
    } else {
      state.view = VIEWS.includes(hash) && hash !== "session" ? hash : "overview";
    }
    for (const v of VIEWS) $("view-" + v).hidden = v !== state.view;
    for (const a of document.querySelectorAll("nav.tabs a")) {
      const on = a.dataset.view === state.view || (state.view === "session" && a.dataset.view === "sessions");
      a.classList.toggle("active", on);
    }
    document.body.removeAttribute("data-loaded");
    refresh().then(schedule);
  }

  function showLogin(message) {
    $("login").hidden = false;
    $("main").hidden = true;
    $("logout").hidden = true;
    const error = $("login-error");
    error.hidden = !message;
    error.textContent = message || "";
    $("login-key").focus();
  }

  function showNotice(message) {
    const n = $("notice");
    n.textContent = "Could not refresh: " + message;
    n.hidden = false;
  }

  function hideNotice() {
    $("notice").hidden = true;
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.key = $("login-key").value.trim();
    $("login-key").value = "";
    sessionStorage.setItem(KEY_STORE, state.key);
    $("login").hidden = true;
    $("main").hidden = false;
    $("logout").hidden = false;
    route();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    state.key = null;
    showLogin(null);
  });
  $("window").addEventListener("change", (event) => {
    state.windowS = Number(event.target.value);
    refresh();
  });
  document.addEventListener("visibilitychange", () => (document.hidden ? clearTimeout(state.timer) : refresh().then(schedule)));
  window.addEventListener("hashchange", route);
  $("logout").hidden = !state.key;
  route();
})();
