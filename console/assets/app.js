// The console's pages. Every URL serves the same document; this module
// reads location.pathname and draws the page, then keeps it live by
// polling the API (every ?refresh=MS milliseconds, default 2000).

import { api, optional, ApiError, showAuth } from './api.js';
import { modelOf, drawGraph, compositeOf } from './graph.js';
import { drawChart } from './chart.js';

const params = new URLSearchParams(location.search);
const refreshMS = Math.max(200, Number(params.get('refresh')) || 2000);
const main = document.getElementById('main');

// ---- small DOM helpers ----

/** el makes an element: el('a', {href}, 'text', child...). */
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
  return e;
}

function section(id, title, ...children) {
  return el('section', { id, class: 'card' }, el('h2', {}, title), ...children);
}

function fmtTime(t) {
  if (!t || t.startsWith('0001-')) return '–';
  return t.replace('T', ' ').replace(/\.\d+/, '').replace('Z', ' UTC');
}

function fmtSeconds(s) {
  if (s === undefined || s === null || !Number.isFinite(s)) return '–';
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

function age(t) {
  if (!t || t.startsWith('0001-')) return undefined;
  return (Date.now() - Date.parse(t)) / 1000;
}

function fmtNum(n) {
  if (n === undefined || n === null || !Number.isFinite(n)) return '–';
  return Number.isInteger(n) ? n.toLocaleString('en-US') : n.toFixed(1);
}

/** fmtBytes reads a size in bytes as B, KiB, MiB or GiB. */
function fmtBytes(n) {
  if (n === undefined || n === null || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + units[i];
}

function stateBadge(state) {
  return el('span', { class: 'state state-' + String(state).toLowerCase(), 'data-state': state }, state);
}

const terminal = new Set(['DONE', 'DRAINED', 'CANCELLED', 'UPDATED', 'FAILED']);

function jobLink(id, text) { return el('a', { href: '/jobs/' + encodeURIComponent(id) }, text || id); }

/** markLoaded says the page has drawn what it loaded (tests and the benchmark wait for it). */
function markLoaded() {
  if (main.dataset.loaded) return;
  main.dataset.loadedMs = String(Math.round(performance.now()));
  main.dataset.loaded = 'true';
}

function showError(where, e) {
  const msg = e instanceof ApiError ? `${e.code ? e.code + ': ' : ''}${e.message}` : String(e && e.message ? e.message : e);
  where.replaceChildren(el('p', { class: 'error', role: 'alert' }, msg));
}

/** poll runs fn now and every refreshMS, one run at a time. */
function poll(fn) {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try { await fn(); } finally { running = false; }
  };
  const first = tick();
  return { id: setInterval(tick, refreshMS), first };
}

/** sourceSteps are the names of the steps that read from outside. */
function sourceSteps(graph) {
  return new Set(((graph && graph.steps) || []).filter((s) => !s.inputs || Object.keys(s.inputs).length === 0).map((s) => s.name));
}

/** jobRates sums what a job's metrics say about its throughput. */
function throughputOf(job) {
  const m = job.metrics;
  if (!m) return undefined;
  const src = sourceSteps(job.graph);
  return (m.steps || []).filter((s) => src.has(s.name)).reduce((a, s) => a + (s.throughput_per_second || 0), 0);
}

// ---- jobs list: / ----

const maxDetails = 50;

async function jobsPage() {
  const status = params.get('status') || 'all';
  document.title = 'Jobs · weir';
  const filters = el('nav', { class: 'filters' }, ...['active', 'terminated', 'all'].map((s) =>
    el('a', { href: '/?status=' + s, class: s === status ? 'current' : '', 'data-filter': s, 'aria-current': s === status ? 'page' : null }, s)));
  const body = el('tbody');
  const table = el('table', { id: 'jobs', class: 'jobs' },
    el('thead', {}, el('tr', {}, ...['Name', 'Job ID', 'State', 'Type', 'Gen', 'Created', 'Watermark', 'System lag', 'Data freshness', 'Elements/s', 'Last checkpoint', 'Condition'].map((h) => el('th', {}, h)))),
    body);
  const msg = el('div', { id: 'jobs-message' });
  main.replaceChildren(el('h1', {}, 'Jobs'), filters, msg, table);
  poll(async () => {
    let list;
    try {
      list = await api('GET', '/v1/jobs?status=' + encodeURIComponent(status));
    } catch (e) { showError(msg, e); return; }
    msg.replaceChildren();
    const jobs = list.jobs || [];
    // The list has no metrics: read them from each active job (the first
    // maxDetails of them, newest first, to bound the page's requests).
    let budget = maxDetails;
    const details = await Promise.all(jobs.map((j) => terminal.has(j.state) || budget-- <= 0 ? Promise.resolve(null) : api('GET', '/v1/jobs/' + encodeURIComponent(j.id)).catch(() => null)));
    body.replaceChildren(...jobs.map((j, i) => {
      const d = details[i] || {};
      const m = d.metrics;
      return el('tr', { 'data-job-id': j.id, 'data-job-name': j.name, 'data-state': j.state },
        el('td', {}, jobLink(j.id, j.name)),
        el('td', { class: 'mono' }, j.id),
        el('td', {}, stateBadge(j.state)),
        el('td', {}, j.type || ''),
        el('td', { class: 'num' }, j.generation),
        el('td', {}, fmtTime(j.create_time)),
        el('td', {}, m && m.data_watermark ? fmtTime(m.data_watermark) : '–'),
        el('td', { class: 'num' }, m ? fmtSeconds(m.system_lag_seconds) : '–'),
        el('td', { class: 'num' }, m ? fmtSeconds(m.data_watermark_age_seconds) : '–'),
        el('td', { class: 'num' }, m ? fmtNum(throughputOf(d)) : '–'),
        el('td', { class: 'num' }, d.last_checkpoint ? fmtSeconds(age(d.last_checkpoint.time)) + ' ago' : '–'),
        el('td', { class: d.condition ? 'warn' : '' }, d.condition ? `${d.condition.code}: ${d.condition.message}` : (j.error || '')));
    }));
    if (jobs.length === 0) body.append(el('tr', {}, el('td', { colspan: 12, class: 'muted' }, `no ${status === 'all' ? '' : status + ' '}jobs`)));
    markLoaded();
  });
}

// ---- job: /jobs/{id_or_name} ----

const charts = [
  { id: 'throughput', title: 'Throughput (elements/s, sources, 30 s rate)', unit: '/s', metrics: ['source_elements_in'] },
  { id: 'freshness', title: 'Data freshness (watermark age)', unit: 's', metrics: ['data_watermark_age_seconds', 'data_freshness_seconds', 'watermark_lag_seconds'] },
  { id: 'system-lag', title: 'System lag', unit: 's', metrics: ['system_lag_seconds'] },
  { id: 'backlog', title: 'Backlog (elements)', unit: '', metrics: ['backlog_elements'] },
  { id: 'checkpoint', title: 'Checkpoint duration', unit: 's', metrics: ['checkpoint_duration_seconds'] },
];

// The charts show the job name's last 24 hours, across its lineage: each
// job's history at the server's coarse resolution (1m, kept 24 hours),
// and its last hour at the fine one (5s). The server keeps only these two.
const historyMS = 24 * 3600e3;
const fineMS = 3600e3;
// Throughput is a rate of the source steps' counters over rateWindowMS
// (as Prometheus's rate()), not the rate sampled over one second: bursty
// input would read 0/s between bursts.
const rateWindowMS = 30e3;

/** seriesKey names a series of a job's history. */
const seriesKey = (s) => `${s.step || ''}\u0000${s.metric}`;

/**
 * jobHistory reads one job's own series (step "-": what the charts draw)
 * since from: the fine tier (5s, the last hour; kept an hour after the job
 * ends) and, before it, the coarse one (1m, 24 hours).
 */
async function jobHistory(id, from, now) {
  const q = (f, to, res) => optional(`/v1/jobs/${encodeURIComponent(id)}/metrics:history?step=-&from=${Math.round(f)}&to=${Math.round(to)}&resolution=${res}`).catch(() => null);
  const fineFrom = Math.max(from, now - fineMS);
  // The coarse tier up to the fine one's start only: the page stays
  // within its 1 MB budget with a day of history.
  const [coarse, fine] = await Promise.all([q(from, fineFrom, '1m'), q(fineFrom, now, '5s')]);
  const out = new Map();
  for (const s of (fine && fine.series) || []) out.set(seriesKey(s), { step: s.step, metric: s.metric, points: (s.points || []).slice() });
  for (const s of (coarse && coarse.series) || []) {
    const f = out.get(seriesKey(s));
    const before = f && f.points.length ? f.points[0][0] : Infinity;
    const pts = (s.points || []).filter((p) => p[0] < before);
    if (f) f.points = pts.concat(f.points); else out.set(seriesKey(s), { step: s.step, metric: s.metric, points: pts });
  }
  return out;
}

/**
 * lineageHistory reads the history of every job of job's name that ran in
 * the last 24 hours, oldest first, and joins their series: the charts go
 * on across updates. marks are the times a job took over from the one
 * before (its creation), drawn on the charts' time axis.
 */
async function lineageHistory(job) {
  const now = Date.now();
  const from = now - historyMS;
  const h = await optional('/v1/history/' + encodeURIComponent(job.name)).catch(() => null);
  let jobs = ((h && h.jobs) || []).filter((j) => !terminal.has(j.state) || Date.parse(j.state_time) >= from);
  if (!jobs.some((j) => j.id === job.id)) jobs.push(job);
  jobs = jobs.sort((a, b) => Date.parse(a.create_time) - Date.parse(b.create_time)).slice(-8);
  const parts = await Promise.all(jobs.map((j) => jobHistory(j.id, from, now)));
  const joined = new Map();
  parts.forEach((part, i) => {
    for (const [k, s] of part) {
      const prev = joined.get(k);
      // A job's points start where the job before it ended.
      const after = prev && prev.points.length ? prev.points[prev.points.length - 1][0] : -Infinity;
      const pts = s.points.filter((p) => p[0] > after).map((p) => [p[0], p[1], i]);
      if (prev) prev.points = prev.points.concat(pts); else joined.set(k, { step: s.step, metric: s.metric, points: pts });
    }
  });
  const marks = jobs.slice(1).map((j) => ({ t: Date.parse(j.create_time), label: `${j.id} took over` })).filter((m) => m.t >= from);
  return { series: [...joined.values()], marks };
}

/**
 * rateOf is the per-second rate of a counter's points [t, v, job] over a
 * window of at least windowMS: a point's rate is the increase since the
 * last point at least windowMS before it. A counter that starts again (a
 * new job of the lineage, or a reset) counts from zero, as rate() does.
 */
export function rateOf(points, windowMS) {
  const out = [];
  let j = 0;
  for (let i = 1; i < points.length; i++) {
    while (j + 1 < i && points[i][0] - points[j + 1][0] >= windowMS) j++;
    const dt = points[i][0] - points[j][0];
    if (dt <= 0) continue;
    let inc = 0;
    for (let k = j + 1; k <= i; k++) {
      const d = points[k][1] - points[k - 1][1];
      inc += d >= 0 && points[k][2] === points[k - 1][2] ? d : points[k][1];
    }
    out.push([points[i][0], (inc * 1000) / dt]);
  }
  return out;
}

/** throughputSeries is the rate of the sources' elements_in, summed by the server. */
function throughputSeries(hist) {
  const s = hist.series.find((x) => !x.step && x.metric === 'source_elements_in');
  return s ? rateOf(s.points, rateWindowMS) : [];
}

/** sampleOf is what one poll of a running job adds to its charts. */
function sampleOf(job) {
  const m = job.metrics;
  if (!m || !m.time) return null;
  const t = Date.parse(m.time);
  const out = { t, 'system-lag': m.system_lag_seconds };
  if (m.data_watermark_age_seconds !== undefined) out.freshness = m.data_watermark_age_seconds;
  if (m.backlog_elements !== undefined) out.backlog = m.backlog_elements;
  return out;
}

/** chartSeries is a chart's lines: the lineage's history, then this page's samples. */
function chartSeries(c, hist, samples) {
  let series = [];
  if (hist) {
    if (c.id === 'throughput') {
      series = [{ label: 'sources', points: throughputSeries(hist) }];
    } else {
      const mine = hist.series.filter((s) => c.metrics.includes(s.metric));
      const job = mine.filter((s) => !s.step);
      series = (job.length ? job : mine.slice(0, 8)).map((s) => ({ label: s.step || s.metric, points: s.points.filter((p) => Number.isFinite(p[1])).map((p) => [p[0], p[1]]) }));
    }
  }
  const after = series.reduce((a, s) => Math.max(a, s.points.length ? s.points[s.points.length - 1][0] : -Infinity), -Infinity);
  const live = samples.filter((s) => s[c.id] !== undefined && s.t > after).map((s) => [s.t, s[c.id]]);
  if (live.length) {
    if (series.length === 1) series[0].points = series[0].points.concat(live);
    else series.push({ label: 'job', points: live });
  }
  return series;
}

function timeline(job) {
  const hist = job.history || [];
  const start = Date.parse(job.create_time);
  const end = terminal.has(job.state) ? Date.parse(job.state_time) : Date.now();
  const span = Math.max(1, end - start);
  const bar = el('div', { class: 'timeline-bar' });
  hist.forEach((h, i) => {
    const t0 = Date.parse(h.time), t1 = i + 1 < hist.length ? Date.parse(hist[i + 1].time) : end;
    const w = Math.max(0.5, ((t1 - t0) / span) * 100);
    bar.append(el('span', { class: 'seg state-' + h.state.toLowerCase(), style: null, title: `${h.state} from ${fmtTime(h.time)}`, 'data-width': w.toFixed(2) }, h.state));
  });
  // widths through CSSOM: inline style attributes would need 'unsafe-inline'.
  requestAnimationFrame(() => bar.querySelectorAll('.seg').forEach((s) => { s.style.flexGrow = s.dataset.width; }));
  const list = el('ol', { class: 'timeline' }, ...hist.map((h) => el('li', { 'data-state': h.state }, stateBadge(h.state), ' ', fmtTime(h.time), h.reason ? el('span', { class: 'muted' }, ' — ' + h.reason) : '')));
  return [bar, list];
}

function kv(rows) {
  return el('table', { class: 'kv' }, el('tbody', {}, ...rows.filter(Boolean).map(([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v)))));
}

/** confirmAction asks before a drain, cancel or snapshot. */
function confirmAction(text) {
  const dlg = document.getElementById('confirm-dialog');
  document.getElementById('confirm-text').textContent = text;
  dlg.hidden = false;
  return new Promise((resolve) => {
    const done = (v) => { dlg.hidden = true; resolve(v); };
    document.getElementById('confirm-yes').onclick = () => done(true);
    document.getElementById('confirm-no').onclick = () => done(false);
  });
}

function eventsOf(reply) {
  if (!reply) return null;
  return Array.isArray(reply) ? reply : reply.events || [];
}

async function jobPage(ref) {
  let job;
  try {
    job = await api('GET', '/v1/jobs/' + encodeURIComponent(ref));
  } catch (e) { showError(main, e); return; }
  const id = job.id;
  document.title = `${job.name} · weir`;
  const model = modelOf(job.graph);
  const collapsed = new Set();
  const samples = [];
  let history = null;

  const head = el('div', { id: 'job-head' });
  const actions = el('div', { id: 'actions', class: 'actions' });
  const result = el('div', { id: 'action-result', role: 'status' });
  const graphBox = el('div', { id: 'graph', class: 'graph-box' });
  const stepBox = el('div', { id: 'step-details' });
  let selected = null; // the step whose details show
  const chartBox = el('div', { id: 'charts', class: 'charts' }, ...charts.map((c) => el('div', { id: 'chart-' + c.id, class: 'chart-box' })));
  const tl = el('div', { id: 'timeline' });
  const ckpt = el('div', { id: 'checkpoints' });
  const snaps = el('div', { id: 'snapshots' });
  const events = el('div', { id: 'events' });
  const dead = el('div', { id: 'dead-letters' });
  const links = el('p', { id: 'job-links', class: 'links' });
  main.replaceChildren(head, links, actions, result,
    section('graph-card', 'Pipeline graph', graphBox),
    section('step-card', 'Step details', stepBox),
    section('charts-card', 'Charts', chartBox),
    section('timeline-card', 'State history', tl),
    section('checkpoints-card', 'Checkpoints', ckpt),
    section('dead-letters-card', 'Dead letters', dead),
    section('snapshots-card', 'Snapshots', snaps),
    section('events-card', 'Events', events),
    section('options-card', 'Options', kv(Object.entries(job.options || {}).map(([k, v]) => [k, String(v)]))),
    section('pipeline-card', 'Pipeline', job.sdk === 'go' ? el('p', {}, `A Go program's job: ${job.program || ''}`) : el('pre', { id: 'pipeline-text' }, job.pipeline || '')));

  for (const [action, label, text] of [
    ['drain', 'Drain', 'Drain stops reading new input, finishes the data in flight (every open window fires) and ends the job DRAINED.'],
    ['cancel', 'Cancel', 'Cancel stops the job now; data in flight and open windows are not finished. The job ends CANCELLED.'],
    ['snapshot', 'Snapshot', 'Take a snapshot of the job (state and source positions), kept 7 days.'],
  ]) {
    actions.append(el('button', { id: 'action-' + action, class: action === 'snapshot' ? '' : 'danger', onclick: async () => {
      if (!(await confirmAction(`${text} Job ${job.name} (${id}).`))) { result.textContent = `${label} not sent.`; return; }
      try {
        const r = await api('POST', `/v1/jobs/${encodeURIComponent(id)}:${action}`);
        result.replaceChildren(el('p', { class: 'ok' }, action === 'snapshot' ? `Snapshot ${r.id} is ${r.state}.` : `${label} requested: the job is ${r.state}.`));
        refresh();
      } catch (e) { showError(result, e); }
    } }, label + '…'));
  }

  const draw = () => drawGraph(graphBox, model, {
    metrics: new Map(((job.metrics && job.metrics.steps) || []).map((s) => [s.name, s])),
    collapsed, onToggle: (c) => { collapsed.has(c) ? collapsed.delete(c) : collapsed.add(c); draw(); },
    onSelect: (name) => { selected = name; drawStep(); },
  });
  // drawStep shows every metric the API reports for the selected step
  // (elements in and out, rejects, late drops, watermark, system lag,
  // keys, timers, backlog...), generically: fields the API adds show too.
  const drawStep = () => {
    if (!selected) { stepBox.replaceChildren(el('p', { class: 'muted' }, 'Click a step of the graph for its details.')); return; }
    const m = ((job.metrics && job.metrics.steps) || []).find((x) => x.name === selected);
    const g = ((job.graph && job.graph.steps) || []).find((x) => x.name === selected);
    stepBox.dataset.step = selected;
    // A map of counts (rejects by reason) reads as "reason: n, ...".
    const counts = (v) => !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'number');
    const value = (v) => (v === null || v === undefined ? '–'
      : typeof v === 'object' ? (counts(v) ? Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => `${k}: ${fmtNum(x)}`).join(', ') : JSON.stringify(v))
        : typeof v === 'number' ? fmtNum(v) : String(v));
    const rows = [['step', selected], ['kind', g ? g.kind || g.type || '' : '']];
    for (const [k, v] of Object.entries(m || {})) {
      if (k === 'name' || k === 'state_bytes_estimated') continue;
      // The state size reads in bytes, marked when the store estimated it.
      rows.push([k, k === 'state_bytes' ? fmtBytes(v) + (m.state_bytes_estimated ? ' (estimated)' : '') : v]);
    }
    stepBox.replaceChildren(el('table', { class: 'kv' }, el('tbody', {}, ...rows.map(([k, v]) =>
      el('tr', { 'data-field': k }, el('th', {}, k.replace(/_/g, ' ')), el('td', {}, value(v)))))),
    m ? '' : el('p', { class: 'muted' }, 'The job reports no metrics for this step now.'));
  };
  const drawCharts = () => {
    for (const c of charts) drawChart(document.getElementById('chart-' + c.id), c.title, chartSeries(c, history, samples), c.unit, history ? history.marks : []);
  };

  let fresh = true; // the job read above is this moment's: the first refresh draws it
  const refresh = async () => {
    try {
      if (!fresh) job = await api('GET', '/v1/jobs/' + encodeURIComponent(id));
      fresh = false;
    } catch (e) { showError(result, e); return; }
    const active = !terminal.has(job.state);
    head.replaceChildren(el('h1', {}, job.name, ' ', stateBadge(job.state)),
      kv([['Job ID', el('span', { class: 'mono', id: 'job-id' }, job.id)], ['Type', job.type], ['Generation', String(job.generation)],
        ['Created', fmtTime(job.create_time)], ['State since', fmtTime(job.state_time)], ['Delivery', job.delivery + (job.delivery_note ? ` (${job.delivery_note})` : '')],
        job.metrics && ['Data watermark', fmtTime(job.metrics.data_watermark)],
        job.metrics && ['System lag', fmtSeconds(job.metrics.system_lag_seconds)],
        job.metrics && job.metrics.sink_buffered_bytes !== undefined && ['Sinks', el('span', { id: 'sinks' },
          `${fmtBytes(job.metrics.sink_buffered_bytes)} held for the next checkpoint; the sources waited ${fmtSeconds(job.metrics.sink_wait_seconds)} for them`)],
        job.condition && ['Condition', el('span', { class: 'warn' }, `${job.condition.code}: ${job.condition.message} (since ${fmtTime(job.condition.since)})`)],
        job.error && ['Error', el('span', { class: 'error' }, job.error)]]));
    links.replaceChildren(...[el('a', { href: '/lineage/' + encodeURIComponent(job.name), id: 'lineage-link' }, 'Lineage of ' + job.name),
      active && job.sdk !== 'go' ? [' · ', el('a', { href: `/jobs/${encodeURIComponent(id)}/update`, id: 'preview-link' }, 'Preview an update')] : '',
      job.replaces_job_id ? [' · replaces ', jobLink(job.replaces_job_id)] : '',
      job.replaced_by_job_id ? [' · replaced by ', el('a', { href: '/jobs/' + encodeURIComponent(job.replaced_by_job_id), class: 'successor' }, job.replaced_by_job_id)] : '',
      job.created_from_snapshot_id ? [' · from snapshot ', job.created_from_snapshot_id] : ''].flat());
    for (const b of actions.querySelectorAll('button')) b.disabled = !active;
    const s = sampleOf(job);
    if (active && s && !samples.some((x) => x.t === s.t)) samples.push(s);
    draw();
    drawStep();
    drawCharts();
    tl.replaceChildren(...timeline(job));
    ckpt.replaceChildren(job.last_checkpoint
      ? kv([['Last checkpoint', `epoch ${job.last_checkpoint.epoch} at ${fmtTime(job.last_checkpoint.time)} (${fmtSeconds(age(job.last_checkpoint.time))} ago)`],
        ['Checkpointing', job.checkpointing ? 'on' : 'off' + (job.checkpoint_note ? ` (${job.checkpoint_note})` : '')]])
      : el('p', { class: 'muted' }, job.checkpointing ? 'no checkpoint yet' : `no checkpoints: ${job.checkpoint_note || 'checkpointing is off'}`));
    dead.replaceChildren(kv([['Dead letters', fmtNum(job.dead_letters)], job.last_dead_letter && ['Latest', el('pre', { class: 'record' }, job.last_dead_letter)]]));
    if (!active && timer) clearInterval(timer.id);
  };

  const slow = async () => {
    const [hist, ev, sn] = await Promise.all([
      lineageHistory(job).catch(() => null),
      optional(`/v1/jobs/${encodeURIComponent(id)}/events`).catch(() => null),
      api('GET', '/v1/snapshots?job_id=' + encodeURIComponent(id)).catch(() => null)]);
    history = hist;
    drawCharts();
    const evs = eventsOf(ev);
    events.replaceChildren(evs === null
      ? el('p', { class: 'muted' }, 'This server does not serve job events (GET /v1/jobs/{id}/events answered 404).')
      : evs.length === 0 ? el('p', { class: 'muted' }, 'no events')
        : el('table', { class: 'events' }, el('tbody', {}, ...evs.slice(-200).reverse().map((e) => el('tr', { class: 'sev-' + String(e.severity || '').toLowerCase(), 'data-type': e.type },
          el('td', {}, fmtTime(e.time)), el('td', {}, e.severity || ''), el('td', { class: 'mono' }, e.type), el('td', {}, e.message || ''))))));
    const list = (sn && sn.snapshots) || [];
    snaps.replaceChildren(list.length === 0 ? el('p', { class: 'muted' }, 'no snapshots') : el('table', {}, el('tbody', {}, ...list.map((x) =>
      el('tr', {}, el('td', { class: 'mono' }, x.id), el('td', {}, stateBadge(x.state)), el('td', {}, fmtTime(x.creation_time)), el('td', {}, 'expires ' + fmtTime(x.expire_time)), el('td', {}, x.description || ''))))));
  };

  let timer = null;
  timer = poll(refresh);
  let slowRuns = 0;
  const slowTimer = setInterval(() => { if (slowRuns++ % 5 === 0 || !terminal.has(job.state)) slow(); }, Math.max(refreshMS, 5000));
  await Promise.all([timer.first, slow()]);
  markLoaded();
  window.addEventListener('pagehide', () => clearInterval(slowTimer));
}

// ---- lineage: /lineage/{name} ----

function howReplaced(job, prev) {
  if (job.created_from_snapshot_id) return `started from snapshot ${job.created_from_snapshot_id}`;
  // A replacement's record names its strategy (stop-and-replace, parallel,
  // rollback, and whatever the service adds): it is the authority.
  const r = job.replacement;
  if (r && r.strategy && (!r.new_job_id || r.new_job_id === job.id)) return strategyName(r.strategy);
  if (!prev) return 'first job of the name';
  const reasons = (job.history || []).map((h) => h.reason || '').join(' ').toLowerCase();
  if (reasons.includes('rollback')) return 'rollback';
  if (job.replaces_job_id === prev.id) {
    if (prev.state === 'UPDATED') return 'in-place update';
    if (reasons.includes('parallel')) return 'parallel replacement';
    return 'stop-and-replace';
  }
  return `new run (the previous job ended ${prev.state})`;
}

/** strategyName words a replacement strategy as the docs do. */
function strategyName(s) {
  const known = { stop_and_replace: 'stop-and-replace', 'stop-and-replace': 'stop-and-replace', parallel: 'parallel replacement', rollback: 'rollback', in_place: 'in-place update' };
  return known[s] || String(s).replace(/_/g, ' ');
}

/**
 * replacementView renders a job's replacement record generically: every
 * recorded field (times formatted, job IDs linked, lists as lists), so
 * the fields the service adds for new flows show without a console
 * change; then the phases with their times, from the job's
 * replacement_phase events.
 */
function replacementView(jobID, r, events) {
  const value = (k, v) => {
    if (v === null || v === undefined) return '–';
    if (Array.isArray(v)) return v.length ? el('ul', {}, ...v.map((x) => el('li', {}, typeof x === 'object' ? JSON.stringify(x) : String(x)))) : '–';
    if (typeof v === 'object') return el('code', {}, JSON.stringify(v));
    if (/job_id$/.test(k) && v) return v === jobID ? el('span', {}, v, el('span', { class: 'muted' }, ' (this job)')) : jobLink(v);
    if ((/_time$/.test(k) || /^\d{4}-\d\d-\d\dT/.test(String(v))) && !Number.isNaN(Date.parse(v))) return fmtTime(v);
    if (/_ms$/.test(k) && typeof v === 'number') return `${v} ms`;
    return String(v);
  };
  const rows = Object.entries(r).map(([k, v]) => el('tr', { 'data-field': k }, el('th', {}, k.replace(/_/g, ' ')), el('td', {}, value(k, v))));
  const phases = (events || []).filter((e) => e.type === 'replacement_phase');
  return el('div', { class: 'replacement', 'data-strategy': r.strategy || '', 'data-phase': r.phase || '' },
    el('p', {}, el('strong', {}, strategyName(r.strategy || 'replacement')), ' · phase ', el('span', { class: 'phase' }, r.phase || '–'),
      r.phase_time ? ` since ${fmtTime(r.phase_time)}` : ''),
    phases.length ? el('ol', { class: 'timeline phases' }, ...phases.map((e) => el('li', { 'data-phase': (e.details && e.details.phase) || '' },
      el('span', { class: 'mono' }, (e.details && e.details.phase) || e.type), ' ', fmtTime(e.time), el('span', { class: 'muted' }, ' — ' + e.message)))) : '',
    el('details', {}, el('summary', {}, 'recorded fields'), el('table', { class: 'fields' }, el('tbody', {}, ...rows))));
}

function reportView(report) {
  const rows = [];
  for (const f of report.errors || []) rows.push(el('tr', { class: 'finding error', 'data-step': f.step, 'data-code': f.code }, el('td', {}, 'refused'), el('td', { class: 'mono' }, f.step), el('td', { class: 'mono' }, f.code), el('td', {}, f.reason), el('td', {}, f.fix || '')));
  for (const f of report.warnings || []) rows.push(el('tr', { class: 'finding warning', 'data-step': f.step, 'data-code': f.code }, el('td', {}, 'warning'), el('td', { class: 'mono' }, f.step), el('td', { class: 'mono' }, f.code), el('td', {}, f.reason), el('td', {}, f.fix || '')));
  for (const d of report.dropped_state || []) rows.push(el('tr', { class: 'finding dropped', 'data-step': d.step }, el('td', {}, 'state dropped'), el('td', { class: 'mono' }, d.step), el('td', {}, ''), el('td', {}, d.what), el('td', {}, '')));
  return el('div', { class: 'report' },
    el('p', { class: report.compatible ? 'ok' : 'error', 'data-compatible': String(report.compatible) }, report.compatible ? 'Compatible: the new pipeline can take over the state.' : 'Refused: the update would be incompatible.'),
    rows.length ? el('table', { class: 'findings' }, el('thead', {}, el('tr', {}, ...['', 'Step', 'Code', 'Why', 'Fix'].map((h) => el('th', {}, h)))), el('tbody', {}, ...rows)) : '');
}

/** rehearsalView draws the answer to a rehearsal: the verdict's figures
 * and a few differing rows, or why it could not run. */
function rehearsalView(body, name) {
  const v = body && body.rehearsal;
  if (!v) {
    const msg = body && body.error ? `${body.error.code}: ${body.error.message}` : 'the server answered without a rehearsal';
    return el('p', { class: 'error', id: 'rehearsal-error' }, 'The rehearsal could not run: ', msg);
  }
  return el('div', { class: 'rehearsal', 'data-passed': String(v.passed) },
    el('p', { class: v.passed ? 'ok' : 'error' }, v.passed
      ? 'Same answers: the new pipeline matched the running job on its retained input.'
      : 'Different answers: the update would be refused (PARITY_FAILED).'),
    el('table', { class: 'rehearsal-figures' }, el('tbody', {},
      ...[['input elements since ' + fmtTime(v.since), v.elements], ['rows compared', v.rows_compared], ['differences', v.differences],
        ['noise (the old pipeline against itself)', v.noise], ['budget', v.budget]]
        .map(([k, n]) => el('tr', { 'data-figure': k.split(' ')[0] }, el('th', {}, k), el('td', { class: 'num' }, fmtNum(n)))),
      // The recorded stretch: its size, and how much of it the server's
      // --rehearse-trace-memory sent to --rehearse-trace-dir.
      el('tr', { 'data-figure': 'recorded' }, el('th', {}, 'recorded stretch'),
        el('td', { class: 'num' }, fmtBytes(v.trace_bytes || 0) +
          (v.trace_spilled_bytes ? ` (${fmtBytes(v.trace_spilled_bytes)} on disk)` : ' (in memory)'))))),
    (v.examples || []).length ? el('ul', { class: 'rehearsal-examples' }, ...v.examples.map((x) => el('li', { class: 'mono' }, x))) : '',
    el('p', { class: 'muted' }, `weir rehearse ${name} NEW.yaml --since … shows the whole report per key, window and pane.`));
}

/** planView draws a validate-only update's plan: per stateful step, sink
 * and source what the update would do (as `weir plan` prints it). */
function planView(plan) {
  const names = (o, n) => (!o ? n : !n || n === o ? o : `${o} → ${n}`);
  const rows = (items, cells) => items.map((x) => el('tr', { class: 'plan-' + x.action, 'data-action': x.action, 'data-name': x.old || x.new }, ...cells(x)));
  const steps = rows(plan.steps || [], (s) => [el('td', {}, s.action), el('td', { class: 'mono' }, names(s.old, s.new)), el('td', {}, s.kind),
    el('td', {}, s.state || ''), el('td', { class: 'num' }, s.keys === undefined ? '' : fmtNum(s.keys)), el('td', {}, s.detail || '')]);
  const sinks = rows(plan.sinks || [], (s) => [el('td', {}, s.action), el('td', { class: 'mono' }, names(s.old, s.new)), el('td', { class: 'mono' }, `${s.kind} ${s.identity}`),
    el('td', {}, ...['key', 'mode', 'layout'].filter((k) => s[k] && s[k].old && s[k].old !== s[k].new).map((k) => el('div', {}, `${k}: ${s[k].old} → ${s[k].new}`)),
      ...(s.columns || []).map((c) => el('div', { class: 'plan-column', 'data-column': c.name, 'data-action': c.action }, `${c.action} column ${c.from ? c.from + ' → ' : ''}${c.name} (${[c.old_type, c.new_type].filter(Boolean).join(' → ')}): ${c.effect}`)),
      s.detail ? el('div', { class: 'muted' }, s.detail) : '')]);
  const sources = rows(plan.sources || [], (s) => [el('td', {}, s.action), el('td', { class: 'mono' }, names(s.old, s.new)), el('td', { class: 'mono' }, s.identity), el('td', {}, s.position)]);
  const table = (id, head, body) => el('table', { id, class: 'plan' }, el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))), el('tbody', {}, ...body));
  return el('div', { id: 'plan', 'data-strategy': plan.strategy },
    el('h3', {}, `Plan (${plan.strategy.replaceAll('_', ' ')})`),
    steps.length ? table('plan-steps', ['State', 'Step', 'Kind', 'Keeps', 'Keys', ''], steps) : el('p', { class: 'muted' }, 'no stateful steps'),
    sinks.length ? table('plan-sinks', ['Sink', 'Step', 'Writes', 'Changes'], sinks) : '',
    sources.length ? table('plan-sources', ['Source', 'Step', 'Reads', 'After the update'], sources) : '',
    plan.keys_from ? el('p', { class: 'muted' }, `Key counts from ${plan.keys_from}.`) : '');
}

async function lineagePage(name) {
  document.title = `Lineage of ${name} · weir`;
  let h;
  try {
    h = await api('GET', '/v1/history/' + encodeURIComponent(name));
  } catch (e) { showError(main, e); return; }
  const jobs = h.jobs || [];
  // The phases of a replacement are the jobs' replacement_phase events.
  const events = await Promise.all(jobs.map((j) => j.replacement
    ? optional('/v1/jobs/' + encodeURIComponent(j.id) + '/events').then((r) => (r && r.events) || []).catch(() => [])
    : Promise.resolve([])));
  const gens = el('ol', { id: 'generations', class: 'lineage' });
  jobs.forEach((j, i) => {
    const prev = i > 0 ? jobs[i - 1] : null;
    gens.append(el('li', { 'data-job-id': j.id, 'data-generation': j.generation, class: 'generation card' },
      el('h3', {}, `Generation ${j.generation} `, jobLink(j.id), ' ', stateBadge(j.state)),
      el('p', {}, el('strong', {}, howReplaced(j, prev)), j.replaces_job_id ? [' of ', el('a', { class: 'predecessor', href: '/jobs/' + encodeURIComponent(j.replaces_job_id), 'data-predecessor': j.replaces_job_id }, j.replaces_job_id)] : '', ` · created ${fmtTime(j.create_time)}`),
      j.replacement ? replacementView(j.id, j.replacement, events[i]) : '',
      el('ol', { class: 'timeline' }, ...(j.history || []).map((x) => el('li', {}, stateBadge(x.state), ' ', fmtTime(x.time), x.reason ? el('span', { class: 'muted' }, ' — ' + x.reason) : ''))),
      j.replaced_by_job_id ? el('p', {}, '→ replaced by ', el('a', { class: 'successor', href: '/jobs/' + encodeURIComponent(j.replaced_by_job_id), 'data-successor': j.replaced_by_job_id }, j.replaced_by_job_id)) : ''));
  });
  const attempts = el('div', { id: 'attempts' });
  for (const a of (h.attempts || []).slice().reverse()) {
    attempts.append(el('div', { class: 'attempt card' },
      el('h3', {}, fmtTime(a.time), ' · ', a.validate_only ? 'validate-only check' : 'refused update', ' of ', jobLink(a.running_job_id)),
      reportView(a.report)));
  }
  main.replaceChildren(el('h1', {}, 'Lineage of ', name), section('generations-card', `Generations (${jobs.length})`, gens),
    section('attempts-card', `Update attempts (${(h.attempts || []).length})`, attempts.childElementCount ? attempts : el('p', { class: 'muted' }, 'no refused or validate-only attempts')));
  markLoaded();
}

// ---- update preview: /jobs/{id_or_name}/update ----

/** previewMarks computes the marks of both graphs from a report. */
export function previewMarks(oldModel, newModel, report, mapping) {
  const oldMarks = new Map(), newMarks = new Map();
  const newNames = new Set(newModel ? newModel.nodes.map((n) => n.name) : []);
  const target = new Map();
  for (const [o, n] of Object.entries(mapping || {})) target.set(o, n);
  for (const m of report.matches || []) target.set(m.old, m.new);
  const errs = new Map();
  for (const f of report.errors || []) (errs.get(f.step) || errs.set(f.step, []).get(f.step)).push(f);
  const dropped = new Set((report.dropped_state || []).map((d) => d.step));
  const targetOf = (name) => {
    if (target.has(name)) return target.get(name);
    // A step inside a composite (a windowed Combine's "X/Window") follows
    // its composite when the pasted text names only the composite.
    const c = compositeOf(name);
    if (newModel && !newNames.has(name) && c) {
      const pt = target.has(c) ? target.get(c) : c;
      if (pt === '') return '';
      if (newNames.has(pt) || newNames.has(pt + name.slice(c.length))) return pt + name.slice(c.length);
    }
    return name;
  };
  const inner = (name) => !newNames.has(name) && newNames.has(compositeOf(name));
  for (const n of oldModel.nodes) {
    const t = targetOf(n.name);
    const e = errs.get(n.name);
    if (e) oldMarks.set(n.name, { mark: 'refused', label: `refused: ${e[0].code}`, note: e.map((f) => `${f.code}: ${f.reason}${f.fix ? '\nfix: ' + f.fix : ''}`).join('\n') });
    else if (t === '' || (!newNames.has(t) && !inner(t) && newModel)) oldMarks.set(n.name, { mark: 'removed', label: dropped.has(n.name) ? 'removed · state dropped' : 'removed' });
    else if (t !== n.name) oldMarks.set(n.name, { mark: 'renamed', label: `renamed → ${t}` });
    else oldMarks.set(n.name, { mark: 'matched', label: n.keyed ? 'matched · state carried' : 'matched' });
    if (t && newNames.has(t)) {
      const om = oldMarks.get(n.name);
      newMarks.set(t, om.mark === 'refused' ? { ...om } : om.mark === 'renamed' ? { mark: 'renamed', label: `renamed from ${n.name}` } : { mark: 'matched', label: om.label });
    }
  }
  for (const n of newModel ? newModel.nodes : []) if (!newMarks.has(n.name)) newMarks.set(n.name, { mark: 'added', label: 'added' });
  return { oldMarks, newMarks };
}

/**
 * loadErrorView shows why a pipeline does not load, with each
 * file:line:column of the message as a link that selects that line in
 * the pipeline's text area.
 */
function loadErrorView(e, text) {
  const msg = e instanceof ApiError ? e.message : String(e && e.message ? e.message : e);
  const code = e instanceof ApiError && e.code ? e.code : '';
  const view = el('div', { id: 'load-error', class: 'error', role: 'alert', 'data-code': code });
  view.append(el('p', {}, code ? el('strong', {}, code + ': ') : '', msg));
  const at = /([^\s:]+):(\d+):(\d+): ([^\n]*)/g;
  let m;
  while ((m = at.exec(msg))) {
    const line = +m[2], col = +m[3];
    const link = el('a', { href: '#pipeline', class: 'position', 'data-file': m[1], 'data-line': line, 'data-column': col }, `${m[1]} line ${line}, column ${col}`);
    link.addEventListener('click', (ev) => {
      ev.preventDefault();
      const lines = text.value.split('\n');
      const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0) + Math.max(0, col - 1);
      const end = lines.slice(0, line).reduce((n, l) => n + l.length + 1, 0) - 1;
      text.focus();
      text.setSelectionRange(Math.min(start, end), Math.max(start, end));
    });
    view.append(el('p', { class: 'position-line' }, link, ': ', m[4]));
  }
  return view;
}

async function previewPage(ref) {
  let job;
  try {
    job = await api('GET', '/v1/jobs/' + encodeURIComponent(ref));
  } catch (e) { showError(main, e); return; }
  document.title = `Update preview of ${job.name} · weir`;
  const oldModel = modelOf(job.graph);
  const text = el('textarea', { id: 'pipeline', rows: 18, spellcheck: 'false' });
  text.value = job.pipeline || '';
  const file = el('input', { type: 'file', id: 'pipeline-file', accept: '.yaml,.yml,text/yaml' });
  file.addEventListener('change', async () => { if (file.files[0]) text.value = await file.files[0].text(); });
  const mapping = el('input', { id: 'mapping', type: 'text', placeholder: '{"OldStep": "NewStep"}', spellcheck: 'false' });
  const jinja = el('input', { id: 'jinja-variables', type: 'text', placeholder: '{"env": "prod"}', spellcheck: 'false' });
  const allow = el('input', { id: 'allow-source-change', type: 'checkbox' });
  const out = el('div', { id: 'preview-result', role: 'status' });
  const oldBox = el('div', { id: 'old-graph', class: 'graph-box' });
  const newBox = el('div', { id: 'new-graph', class: 'graph-box' });
  const rendered = el('div', { id: 'rendered-box' });
  drawGraph(oldBox, oldModel);
  const jsonField = (input, what) => {
    if (!input.value.trim()) return [undefined, null];
    try {
      const v = JSON.parse(input.value);
      if (what === 'Jinja variables' && (v === null || typeof v !== 'object' || Array.isArray(v))) return [undefined, `The ${what} are not a JSON object`];
      return [v, null];
    } catch (e) { return [undefined, `The ${what} are not JSON: ${e.message}`]; }
  };
  const check = async () => {
    const [map, mapErr] = jsonField(mapping, 'name mapping');
    const [vars, varsErr] = jsonField(jinja, 'Jinja variables');
    if (mapErr || varsErr) { out.replaceChildren(el('p', { class: 'error' }, mapErr || varsErr)); return; }
    // The server renders a template (given variables, or none when the
    // text uses Jinja syntax) and reads the new pipeline's graph: the
    // preview draws what the server's check read, nothing of its own.
    const jinjaVariables = vars || (/\{\{|\{%|\{#/.test(text.value) ? {} : undefined);
    out.replaceChildren(el('p', { class: 'muted' }, 'checking…'));
    rendered.replaceChildren();
    let res;
    try {
      res = await api('POST', '/v1/jobs:update', { name: job.name, pipeline: text.value, pipeline_file: job.pipeline_file || undefined, base_dir: job.base_dir,
        transform_name_mapping: mapping.value.trim() || undefined, allow_source_change: allow.checked || undefined, validate_only: true,
        jinja_variables: jinjaVariables }, { allowError: true });
    } catch (e) {
      // The pipeline does not load (YAML, Jinja, an unknown transform...):
      // no report and no graph, the error at its file:line:column.
      drawGraph(oldBox, oldModel);
      newBox.replaceChildren(el('p', { class: 'muted' }, 'The new pipeline does not load: no graph to draw.'));
      out.replaceChildren(loadErrorView(e, text));
      out.dataset.checked = 'true';
      return;
    }
    const body = res && res.body ? res.body : res;
    if (!body || !body.report) { showError(out, new Error('the server answered without a report')); return; }
    const newModel = body.graph ? modelOf(body.graph) : null;
    const { oldMarks, newMarks } = previewMarks(oldModel, newModel, body.report, map || {});
    drawGraph(oldBox, oldModel, { marks: oldMarks });
    if (newModel) drawGraph(newBox, newModel, { marks: newMarks });
    else newBox.replaceChildren(el('p', { class: 'muted' }, 'The server sent no graph of the new pipeline; the report above is its check.'));
    if (body.rendered_pipeline !== undefined) {
      rendered.replaceChildren(el('details', { id: 'rendered' }, el('summary', {}, 'The pipeline as the Jinja rendering left it'), el('pre', { class: 'pipeline' }, body.rendered_pipeline)));
    }
    out.replaceChildren(body.error && body.error.code !== 'INCOMPATIBLE_UPDATE' ? el('p', { class: 'error' }, `${body.error.code}: ${body.error.message}`) : '', reportView(body.report),
      body.plan ? planView(body.plan) : '');
    out.dataset.checked = 'true';
  };
  // Rehearse on the last N minutes: the server runs the running job's
  // pipeline (twice, for its noise) and the new one in sandboxes over the
  // input its topics retain, compares their outputs and changes nothing
  // (a validate-only update with weir_rehearse=required;since=Nm).
  const minutes = el('input', { id: 'rehearse-minutes', type: 'number', min: '1', max: '10080', value: '15' });
  const rehearsal = el('div', { id: 'rehearsal-result', role: 'status' });
  const rehearse = async () => {
    const [, mapErr] = jsonField(mapping, 'name mapping');
    const n = Math.floor(Number(minutes.value));
    if (mapErr || !(n >= 1)) { rehearsal.replaceChildren(el('p', { class: 'error' }, mapErr || 'Give a number of minutes (at least 1).')); return; }
    rehearsal.replaceChildren(el('p', { class: 'muted' }, `rehearsing on the last ${n} minutes…`));
    let res;
    try {
      res = await api('POST', '/v1/jobs:update', { name: job.name, pipeline: text.value, pipeline_file: job.pipeline_file || undefined, base_dir: job.base_dir,
        transform_name_mapping: mapping.value.trim() || undefined, allow_source_change: allow.checked || undefined, validate_only: true,
        service_options: [`weir_rehearse=required;since=${n}m`] }, { allowError: true });
    } catch (e) {
      rehearsal.replaceChildren(loadErrorView(e, text));
      rehearsal.dataset.done = 'error';
      return;
    }
    const body = res && res.body ? res.body : res;
    rehearsal.replaceChildren(rehearsalView(body, job.name));
    rehearsal.dataset.done = body && body.rehearsal ? (body.rehearsal.passed ? 'passed' : 'refused') : 'error';
  };
  main.replaceChildren(el('h1', {}, 'Update preview of ', jobLink(job.id, job.name)),
    el('p', { class: 'muted' }, 'Paste or upload the new pipeline: the server checks it against the running job (validate only; nothing changes).'),
    section('input-card', 'New pipeline', text, el('p', {}, file),
      el('label', {}, 'Transform name mapping (JSON) ', mapping), ' ', el('label', {}, 'Jinja variables (JSON) ', jinja), ' ', el('label', {}, allow, ' allow a changed source'),
      el('p', {}, el('button', { id: 'check', class: 'primary', onclick: check }, 'Check compatibility'), ' ',
        el('button', { id: 'rehearse', onclick: rehearse }, 'Rehearse'), ' on the last ', minutes, ' minutes of retained input')),
    out, rehearsal, rendered,
    el('div', { class: 'two' }, section('old-card', 'Running job', oldBox), section('new-card', 'New pipeline', newBox)),
    el('p', { class: 'legend-line' }, ...['matched', 'renamed', 'added', 'removed', 'refused'].map((m) => el('span', { class: 'legend mark-' + m }, m))));
  markLoaded();
}

// ---- topics and subscriptions: /topics ----

async function topicsPage() {
  document.title = 'Topics & subscriptions · weir';
  const msg = el('div', { id: 'topics-message' });
  const topics = el('tbody'), subs = el('tbody');
  main.replaceChildren(el('h1', {}, 'Topics & subscriptions'), msg,
    section('topics-card', 'Topics', el('table', { id: 'topics' }, el('thead', {}, el('tr', {}, ...['Topic', 'Messages', 'Bytes', 'Publish rate', 'Retention', 'Subscriptions'].map((h) => el('th', {}, h)))), topics)),
    section('subs-card', 'Subscriptions', el('table', { id: 'subscriptions' }, el('thead', {}, el('tr', {}, ...['Subscription', 'Topic', 'Backlog', 'Ack rate', 'Ack pending', 'Read by', 'Snapshots'].map((h) => el('th', {}, h)))), subs)));
  const prev = new Map();
  const rate = (key, v, t) => {
    const p = prev.get(key);
    prev.set(key, [v, t]);
    return p && t > p[1] ? ((v - p[0]) / ((t - p[1]) / 1000)) : undefined;
  };
  poll(async () => {
    let tl, sl;
    try {
      [tl, sl] = await Promise.all([api('GET', '/v1/topics'), api('GET', '/v1/subscriptions')]);
    } catch (e) { showError(msg, e); return; }
    msg.replaceChildren();
    const now = Date.now();
    const [active, snaps] = await Promise.all([
      api('GET', '/v1/jobs?status=active').then((l) => Promise.all((l.jobs || []).map((j) => api('GET', '/v1/jobs/' + encodeURIComponent(j.id)).catch(() => null)))).catch(() => []),
      api('GET', '/v1/snapshots').then((r) => r.snapshots || []).catch(() => [])]);
    // The server says which active jobs read a subscription it made
    // (read_by); a user's own subscription is read by the active jobs whose
    // source names it and that read no replacement of it. An ended job is
    // never listed.
    const readers = (sub) => sub.made_by ? (sub.read_by || []).map((r) => ({ id: r.job_id, name: r.job_name }))
      : active.filter(Boolean).filter((j) => !terminal.has(j.state)).filter((j) => ((j.graph && j.graph.steps) || []).some((s) => s.source && s.source.kind === 'pubsub' &&
        s.source.identity === 'subscription/' + sub.name && !(j.subscriptions && j.subscriptions[s.name])));
    topics.replaceChildren(...(tl.topics || []).map((t) => el('tr', { 'data-topic': t.name },
      el('td', { class: 'mono' }, t.name), el('td', { class: 'num' }, fmtNum(t.messages)), el('td', { class: 'num' }, fmtNum(t.bytes)),
      el('td', { class: 'num' }, (() => { const r = rate('t/' + t.name, t.last_seq, now); return r === undefined ? '…' : fmtNum(r) + '/s'; })()),
      el('td', {}, t.retention), el('td', { class: 'num' }, t.subscriptions))));
    subs.replaceChildren(...(sl.subscriptions || []).map((s) => el('tr', { 'data-subscription': s.name },
      el('td', { class: 'mono' }, s.name), el('td', { class: 'mono' }, s.topic), el('td', { class: 'num' }, fmtNum(s.backlog)),
      el('td', { class: 'num' }, (() => { const r = rate('s/' + s.name, s.ack_floor, now); return r === undefined ? '…' : fmtNum(r) + '/s'; })()),
      el('td', { class: 'num' }, fmtNum(s.num_ack_pending)),
      el('td', {}, ...readers(s).map((j) => jobLink(j.id, j.name))),
      el('td', {}, snaps.flatMap((x) => (x.pubsub_metadata || []).filter((m) => m.subscription === s.name).map((m) => `${m.snapshot_name} (job snapshot ${x.id})`)).join(', ')))));
    markLoaded();
  });
}

// ---- schedules: /schedules and /schedules/{name} ----

function cadenceOf(s) { return s.cron ? 'cron ' + s.cron : 'every ' + s.every; }

function currentVersionOf(s) {
  const vs = (s.versions || []).filter((v) => !v.rolled_back);
  return vs.length ? vs[vs.length - 1].version : undefined;
}

async function schedulesPage() {
  document.title = 'Schedules · weir';
  const msg = el('div', { id: 'schedules-message' });
  const body = el('tbody');
  main.replaceChildren(el('h1', {}, 'Schedules'), msg,
    el('table', { id: 'schedules' }, el('thead', {}, el('tr', {}, ...['Schedule', 'Job', 'Cadence', 'Version', 'Next partition', 'Next due', 'Published', 'Running', 'Waiting', 'Failed', 'State'].map((h) => el('th', {}, h)))), body));
  poll(async () => {
    let list;
    try { list = await api('GET', '/v1/schedules'); } catch (e) { showError(msg, e); return; }
    msg.replaceChildren((list.schedules || []).length ? '' : el('p', { class: 'muted' }, 'No schedule: create one with weir schedules create NAME --pipeline P.yaml --every 24h --files PATTERN.'));
    body.replaceChildren(...(list.schedules || []).map((s) => {
      const n = {};
      for (const r of s.runs || []) n[r.status] = (n[r.status] || 0) + 1;
      return el('tr', { 'data-schedule': s.name },
        el('td', {}, el('a', { href: '/schedules/' + encodeURIComponent(s.name) }, s.name)), el('td', {}, s.job_name), el('td', {}, cadenceOf(s)),
        el('td', { class: 'num' }, currentVersionOf(s)), el('td', { class: 'mono' }, s.next_partition || '–'), el('td', {}, fmtTime(s.next_due)),
        el('td', { class: 'num' }, n.published || 0), el('td', { class: 'num' }, n.running || 0), el('td', { class: 'num' }, (n.waiting || 0) + (n.retrying || 0)),
        el('td', { class: 'num' }, n.failed || 0), el('td', {}, s.paused ? 'paused' : 'active'));
    }));
    markLoaded();
  });
}

async function schedulePage(name) {
  document.title = `${name} · schedule · weir`;
  const msg = el('div', { id: 'schedule-message' });
  const facts = el('dl', { class: 'facts' });
  const grid = el('div', { id: 'partition-grid', class: 'partition-grid', role: 'list' });
  const versions = el('tbody'), runs = el('tbody');
  main.replaceChildren(el('h1', {}, 'Schedule ', el('span', { class: 'mono' }, name)), msg, facts,
    section('grid-card', 'Partitions', el('p', { class: 'muted legend' }, ...['published', 'staged', 'running', 'waiting', 'retrying', 'failed'].map((st) => el('span', { class: 'cell cell-' + st }, st))), grid),
    section('versions-card', 'Versions', el('table', { id: 'schedule-versions' }, el('thead', {}, el('tr', {}, ...['Version', 'From partition', 'Pipeline', 'Created', 'State'].map((h) => el('th', {}, h)))), versions)),
    section('runs-card', 'Runs', el('table', { id: 'schedule-runs' }, el('thead', {}, el('tr', {}, ...['Partition', 'Status', 'Version', 'Attempts', 'Job', 'Manifest digest', 'Next attempt', 'Error'].map((h) => el('th', {}, h)))), runs)));
  poll(async () => {
    let s;
    try { s = await api('GET', '/v1/schedules/' + encodeURIComponent(name)); } catch (e) { showError(msg, e); return; }
    msg.replaceChildren();
    // A failed or retrying partition whose run staged rows it did not
    // publish shows as staged (the publication log of the job name says).
    const staged = new Set(await api('GET', '/v1/partitions/' + encodeURIComponent(s.job_name))
      .then((r) => (r.partitions || []).filter((p) => p.status === 'staged').map((p) => p.partition)).catch(() => []));
    const kv = [['Job name', s.job_name], ['Cadence', cadenceOf(s)], ['Start', fmtTime(s.start)], ['Delay', s.delay], ['Partition template', s.partition_template],
      ['Files', (s.files || []).join(', ')], ['State', s.paused ? 'paused' : 'active'], ['Next partition', `${s.next_partition || '–'} (due ${fmtTime(s.next_due)})`]];
    facts.replaceChildren(...kv.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
    grid.replaceChildren(...(s.runs || []).map((r) => {
      const shown = (r.status === 'failed' || r.status === 'retrying') && staged.has(r.partition) ? 'staged' : r.status;
      return el('a', { class: 'cell cell-' + shown, role: 'listitem', 'data-partition': r.partition, 'data-status': shown, href: r.job_id ? '/jobs/' + encodeURIComponent(r.job_id) : null,
        title: `${r.partition}: ${shown}, version ${r.version}, ${r.attempts} attempt(s)${r.error ? ' — ' + r.error : ''}` }, r.partition, el('small', {}, ` v${r.version}`));
    }), el('span', { class: 'cell cell-next', 'data-partition': s.next_partition, 'data-status': 'next' }, s.next_partition || '–', el('small', {}, ' next')));
    versions.replaceChildren(...(s.versions || []).map((v) => el('tr', { 'data-version': v.version },
      el('td', { class: 'num' }, v.version), el('td', { class: 'mono' }, v.from_partition), el('td', { class: 'mono' }, v.pipeline_file),
      el('td', {}, fmtTime(v.create_time)), el('td', {}, v.rolled_back ? 'rolled back ' + fmtTime(v.rolled_back_time) : 'active'))));
    runs.replaceChildren(...(s.runs || []).map((r) => el('tr', { 'data-partition': r.partition },
      el('td', { class: 'mono' }, r.partition), el('td', {}, r.status), el('td', { class: 'num' }, r.version), el('td', { class: 'num' }, r.attempts),
      el('td', {}, r.job_id ? jobLink(r.job_id) : '–'), el('td', { class: 'mono' }, r.manifest_digest ? r.manifest_digest.slice(0, 19) : '–'),
      el('td', {}, r.next_attempt ? fmtTime(r.next_attempt) : '–'), el('td', {}, r.error || ''))));
    markLoaded();
  });
}

// ---- cluster: /cluster ----

/** keyGroupsOf says which key groups a member holds: the leader all of its jobs', a follower none (it keeps a replica). */
function keyGroupsOf(m) {
  if (!m.leader) return 'none (replica)';
  const jobs = m.jobs || [];
  if (!jobs.length) return 'all (no job runs)';
  const out = [`all of ${jobs.length} job(s): `];
  jobs.forEach((j, i) => out.push(...(i ? [', '] : []), jobLink(j, j)));
  return el('span', {}, ...out);
}

async function clusterPage() {
  document.title = 'Cluster · weir';
  const msg = el('div', { id: 'cluster-message' });
  const head = el('p', { id: 'cluster-name' });
  const notes = el('div', { id: 'cluster-notes' });
  const body = el('tbody');
  main.replaceChildren(el('h1', {}, 'Cluster'), msg, head,
    el('table', { id: 'members' }, el('thead', {}, el('tr', {}, ...['Member', 'Address', 'Role', 'Key groups', 'Log sequence', 'Behind', 'Started', 'Last seen'].map((h) => el('th', {}, h)))), body),
    notes);
  poll(async () => {
    let r;
    try {
      r = await api('GET', '/v1/cluster/members');
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        msg.replaceChildren(el('p', { class: 'muted' }, 'This server runs alone: it is no member of a cluster. Members start with weir server --cluster NAME --nats-url URL (docs/CLUSTER.md).'));
        head.replaceChildren();
        body.replaceChildren();
        notes.replaceChildren();
        markLoaded();
        return;
      }
      showError(msg, e);
      return;
    }
    msg.replaceChildren();
    const members = r.members || [];
    head.replaceChildren(`Cluster ${r.cluster}, answered by member `, el('span', { class: 'mono' }, r.answered), ` (${members.length} member${members.length === 1 ? '' : 's'})`);
    const leader = members.find((m) => m.leader);
    body.replaceChildren(...members.map((m) => {
      const seen = age(m.last_seen);
      return el('tr', { 'data-member': m.id, 'data-role': m.role, class: m.up ? '' : 'down' },
        el('td', { class: 'mono' }, m.id), el('td', { class: 'mono' }, m.address),
        el('td', {}, m.up ? m.role : `${m.role} (not seen for ${fmtSeconds(seen)})`),
        el('td', {}, keyGroupsOf(m)), el('td', { class: 'num' }, fmtNum(m.log_sequence)),
        el('td', { class: 'num' }, leader && !m.leader ? fmtNum(Math.max(0, leader.log_sequence - m.log_sequence)) : '–'),
        el('td', {}, fmtTime(m.start_time)), el('td', {}, seen === undefined ? '–' : fmtSeconds(seen) + ' ago'));
    }));
    notes.replaceChildren(...members.filter((m) => (m.settings_differ || []).length).map((m) => el('p', { class: 'warn', 'data-settings-differ': m.id },
      `Member ${m.id} runs with other settings than the leader: --${m.settings_differ.join(', --')}. A member that takes over runs every job with its own: give every member the same.`)));
    markLoaded();
  });
}

// ---- router ----

function route() {
  showAuth();
  const p = location.pathname;
  let m;
  if (p === '/') return jobsPage();
  if (p === '/topics') return topicsPage();
  if (p === '/schedules') return schedulesPage();
  if (p === '/cluster') return clusterPage();
  if ((m = /^\/schedules\/([^/]+)$/.exec(p))) return schedulePage(decodeURIComponent(m[1]));
  if ((m = /^\/jobs\/([^/]+)\/update$/.exec(p))) return previewPage(decodeURIComponent(m[1]));
  if ((m = /^\/jobs\/([^/]+)$/.exec(p))) return jobPage(decodeURIComponent(m[1]));
  if ((m = /^\/lineage\/([^/]+)$/.exec(p))) return lineagePage(decodeURIComponent(m[1]));
  main.replaceChildren(el('p', { class: 'error' }, `No console page at ${p}: see the jobs at /.`));
}

route();
