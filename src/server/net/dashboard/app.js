// The dashboard: polls /v1/status once a second and draws it. The charts
// draw the history the server keeps (a sample a second for the last hour,
// a minute for the last day): the first poll asks for all of it
// (?history=1), later ones for the samples after the last one held, so the
// charts are full on first paint and stay current. Queue depth per queue
// (waiting + in flight) is kept here for the last five minutes and drawn
// as an inline SVG line. With requirepass, the page asks for the password
// and sends it as a bearer token (kept in sessionStorage for the tab).
"use strict";
const POLL_MS = 1000;
const HISTORY_MS = 5 * 60 * 1000;
const depth = new Map();   // queue name -> [[t, depth], ...]
let lastSyncs = null;
// The server's history, as it sends it: per ring, columns by series name.
const hist = { seconds: null, minutes: null };
const RING_CAP = { seconds: 3600, minutes: 1440 };
const COLORS = ["#2f6fdf", "#d9822b", "#3a9d5d", "#8e5cc4"];
const CHARTS = [
  ["ch-throughput", [["kv_per_s", "KV"], ["queue_per_s", "queue"], ["coord_per_s", "locks, leaders"], ["other_per_s", "other"]]],
  ["ch-latency", [["apply_p50_us", "apply p50"], ["apply_p99_us", "apply p99"], ["sync_mean_us", "sync mean"]]],
  ["ch-depth", [["queue_depth", "queued"]]],
  ["ch-oldest", [["oldest_ready_ms", "oldest ready"]]],
  ["ch-errors", [["errors_per_s", "errors/s"], ["clients", "clients"]]],
  ["ch-lag", [["lag_entries", "lag"]]],
];

const $ = (id) => document.getElementById(id);
const text = (v) => document.createTextNode(String(v));
// A key or name from JSON: the string, or its base64 form marked as such.
const name = (o, f) => (o[f] !== undefined ? o[f] : "base64:" + o[f + "_b64"]);

function cell(tr, v, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  if (v instanceof Node) td.appendChild(v); else td.appendChild(text(v));
  tr.appendChild(td);
}

function fill(table, rows, render) {
  const body = table.querySelector("tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = document.createElement("tr");
    render(tr, r);
    body.appendChild(tr);
  }
}

function spark(points) {
  const ns = "http://www.w3.org/2000/svg";
  const w = 160, h = 28, svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  const now = Date.now();
  const max = Math.max(1, ...points.map((p) => p[1]));
  const pl = document.createElementNS(ns, "polyline");
  pl.setAttribute("points", points.map((p) =>
    (w - (now - p[0]) / HISTORY_MS * w).toFixed(1) + "," + (h - 1 - p[1] / max * (h - 2)).toFixed(1)).join(" "));
  svg.appendChild(pl);
  const t = document.createElementNS(ns, "title");
  t.textContent = "max " + max;
  svg.appendChild(t);
  return svg;
}

// Append the samples of add (columns) newer than ring's last, keeping at
// most cap.
function merge(ring, add, cap) {
  if (!add || !add.t) return ring;
  if (!ring) ring = Object.fromEntries(Object.keys(add).map((k) => [k, []]));
  const last = ring.t.length ? ring.t[ring.t.length - 1] : -1;
  let i = 0;
  while (i < add.t.length && add.t[i] <= last) i++;
  for (const k of Object.keys(add)) {
    if (!ring[k]) ring[k] = [];
    ring[k].push(...add[k].slice(i));
    if (ring[k].length > cap) ring[k].splice(0, ring[k].length - cap);
  }
  return ring;
}

function fmt(v) {
  return v >= 1e6 ? (v / 1e6).toFixed(1) + "M" : v >= 1e4 ? (v / 1e3).toFixed(0) + "k" : String(Math.round(v * 10) / 10);
}

function clock(t) { return new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }); }

// One chart: a line per series over the ring's time, y from 0 to the max.
// data-points says how many samples it drew (the tests read it).
function chart(fig, ring, series) {
  const ns = "http://www.w3.org/2000/svg", W = 600, H = 150, L = 44, B = 16;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const n = ring && ring.t ? ring.t.length : 0;
  fig.dataset.points = n;
  let max = 1;
  for (const [k] of series) for (let i = 0; n && i < n; i++) max = Math.max(max, ring[k][i]);
  const t0 = n ? ring.t[0] : 0, t1 = n ? Math.max(ring.t[n - 1], t0 + 1) : 1;
  const x = (t) => L + (t - t0) / (t1 - t0) * (W - L - 4), y = (v) => H - B - Math.max(0, v) / max * (H - B - 8);
  for (const f of [0, 0.5, 1]) {
    const g = document.createElementNS(ns, "line");
    g.setAttribute("class", "grid");
    g.setAttribute("x1", L); g.setAttribute("x2", W); g.setAttribute("y1", y(max * f)); g.setAttribute("y2", y(max * f));
    svg.appendChild(g);
    const lb = document.createElementNS(ns, "text");
    lb.setAttribute("class", "axis"); lb.setAttribute("x", 2); lb.setAttribute("y", y(max * f) + 3);
    lb.textContent = fmt(max * f);
    svg.appendChild(lb);
  }
  if (n) {
    for (const [tx, anchor, t] of [[L, "start", t0], [W - 2, "end", t1]]) {
      const lb = document.createElementNS(ns, "text");
      lb.setAttribute("class", "axis"); lb.setAttribute("x", tx); lb.setAttribute("y", H - 3);
      lb.setAttribute("text-anchor", anchor); lb.textContent = clock(t);
      svg.appendChild(lb);
    }
  }
  series.forEach(([k], i) => {
    if (!n) return;
    const pl = document.createElementNS(ns, "polyline");
    pl.setAttribute("class", "s");
    pl.setAttribute("stroke", COLORS[i % COLORS.length]);
    pl.setAttribute("points", ring.t.map((t, j) => x(t).toFixed(1) + "," + y(ring[k][j]).toFixed(1)).join(" "));
    svg.appendChild(pl);
  });
  const legend = document.createElement("div");
  legend.className = "legend";
  series.forEach(([k, label], i) => {
    const s = document.createElement("span");
    const sw = document.createElement("i");
    sw.style.background = COLORS[i % COLORS.length];
    s.appendChild(sw);
    s.appendChild(text(label + (n ? " " + fmt(ring[k][n - 1]) : "")));
    legend.appendChild(s);
  });
  fig.replaceChildren(fig.querySelector("figcaption"), svg, legend);
}

function drawCharts() {
  const ring = hist[$("range").value];
  for (const [id, series] of CHARTS) chart($(id), ring, series);
  const lag = hist.seconds && hist.seconds.lag_entries;
  $("ch-lag").hidden = !lag || lag.every((v) => v < 0);
}

// An action: asks to confirm `what`, then sends method path with the
// page's credentials and says how it went (the next poll shows the state).
function authHeaders() {
  const headers = {};
  const pw = sessionStorage.getItem("ordo-password");
  if (pw) headers.Authorization = "Bearer " + pw;
  return headers;
}

async function act(what, method, path) {
  if (!window.confirm(what + "?")) return;
  const msg = $("actionmsg");
  try {
    const r = await fetch(path, { method, headers: authHeaders(), cache: "no-store" });
    const body = await r.text();
    let detail = body;
    try { const j = JSON.parse(body); detail = j.detail || JSON.stringify(j); } catch (e) { /* text */ }
    msg.textContent = what + ": " + (r.ok ? "done " : "refused (" + r.status + ") ") + detail;
  } catch (e) {
    msg.textContent = what + ": " + e.message;
  }
  msg.hidden = false;
}

function button(label, what, method, path, danger) {
  const b = document.createElement("button");
  b.className = "act" + (danger ? " danger" : "");
  b.type = "button";
  b.textContent = label;
  b.dataset.action = method + " " + path;
  b.addEventListener("click", () => act(what, method, path));
  return b;
}

const enc = encodeURIComponent;

function ms(v) { return v >= 1000 ? (v / 1000).toFixed(1) + " s" : v + " ms"; }  // v in ms

function draw(s) {
  $("readonly").hidden = !s.readonly;
  $("readonly").textContent = s.readonly ? "Read-only: " + s.readonly : "";
  $("revision").textContent = s.revision;
  $("durable").textContent = s.durable_revision + (s.revision > s.durable_revision ? " (" + (s.revision - s.durable_revision) + " behind)" : "");
  $("log").textContent = s.log.records + " / " + s.log.batches + " / " + s.log.syncs;
  if (lastSyncs) {
    const n = s.log.syncs - lastSyncs[1];
    $("syncrate").textContent = (n / ((Date.now() - lastSyncs[0]) / 1000)).toFixed(1);
    $("synclat").textContent = n > 0 ? ms(Math.round((s.log.sync_us_sum - lastSyncs[2]) / n / 10) / 100) : "no syncs";
  }
  lastSyncs = [Date.now(), s.log.syncs, s.log.sync_us_sum];
  $("clients").textContent = s.clients + " (" + s.blocked_clients + ")";
  $("watches").textContent = s.watches + " / " + s.keys;
  s.queues.sort((a, b) => (name(a, "name") < name(b, "name") ? -1 : 1));  // a stable order
  const now = Date.now();
  for (const q of s.queues) {
    const n = name(q, "name");
    const h = depth.get(n) || [];
    h.push([now, q.waiting + q.inflight]);
    while (h.length && now - h[0][0] > HISTORY_MS) h.shift();
    depth.set(n, h);
  }
  $("noqueues").hidden = s.queues.length > 0;
  fill($("queues"), s.queues, (tr, q) => {
    tr.dataset.queue = name(q, "name");
    cell(tr, name(q, "name"), "key");
    for (const f of ["waiting", "inflight", "delayed", "keys", "parked_keys"]) cell(tr, q[f]);
    cell(tr, q.paused ? "queue" : q.paused_keys ? q.paused_keys + " keys" : "");
    for (const f of ["deadlettered", "acked"]) cell(tr, q[f]);
    cell(tr, q.oldest_ready_ms ? ms(q.oldest_ready_ms) : "");
    cell(tr, spark(depth.get(name(q, "name")) || []));
  });
  const scheds = s.schedules || [];
  $("noschedules").hidden = scheds.length > 0;
  fill($("schedules"), scheds, (tr, c) => {
    tr.dataset.schedule = name(c, "name");
    cell(tr, name(c, "name"), "key");
    cell(tr, name(c, "queue"), "key");
    cell(tr, c.cron !== undefined || c.cron_b64 !== undefined ? name(c, "cron") : "every " + ms(c.every_ms), "key");
    cell(tr, ms(c.next_in_ms));
    cell(tr, c.pushed);
    cell(tr, c.skipped);
  });
  const byName = new Map(s.queues.map((q) => [name(q, "name"), q]));
  const dead = s.queues.filter((q) => q.deadlettered > 0);
  $("nodead").hidden = dead.length > 0;
  fill($("deadletters"), dead, (tr, q) => {
    const dl = q.deadletter !== undefined || q.deadletter_b64 !== undefined ? name(q, "deadletter") : null;
    tr.dataset.deadletter = name(q, "name");
    cell(tr, name(q, "name"), "key");
    cell(tr, q.deadlettered);
    cell(tr, dl === null ? "(dropped: no DEADLETTER queue)" : dl, "key");
    cell(tr, dl !== null && byName.has(dl) ? byName.get(dl).waiting : "");
    const acts = document.createElement("span");
    if (dl !== null && byName.has(dl) && byName.get(dl).waiting > 0) {
      const qn = name(q, "name");
      acts.appendChild(button("retry", "Move the dead letters of " + dl + " back to " + qn, "POST",
        "/v1/queues/" + enc(qn) + "/redrive"));
      acts.appendChild(button("drop", "Delete queue " + dl + " and every dead letter in it", "DELETE",
        "/v1/queues/" + enc(dl), true));
    }
    cell(tr, acts);
  });
  const keys = [];
  for (const q of s.queues) for (const k of q.top) keys.push([name(q, "name"), k]);
  fill($("keys"), keys, (tr, [qn, k]) => {
    if (k.state === "parked" || k.state.endsWith("paused") || k.attempt > 1) tr.className = "stuck";
    else if (k.inflight_ms > 30000) tr.className = "slow";
    tr.dataset.key = name(k, "key");
    cell(tr, qn, "key");
    cell(tr, name(k, "key"), "key");
    cell(tr, k.waiting);
    cell(tr, k.state);
    cell(tr, k.attempt);
    cell(tr, k.state === "processing" ? ms(k.inflight_ms) : "");
    cell(tr, k.state === "parked" ? button("unpark", "Let key " + name(k, "key") + " of " + qn + " flow again", "POST",
      "/v1/queues/" + enc(qn) + "/keys/" + enc(name(k, "key")) + "/unpark") : "");
  });
  fill($("clientlist"), s.client_list, (tr, c) => {
    tr.dataset.client = c.id;
    cell(tr, c.id);
    cell(tr, name(c, "addr"), "key");
    cell(tr, c.name !== undefined || c.name_b64 !== undefined ? name(c, "name") : "", "key");
    cell(tr, c.kind);
    cell(tr, ms(c.age_ms));
    cell(tr, ms(c.idle_ms));
    cell(tr, c.commands);
    cell(tr, c.blocked ? "yes" : "");
    cell(tr, c.watches);
  });
  fill($("locks"), s.locks, (tr, l) => { cell(tr, name(l, "name"), "key"); cell(tr, l.token); cell(tr, ms(l.remaining_ms)); });
  fill($("elections"), s.elections, (tr, e) => { cell(tr, name(e, "name"), "key"); cell(tr, e.term); cell(tr, name(e, "value"), "key"); });
  $("clustersec").hidden = !s.cluster;
  if (s.cluster) {
    const c = s.cluster;
    $("clusterline").textContent = "member " + c.node_id + " (" + c.role + "), term " + c.term + ", leader " +
      (c.leader_id || "unknown") + ", commit index " + c.commit_index + ", applied " + c.applied_index;
    fill($("members"), c.members, (tr, m) => {
      cell(tr, m.id); cell(tr, name(m, "addr"), "key"); cell(tr, m.role);
      cell(tr, m.live ? "yes" : "NO");
      cell(tr, m.last_contact_ms < 0 ? "never" : ms(m.last_contact_ms));
      cell(tr, m.lag_entries < 0 ? "" : m.lag_entries);
      cell(tr, c.role === "leader" && m.id !== c.node_id && m.live && m.role === "voter"
        ? button("make leader", "Hand leadership to member " + m.id, "POST", "/v1/cluster/transfer?to=" + m.id) : "");
    });
  }
}

async function poll() {
  const headers = authHeaders();
  try {
    const since = hist.seconds && hist.seconds.t.length ? hist.seconds.t[hist.seconds.t.length - 1] + 1 : 1;
    const r = await fetch("/v1/status?history=" + since, { headers, cache: "no-store" });
    if (r.status === 401) {
      $("login").hidden = false;
      $("conn").textContent = "password needed";
      return;
    }
    $("login").hidden = true;
    const s = await r.json();
    if (s.history) {
      hist.seconds = merge(hist.seconds, s.history.seconds, RING_CAP.seconds);
      hist.minutes = merge(hist.minutes, s.history.minutes, RING_CAP.minutes);
    }
    draw(s);
    drawCharts();
    $("conn").textContent = "live · " + new Date().toLocaleTimeString();
    document.body.dataset.ready = "1";
  } catch (e) {
    $("conn").textContent = "disconnected: " + e.message;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

$("range").addEventListener("change", drawCharts);

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem("ordo-password", $("password").value);
  $("login").hidden = true;
});

poll();
