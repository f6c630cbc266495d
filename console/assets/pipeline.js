// A reader of just enough of a Beam-YAML-style pipeline to draw it: the
// transforms' names, types and inputs. The server's check is the judge of
// the pipeline; this only lets the update preview draw the new graph.

function unquote(s) {
  s = s.trim();
  const hash = s.search(/\s#/);
  if (hash >= 0 && !/^["']/.test(s)) s = s.slice(0, hash).trim();
  if ((s.startsWith('"') && s.endsWith('"')) || (s.startsWith("'") && s.endsWith("'"))) s = s.slice(1, -1);
  return s;
}

function flow(v) {
  v = v.trim();
  if (v.startsWith('[') && v.endsWith(']')) return v.slice(1, -1).split(',').map(unquote).filter(Boolean);
  if (v.startsWith('{') && v.endsWith('}')) {
    return v.slice(1, -1).split(',').map((kv) => unquote(kv.slice(kv.indexOf(':') + 1))).filter(Boolean);
  }
  return v ? [unquote(v)] : [];
}

/**
 * readPipeline returns {model: {nodes, edges}} of a pipeline's text, or
 * {error} saying why it could not be read.
 */
export function readPipeline(text) {
  const lines = text.replace(/\t/g, '    ').split('\n');
  let i = lines.findIndex((l) => /^\s*transforms\s*:\s*$/.test(l));
  if (i < 0) return { error: 'no "transforms:" list found' };
  const chain = lines.some((l) => /^\s*type\s*:\s*chain\s*$/.test(l) && !/^\s*-/.test(l));
  const items = [];
  let itemIndent = -1, cur = null, listKey = null, listIndent = -1;
  for (i = i + 1; i < lines.length; i++) {
    const raw = lines[i];
    if (!raw.trim() || raw.trim().startsWith('#')) continue;
    const indent = raw.search(/\S/);
    let body = raw.slice(indent);
    if (itemIndent < 0) {
      if (!body.startsWith('- ')) break;
      itemIndent = indent;
    }
    if (indent < itemIndent) break;
    let keyIndent = indent;
    if (indent === itemIndent && body.startsWith('- ')) {
      cur = { name: '', type: '', inputs: [] };
      items.push(cur);
      body = body.slice(2);
      keyIndent = indent + 2;
      listKey = null;
    }
    if (!cur) continue;
    if (listKey && keyIndent > listIndent && body.startsWith('- ')) {
      cur.inputs.push(unquote(body.slice(2)));
      continue;
    }
    if (listKey && keyIndent > listIndent && /^[\w.-]+\s*:/.test(body) && keyIndent !== itemIndent + 2) {
      cur.inputs.push(unquote(body.slice(body.indexOf(':') + 1)));
      continue;
    }
    listKey = null;
    if (keyIndent !== itemIndent + 2) continue;
    const m = /^([\w-]+)\s*:\s*(.*)$/.exec(body);
    if (!m) continue;
    const [, key, value] = m;
    if (key === 'name') cur.name = unquote(value);
    else if (key === 'type') cur.type = unquote(value);
    else if (key === 'input' || key === 'inputs') {
      if (value.trim() === '') { listKey = key; listIndent = keyIndent; } else cur.inputs.push(...flow(value));
    }
  }
  if (items.length === 0) return { error: 'the transforms list is empty' };
  const nodes = [], edges = [];
  items.forEach((t, k) => {
    if (!t.name) t.name = t.type || `transform ${k + 1}`;
    if (chain && t.inputs.length === 0 && k > 0) t.inputs.push(items[k - 1].name);
  });
  const names = new Set(items.map((t) => t.name));
  for (const t of items) {
    nodes.push({ name: t.name, kind: t.type, keyed: /^(Combine|GroupByKey|Stateful)/.test(t.type) });
    for (const inp of t.inputs) {
      const from = names.has(inp) ? inp : inp.replace(/\.[^.]*$/, '');
      if (names.has(from)) edges.push({ from, to: t.name, side: false });
    }
  }
  return { model: { nodes, edges } };
}
