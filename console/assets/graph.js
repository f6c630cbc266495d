// The pipeline graph: a model built from the job's canonical graph JSON
// (or from a pasted pipeline), a layered left-to-right layout, and an SVG
// drawing with steps as boxes, edges as curves and composites (steps named
// "Parent/Child") collapsible into one box.

const NS = 'http://www.w3.org/2000/svg';
const W = 210, H = 70, GX = 60, GY = 22, PAD = 16;

/** svg makes an SVG element with attributes. */
export function svg(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/**
 * modelOf turns a canonical graph ({steps, collections}) into
 * {nodes: [{name, kind, keyed}], edges: [{from, to, side}]}.
 */
export function modelOf(g) {
  const producer = new Map();
  for (const c of (g && g.collections) || []) producer.set(c.id, c.producer);
  const nodes = [], edges = [];
  for (const st of (g && g.steps) || []) {
    const keyed = !!(st.key_coder || (st.state && st.state.length) || (st.timers && st.timers.length));
    nodes.push({ name: st.name, kind: st.kind || '', keyed, source: st.source ? st.source.identity : '' });
    for (const id of Object.values(st.inputs || {})) {
      const p = producer.get(id);
      if (p) edges.push({ from: p, to: st.name, side: false });
    }
    for (const si of st.side_inputs || []) {
      const p = producer.get(si.collection);
      if (p) edges.push({ from: p, to: st.name, side: true });
    }
  }
  return { nodes, edges };
}

/** compositeOf is the composite a step belongs to ("" for a top-level step). */
export function compositeOf(name) {
  const i = name.indexOf('/');
  return i < 0 ? '' : name.slice(0, i);
}

/** collapse replaces the steps of every collapsed composite with one node. */
function collapse(model, collapsed) {
  // A composite's box stands for its inner steps and for the step named
  // like the composite itself (a windowed Combine "X" and its "X/Window").
  const rep = (n) => { const c = compositeOf(n) || n; return collapsed.has(c) ? c : n; };
  const nodes = [], seen = new Map();
  for (const n of model.nodes) {
    const r = rep(n.name);
    if (r === n.name && !collapsed.has(r)) { nodes.push({ ...n, members: [n.name] }); continue; }
    let c = seen.get(r);
    if (!c) { c = { name: r, kind: 'composite', keyed: false, composite: true, members: [] }; seen.set(r, c); nodes.push(c); }
    c.members.push(n.name);
    c.keyed = c.keyed || n.keyed;
  }
  const edges = [], dedupe = new Set();
  for (const e of model.edges) {
    const from = rep(e.from), to = rep(e.to);
    if (from === to) continue;
    const k = from + '\u0000' + to + '\u0000' + e.side;
    if (dedupe.has(k)) continue;
    dedupe.add(k);
    edges.push({ from, to, side: e.side });
  }
  return { nodes, edges };
}

/** layout places nodes in layers by their longest path from a source. */
export function layout(model) {
  const byName = new Map(model.nodes.map((n) => [n.name, n]));
  const preds = new Map(model.nodes.map((n) => [n.name, []]));
  for (const e of model.edges) if (preds.has(e.to) && byName.has(e.from)) preds.get(e.to).push(e.from);
  const layer = new Map();
  const visiting = new Set();
  const depth = (name) => {
    if (layer.has(name)) return layer.get(name);
    if (visiting.has(name)) return 0; // a cycle (never in a valid graph): cut it
    visiting.add(name);
    let d = 0;
    for (const p of preds.get(name) || []) d = Math.max(d, depth(p) + 1);
    visiting.delete(name);
    layer.set(name, d);
    return d;
  };
  const columns = [];
  for (const n of model.nodes) {
    const d = depth(n.name);
    (columns[d] ||= []).push(n);
  }
  const pos = new Map();
  let rows = 0;
  columns.forEach((col, x) => {
    (col || []).forEach((n, y) => pos.set(n.name, { x: PAD + x * (W + GX), y: PAD + 18 + y * (H + GY) }));
    rows = Math.max(rows, (col || []).length);
  });
  return { pos, width: PAD * 2 + Math.max(1, columns.length) * (W + GX) - GX, height: PAD * 2 + 18 + rows * (H + GY) - GY };
}

function fmt(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  if (Math.abs(n) >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function clip(s, max) { return s.length > max ? s.slice(0, max - 1) + '…' : s; }

/**
 * drawGraph draws model into container. opts: metrics (Map name →
 * StepMetrics), marks (Map name → {mark, note}), collapsed (Set of
 * composite names), onToggle(composite), onSelect(name).
 */
export function drawGraph(container, model, opts = {}) {
  const collapsed = opts.collapsed || new Set();
  const metrics = opts.metrics || new Map();
  const marks = opts.marks || new Map();
  const m = collapse(model, collapsed);
  const { pos, width, height } = layout(m);
  const root = svg('svg', { class: 'graph', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'pipeline graph' });
  const defs = svg('defs');
  const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }));
  defs.append(marker);
  root.append(defs);

  // Frames of expanded composites, behind everything.
  const groups = new Map();
  const composites = new Set(m.nodes.map((n) => compositeOf(n.name)).filter(Boolean));
  for (const n of m.nodes) {
    const c = compositeOf(n.name) || (composites.has(n.name) ? n.name : '');
    if (!c || n.composite) continue;
    const p = pos.get(n.name);
    const g = groups.get(c) || { x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity };
    g.x0 = Math.min(g.x0, p.x); g.y0 = Math.min(g.y0, p.y); g.x1 = Math.max(g.x1, p.x + W); g.y1 = Math.max(g.y1, p.y + H);
    groups.set(c, g);
  }
  for (const [c, g] of groups) {
    const frame = svg('g', { class: 'composite-frame', 'data-composite': c });
    frame.append(svg('rect', { x: g.x0 - 8, y: g.y0 - 20, width: g.x1 - g.x0 + 16, height: g.y1 - g.y0 + 28, rx: 8 }));
    const label = svg('text', { x: g.x0 - 2, y: g.y0 - 7, class: 'composite-label' }, `▾ ${c} (collapse)`);
    label.addEventListener('click', () => opts.onToggle && opts.onToggle(c));
    frame.append(label);
    root.append(frame);
  }

  for (const e of m.edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    const mx = (x1 + x2) / 2;
    root.append(svg('path', { class: e.side ? 'edge side' : 'edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}`,
      'marker-end': 'url(#arrow)', 'data-from': e.from, 'data-to': e.to }));
  }

  for (const n of m.nodes) {
    const p = pos.get(n.name);
    const mk = marks.get(n.name);
    const g = svg('g', { class: 'step' + (n.composite ? ' composite' : '') + (n.keyed ? ' keyed' : '') + (mk ? ' mark-' + mk.mark : ''),
      transform: `translate(${p.x},${p.y})`, 'data-step': n.name, tabindex: 0 });
    g.append(svg('rect', { width: W, height: H, rx: 6 }));
    const title = svg('title', {}, n.name + (n.kind ? ` (${n.kind})` : '') + (mk && mk.note ? '\n' + mk.note : ''));
    g.append(title);
    g.append(svg('text', { x: 8, y: 17, class: 'step-name' }, clip(n.name, 26)));
    if (n.composite) {
      const own = metrics.get(n.name);
      g.append(svg('text', { x: 8, y: 35, class: 'step-line' }, `composite · ${n.members.length} steps` + (own ? ` · out ${fmt(own.elements_out)}` : '')));
      g.append(svg('text', { x: 8, y: 53, class: 'step-line link' }, '▸ expand'));
      g.addEventListener('click', () => opts.onToggle && opts.onToggle(n.name));
    } else {
      const s = metrics.get(n.name);
      if (s) {
        g.setAttribute('data-in', s.elements_in);
        g.setAttribute('data-out', s.elements_out);
        g.setAttribute('data-rejects', s.rejects);
        g.setAttribute('data-late', s.dropped_late_elements);
        g.append(svg('text', { x: 8, y: 34, class: 'step-line counts' }, `in ${fmt(s.elements_in)} · out ${fmt(s.elements_out)} · ${fmt(s.throughput_per_second)}/s`));
        g.append(svg('text', { x: 8, y: 49, class: 'step-line' + (s.rejects || s.dropped_late_elements ? ' warn' : '') },
          `rejects ${fmt(s.rejects)} · late ${fmt(s.dropped_late_elements)}`));
        if (s.watermark) g.append(svg('text', { x: 8, y: 63, class: 'step-line muted' }, 'wm ' + s.watermark.replace('T', ' ').replace(/\.\d+Z$|Z$/, '')));
      } else {
        g.append(svg('text', { x: 8, y: 34, class: 'step-line muted' }, n.kind || ''));
      }
      if (mk) g.append(svg('text', { x: 8, y: H - 5, class: 'step-mark' }, clip(mk.label || mk.mark, 30)));
      if (n.keyed) {
        if (s && s.keys !== undefined) g.setAttribute('data-keys', s.keys);
        const keys = s && s.keys !== undefined ? ` ${fmt(s.keys)} keys` : ' keyed';
        g.append(svg('text', { x: W - 6, y: 17, class: 'step-badge', 'text-anchor': 'end' }, '⚷' + keys));
      }
      if (opts.onSelect) g.addEventListener('click', () => opts.onSelect(n.name));
    }
    root.append(g);
  }
  container.replaceChildren(root);
  return root;
}
