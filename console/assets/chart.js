// Line charts over time, drawn as SVG: one chart per metric, one line per
// series, with the value range and time range written on the axes.

import { svg } from './graph.js';

const W = 420, H = 150, L = 52, R = 10, T = 22, B = 24;
const colors = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2', '#be185d', '#4b5563'];

function label(v, unit) {
  if (!Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  const s = a >= 1e6 ? (v / 1e6).toFixed(1) + 'M' : a >= 1e4 ? (v / 1e3).toFixed(1) + 'k' : a >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(2);
  return s + (unit ? ' ' + unit : '');
}

function clock(ms) { return new Date(ms).toISOString().slice(11, 19); }

/**
 * drawChart draws series [{label, points: [[unix_ms, value]]}] as a chart
 * titled title into container (replacing what it held), with marks
 * [{t: unix_ms, label}] (a job of the lineage taking over) as dashed
 * vertical lines. The svg's data-t0 and data-t1 are its time range.
 */
export function drawChart(container, title, series, unit, marks = []) {
  const pts = series.flatMap((s) => s.points);
  const root = svg('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, 'data-points': pts.length });
  root.append(svg('text', { x: L, y: 14, class: 'chart-title' }, title));
  if (pts.length === 0) {
    root.append(svg('text', { x: W / 2, y: H / 2, class: 'muted', 'text-anchor': 'middle' }, 'no points yet'));
    container.replaceChildren(root);
    return root;
  }
  let t0 = Infinity, t1 = -Infinity, v0 = Infinity, v1 = -Infinity;
  for (const [t, v] of pts) { t0 = Math.min(t0, t); t1 = Math.max(t1, t); v0 = Math.min(v0, v); v1 = Math.max(v1, v); }
  v0 = Math.min(0, v0);
  if (v1 === v0) v1 = v0 + 1;
  if (t1 === t0) { t0 -= 1000; t1 += 1000; }
  root.setAttribute('data-t0', String(t0));
  root.setAttribute('data-t1', String(t1));
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - (v - v0) / (v1 - v0)) * (H - T - B);
  root.append(svg('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' }));
  root.append(svg('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' }));
  root.append(svg('text', { x: L - 4, y: T + 4, class: 'tick', 'text-anchor': 'end' }, label(v1, unit)));
  root.append(svg('text', { x: L - 4, y: H - B, class: 'tick', 'text-anchor': 'end' }, label(v0, unit)));
  root.append(svg('text', { x: L, y: H - 8, class: 'tick' }, clock(t0)));
  root.append(svg('text', { x: W - R, y: H - 8, class: 'tick', 'text-anchor': 'end' }, clock(t1) + ' UTC'));
  for (const m of marks) {
    if (m.t < t0 || m.t > t1) continue;
    const line = svg('line', { x1: x(m.t), y1: T, x2: x(m.t), y2: H - B, class: 'mark', 'data-mark': String(m.t) });
    line.append(svg('title', {}, `${m.label} at ${clock(m.t)} UTC`));
    root.append(line);
  }
  series.forEach((s, i) => {
    if (s.points.length === 0) return;
    const d = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    const line = svg('polyline', { points: d, class: 'series', stroke: colors[i % colors.length], 'data-series': s.label, 'data-points': s.points.length });
    line.append(svg('title', {}, `${s.label}: last ${label(s.points[s.points.length - 1][1], unit)}`));
    root.append(line);
    if (s.points.length === 1) root.append(svg('circle', { cx: x(s.points[0][0]), cy: y(s.points[0][1]), r: 3, fill: colors[i % colors.length] }));
  });
  if (series.length > 1) {
    const shown = series.filter((s) => s.points.length).slice(0, 4);
    shown.forEach((s, i) => root.append(svg('text', { x: W - R - 4, y: T + 12 + i * 12, class: 'legend', 'text-anchor': 'end', fill: colors[series.indexOf(s) % colors.length] }, s.label)));
  }
  container.replaceChildren(root);
  return root;
}
