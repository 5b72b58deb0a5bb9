// The arbiter's console: polls /api/state and renders it. Plain JS, no libraries.
"use strict";

const REFRESH_MS = 2000;
const COLORS = ["#e63946", "#457b9d", "#2a9d8f", "#f4a261", "#6a4c93", "#1d3557", "#8ab17d", "#b56576"];

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fmt(x, digits = 2) {
  if (x === null || x === undefined) return "\u221e";
  return Number(x).toFixed(digits);
}

function dur(s) {
  s = Math.max(0, Math.round(s));
  if (s < 120) return s + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function clock(t) { return new Date(t * 1000).toLocaleTimeString(); }

function sparkline(points, width = 160, height = 28) {
  // points: [[t, value or null], ...]; null (infinite rho) is drawn at the top.
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const finite = points.filter(p => p[1] !== null).map(p => p[1]);
  if (points.length < 2) return svg;
  const hi = Math.max(1, ...finite), lo = Math.min(0, ...finite);
  const t0 = points[0][0], t1 = points[points.length - 1][0] || t0 + 1;
  const xy = points.map(([t, v]) => {
    const x = ((t - t0) / Math.max(1e-9, t1 - t0)) * (width - 2) + 1;
    const y = v === null ? 1 : height - 1 - ((v - lo) / Math.max(1e-9, hi - lo)) * (height - 2);
    return x.toFixed(1) + "," + y.toFixed(1);
  });
  const line = document.createElementNS(svgNS, "polyline");
  line.setAttribute("points", xy.join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#1d3557");
  line.setAttribute("stroke-width", "1.5");
  svg.append(line);
  return svg;
}

function renderCluster(s) {
  const c = s.cluster;
  document.getElementById("cluster-counts").textContent =
    `${c.name}: ${c.gpus} GPUs on ${c.machines} machines; ${c.counts.free} free, ` +
    `${c.counts.leased} leased, ${c.counts.reserved} reserved, ${c.counts.drained} drained`;
  const names = Object.fromEntries(s.apps.map(a => [a.app_id, a.name || a.app_id]));
  const racks = document.getElementById("racks");
  racks.replaceChildren();
  for (const rack of c.racks) {
    const box = el("div", { class: "rack", "data-rack": rack.name }, el("h3", {}, "rack " + rack.name));
    for (const m of rack.machines) {
      const row = el("div", { class: "machine" + (m.drained ? " drained" : ""), "data-machine": m.name },
        el("span", { class: "name", title: `${m.gpu_type}, ${m.vcores} vcores, ${m.memory_mb} MB` }, m.name));
      for (const g of m.gpus) {
        let title = `${g.id}: ${g.state}`;
        if (g.lease) {
          title += ` by ${names[g.lease.app_id] || g.lease.app_id} (${g.lease.app_id}), ${g.lease.source} ` +
            `lease of round ${g.lease.round}, held ${dur(g.lease.held_for)}, ends in ${dur(g.lease.ends_in)}`;
        }
        if (g.next) title += `; next: ${g.next}`;
        row.append(el("span", { class: "gpu " + g.state, title: title, "data-gpu": g.id,
          "data-holder": g.lease ? g.lease.app_id : "" }));
      }
      box.append(row);
    }
    racks.append(box);
  }
}

function renderApps(s) {
  const body = document.getElementById("apps-body");
  body.replaceChildren();
  const rho = s.history.rho || {};
  for (const a of s.apps) {
    const points = (rho[a.app_id] || []).map(p => [p[0], p[1]]);
    body.append(el("tr", { "data-app": a.app_id },
      el("td", {}, el("code", {}, a.app_id)), el("td", {}, a.name), el("td", {}, a.user),
      el("td", {}, a.queue), el("td", { class: "gpus" }, a.gpus), el("td", {}, a.max_gpus),
      el("td", { class: "rho" }, fmt(a.rho, 3)), el("td", {}, a.connected ? "open" : "closed"),
      el("td", {}, a.yarn_app_id || "-"), el("td", {}, sparkline(points))));
  }
  if (!s.apps.length) body.append(el("tr", {}, el("td", { colspan: 10, class: "muted" }, "no apps registered")));
}

function renderAuctions(s) {
  const box = document.getElementById("auctions-body");
  box.replaceChildren();
  const auctions = s.history.auctions || [];
  if (!auctions.length) {
    box.append(el("p", { class: "muted" }, s.policy === "themis"
      ? "no auction decided yet" : `policy ${s.policy} decides centrally: no auctions`));
    return;
  }
  const names = Object.fromEntries(s.apps.map(a => [a.app_id, a.name]));
  for (const r of auctions.slice(0, 30)) {
    const t = el("table", {}, el("thead", {}, el("tr", {}, ...["bidder", "name", "\u03c1 old", "bid rows",
      "PF GPUs", "\u03c1 at PF", "c_i", "hidden payment", "GPUs leased"].map(h => el("th", {}, h)))));
    const tb = el("tbody");
    for (const b of r.bidders) {
      tb.append(el("tr", { class: b.winner ? "winner" : "" }, el("td", {}, el("code", {}, b.app_id)),
        el("td", {}, names[b.app_id] || "(gone)"), el("td", {}, fmt(b.rho_old, 3)), el("td", {}, b.rows), el("td", {}, b.pf_gpus),
        el("td", {}, fmt(b.pf_rho, 3)), el("td", {}, fmt(b.c, 3)),
        el("td", {}, fmt(b.hidden_payment, 3)), el("td", {}, b.granted)));
    }
    t.append(tb);
    const left = Object.keys(r.leftover).length;
    const leftTo = Object.entries(r.leftover_granted).map(([a, n]) => `${a} x${n}`).join(", ") || "none";
    box.append(el("div", { class: "round", "data-round": r.round },
      el("strong", {}, `round ${r.round}`), ` at ${clock(r.at)}: ${r.offered} GPUs offered, ` +
      `${r.bidders.length} bidders, decided in ${(r.solve_seconds * 1000).toFixed(1)} ms; ` +
      `leftover on ${left} GPUs, to ${leftTo}`, t));
  }
}

function renderQueries(s) {
  const q = s.queries;
  document.getElementById("queries-now").textContent =
    `${q.registered} registered queries, ${q.external} other analytics apps on YARN: |J| = ` +
    `${q.active_jobs}; R = ${q.capacity.vcores} vcores, ${Math.round(q.capacity.memory_mb)} MB; ` +
    `each gets ${fmt(q.share.vcores, 1)} vcores, ${Math.round(q.share.memory_mb)} MB ` +
    `(epoch ${q.epoch}, ${q.subscribers} share streams)`;
  const shares = s.history.shares || [];
  const chart = document.getElementById("share-chart");
  chart.replaceChildren(sparkline(shares.map(x => [x.at, x.vcores]), 480, 48));
  const body = document.getElementById("share-body");
  body.replaceChildren();
  for (const x of shares.slice(-20).reverse()) {
    body.append(el("tr", {}, el("td", {}, clock(x.at)), el("td", {}, x.epoch), el("td", {}, x.active_jobs),
      el("td", {}, fmt(x.vcores, 1)), el("td", {}, Math.round(x.memory_mb) + " MB")));
  }
  const switches = s.history.plan_switches || [];
  const sw = document.getElementById("switch-body");
  sw.replaceChildren();
  if (!switches.length) {
    sw.append(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "no plan switch reported yet")));
  }
  for (const x of switches.slice(0, 30)) {
    sw.append(el("tr", { "data-job": x.job_id },
      el("td", {}, clock(x.at)),
      el("td", { title: x.job_id }, `${x.query_name}${x.user ? " (" + x.user + ")" : ""}`),
      el("td", {}, fmt(x.at_s, 1) + " s"),
      el("td", { class: "plan" }, `${x.from_plan} \u2192 ${x.to_plan}`),
      el("td", {}, `${fmt(x.vcores, 1)} vcores, ${Math.round(x.memory_mb)} MB`),
      el("td", { title: x.cancelled.join(", ") }, x.cancelled.length),
      el("td", { title: x.reused.join(", ") }, x.reused.length)));
  }
}

function renderBridge(s) {
  const box = document.getElementById("bridge-body");
  box.replaceChildren();
  const sources = Object.entries(s.sources);
  if (!sources.length) {
    box.append(el("p", { class: "muted" }, "no YARN bridge: the cluster is declared (serve without --rm-url)"));
    return;
  }
  for (const [name, st] of sources) {
    const t = el("table", {});
    for (const [k, v] of Object.entries(st)) {
      const shown = typeof v === "object" && v !== null ? JSON.stringify(v) : String(v);
      t.append(el("tr", {}, el("th", {}, k), el("td", { "data-key": k }, shown)));
    }
    box.append(el("h3", {}, name), t);
  }
}

function render(s) {
  const h = s.health;
  const badge = document.getElementById("health");
  badge.textContent = h.healthy ? (h.ready ? "healthy, ready" : "healthy, not ready") : "unhealthy";
  badge.className = "badge " + (h.healthy && h.ready ? "ok" : "bad");
  badge.title = Object.entries(h.checks).map(([k, c]) => `${k}: ${c.ok ? "ok" : "FAIL"} ${c.detail}`).join("\n");
  document.getElementById("summary").textContent =
    `policy ${s.policy}, round ${s.round}, ${s.apps.length} apps`;
  renderCluster(s);
  renderApps(s);
  renderAuctions(s);
  renderQueries(s);
  renderBridge(s);
  document.getElementById("updated").textContent = "updated " + clock(s.now);
  document.body.dataset.loaded = String(s.now);
}

async function refresh() {
  try {
    const r = await fetch("/api/state", { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
    render(await r.json());
  } catch (e) {
    document.getElementById("updated").textContent = "cannot reach the arbiter: " + e.message;
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
