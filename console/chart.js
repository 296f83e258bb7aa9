// A small time-series line chart in SVG: a few series over the last N samples, no library.
const NS = 'http://www.w3.org/2000/svg';
const COLOURS = ['#1f5fbf', '#b3261e', '#1b7f3b', '#8a4b00', '#6b3fa0', '#00707a', '#5c5c5c', '#a0306b'];

function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

// series: Map name -> array of numbers (oldest first, same length). Returns the <figure>.
export function lineChart(title, series, unit) {
  const W = 600, H = 160, L = 44, B = 18, T = 8;
  const names = [...series.keys()];
  const all = names.flatMap((n) => series.get(n));
  const max = Math.max(1, ...all);
  const len = Math.max(2, ...names.map((n) => series.get(n).length));
  const x = (i) => L + (i * (W - L - 4)) / (len - 1);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `${title}: ${names.map((n) => `${n} ${fmt(last(series.get(n)))} ${unit}`).join(', ')}` });
  for (const f of [0, 0.5, 1]) {
    root.append(svg('line', { x1: L, x2: W - 4, y1: y(max * f), y2: y(max * f), class: 'grid' }));
    const label = svg('text', { x: L - 4, y: y(max * f) + 4, 'text-anchor': 'end', class: 'axis' });
    label.textContent = fmt(max * f);
    root.append(label);
  }
  names.forEach((n, k) => {
    const pts = series.get(n).map((v, i) => `${x(i + len - series.get(n).length)},${y(v)}`).join(' ');
    if (pts) root.append(svg('polyline', { points: pts, fill: 'none', stroke: COLOURS[k % COLOURS.length], 'stroke-width': 2 }));
  });
  const legend = document.createElement('ul');
  legend.className = 'legend';
  names.forEach((n, k) => {
    const li = document.createElement('li');
    const sw = svg('svg', { width: 12, height: 12, 'aria-hidden': 'true' });
    sw.append(svg('rect', { width: 12, height: 12, fill: COLOURS[k % COLOURS.length] }));
    li.append(sw, ` ${n}: ${fmt(last(series.get(n)))} ${unit}`);
    legend.append(li);
  });
  const fig = document.createElement('figure');
  fig.className = 'chart';
  const cap = document.createElement('figcaption');
  cap.textContent = title;
  fig.append(cap, root, legend);
  return fig;
}

const last = (a) => (a.length ? a[a.length - 1] : 0);
const fmt = (v) => (v >= 100 ? Math.round(v).toString() : v >= 10 ? v.toFixed(1) : v.toFixed(2));
