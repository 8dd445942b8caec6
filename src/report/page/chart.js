// volley's charts: line charts drawn as SVG, written for this report
// (no library). Hover shows every visible series' value at the nearest
// point; drag across the plot zooms the x axis, double-click resets it;
// a click on a legend entry hides or shows its series. Each chart keeps
// its zoom and hidden series by id, so the live dashboard can redraw the
// whole page every interval without losing what the reader set.
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#7f7f7f'];
const WIDTH = 860;
const HEIGHT = 280;
const PAD = { left: 64, right: 16, top: 12, bottom: 40 };
const chartState = new Map();

function svgNode(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (parent) parent.appendChild(node);
  return node;
}

function htmlNode(name, attrs, parent, text) {
  const node = document.createElement(name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

// Numbers as people read them: at most three decimals, grouped thousands.
function formatNumber(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return '-';
  return value.toLocaleString('en-US', { maximumFractionDigits: 3 });
}

// A map from [lo, hi] onto [from, to] pixels, linear or logarithmic, with
// its inverse (pixels back to values, for zooming).
function makeScale(lo, hi, from, to, log) {
  const f = log ? Math.log10 : (v) => v;
  const inv = log ? (v) => Math.pow(10, v) : (v) => v;
  const a = f(lo);
  const span = f(hi) - a || 1;
  const map = (v) => from + ((f(log ? Math.max(v, lo) : v) - a) / span) * (to - from);
  map.invert = (px) => inv(a + ((px - from) / (to - from)) * span);
  return map;
}

function niceStep(range, count) {
  const raw = range / count;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const unit = raw / power;
  return power * (unit < 1.5 ? 1 : unit < 3 ? 2 : unit < 7 ? 5 : 10);
}

function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    // Over few decades, 2 and 5 of each decade too, so the axis is readable.
    const steps = Math.log10(hi / lo) <= 2.5 ? [1, 2, 5] : [1];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of steps) {
        const v = m * Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
      }
    }
    return out.length >= 2 ? out : [lo, hi];
  }
  const step = niceStep(hi - lo || 1, 5);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(10));
  return out;
}

// The x and y ranges of what is visible: zoomed x, y fitted to the points
// inside it (from zero on a linear axis).
function domains(spec, visible, zoom) {
  let x0 = Infinity;
  let x1 = -Infinity;
  for (const s of spec.series) {
    for (const [x] of s.points) {
      if (spec.x.log && x <= 0) continue;
      x0 = Math.min(x0, x);
      x1 = Math.max(x1, x);
    }
  }
  if (zoom) [x0, x1] = zoom;
  if (x1 <= x0) x1 = x0 + 1;
  let y0 = Infinity;
  let y1 = -Infinity;
  for (const s of visible) {
    for (const [x, y] of s.points) {
      if (x < x0 || x > x1 || y === null || !Number.isFinite(y)) continue;
      if (spec.y.log && y <= 0) continue;
      y0 = Math.min(y0, y);
      y1 = Math.max(y1, y);
    }
  }
  if (!Number.isFinite(y1)) [y0, y1] = [spec.y.log ? 1 : 0, 1];
  if (spec.y.log) {
    y0 = Math.pow(10, Math.floor(Math.log10(y0)));
    y1 = Math.pow(10, Math.ceil(Math.log10(y1 * 1.0001)));
  } else {
    y0 = Math.min(0, y0);
    y1 = y1 <= y0 ? y0 + 1 : y1 * 1.08;
  }
  return { x0, x1, y0, y1 };
}

function drawAxes(svg, spec, d, sx, sy) {
  const grid = svgNode('g', { class: 'grid' }, svg);
  for (const v of ticks(d.y0, d.y1, spec.y.log)) {
    const y = sy(v);
    svgNode('line', { x1: PAD.left, x2: WIDTH - PAD.right, y1: y, y2: y }, grid);
    svgNode('text', { x: PAD.left - 6, y: y + 4, 'text-anchor': 'end' }, grid).textContent = formatNumber(v);
  }
  const xFormat = spec.x.tick || formatNumber;
  for (const v of ticks(d.x0, d.x1, spec.x.log)) {
    const x = sx(v);
    svgNode('line', { x1: x, x2: x, y1: PAD.top, y2: HEIGHT - PAD.bottom }, grid);
    svgNode('text', { x, y: HEIGHT - PAD.bottom + 16, 'text-anchor': 'middle', class: 'x-tick' }, grid).textContent =
      xFormat(v);
  }
  svgNode('text', { x: (PAD.left + WIDTH - PAD.right) / 2, y: HEIGHT - 4, 'text-anchor': 'middle', class: 'axis-label' }, svg)
    .textContent = spec.x.label;
  svgNode('text', {
    x: 14, y: (PAD.top + HEIGHT - PAD.bottom) / 2, 'text-anchor': 'middle', class: 'axis-label',
    transform: `rotate(-90 14 ${(PAD.top + HEIGHT - PAD.bottom) / 2})`,
  }, svg).textContent = spec.y.label;
}

// The point of a series nearest to x (by position, not value).
function nearest(points, x) {
  let best = null;
  for (const p of points) if (best === null || Math.abs(p[0] - x) < Math.abs(best[0] - x)) best = p;
  return best;
}

function showTip(figure, tip, spec, visible, x, px) {
  const xFormat = spec.x.hover || spec.x.tick || formatNumber;
  tip.replaceChildren();
  htmlNode('div', { class: 'tip-x' }, tip, `${spec.x.name || spec.x.label}: ${xFormat(x)}`);
  for (const s of visible) {
    const p = nearest(s.points, x);
    if (!p) continue;
    const row = htmlNode('div', { class: 'tip-row', 'data-series': s.name }, tip);
    htmlNode('span', { class: s.dashed ? 'swatch dashed' : 'swatch', style: `background:${s.color}` }, row);
    htmlNode('span', { class: 'tip-name' }, row, `${s.name}: `);
    htmlNode('span', { class: 'tip-value' }, row, formatNumber(p[1]));
    if (spec.y.unit) htmlNode('span', {}, row, ` ${spec.y.unit}`);
  }
  tip.hidden = false;
  const width = figure.clientWidth || WIDTH;
  tip.style.left = `${Math.min(px + 14, width - 220)}px`;
}

// Draws (or redraws) a chart into `figure`. `spec`: { id, title, x: {label,
// log, tick, hover}, y: {label, unit, log}, series: [{name, points: [[x,
// y]], color?, dashed?}], markers: [{x, label}] }.
function drawChart(figure, spec) {
  if (!chartState.has(spec.id)) chartState.set(spec.id, { hidden: new Set(), zoom: null });
  const state = chartState.get(spec.id);
  spec.series.forEach((s, i) => { s.color = s.color || PALETTE[i % PALETTE.length]; });
  figure.replaceChildren();
  figure.className = 'chart';
  figure.dataset.chart = spec.id;
  htmlNode('figcaption', {}, figure, spec.title);

  const legend = htmlNode('div', { class: 'legend' }, figure);
  for (const s of spec.series) {
    const entry = htmlNode('button', { type: 'button', class: 'legend-entry', 'data-series': s.name }, legend);
    if (state.hidden.has(s.name)) entry.classList.add('off');
    htmlNode('span', { class: s.dashed ? 'swatch dashed' : 'swatch', style: `background:${s.color}` }, entry);
    entry.appendChild(document.createTextNode(s.name));
    entry.addEventListener('click', () => {
      if (state.hidden.has(s.name)) state.hidden.delete(s.name);
      else state.hidden.add(s.name);
      drawChart(figure, spec);
    });
  }

  const visible = spec.series.filter((s) => !state.hidden.has(s.name));
  const d = domains(spec, visible, state.zoom);
  const sx = makeScale(d.x0, d.x1, PAD.left, WIDTH - PAD.right, spec.x.log);
  const sy = makeScale(d.y0, d.y1, HEIGHT - PAD.bottom, PAD.top, spec.y.log);
  figure.dataset.x0 = d.x0;
  figure.dataset.x1 = d.x1;

  const svg = svgNode('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: 'img' }, figure);
  drawAxes(svg, spec, d, sx, sy);
  const clip = `clip-${spec.id}`;
  svgNode('rect', { x: PAD.left, y: PAD.top, width: WIDTH - PAD.left - PAD.right, height: HEIGHT - PAD.top - PAD.bottom },
    svgNode('clipPath', { id: clip }, svg));
  const plot = svgNode('g', { 'clip-path': `url(#${clip})` }, svg);
  let drawn = 0;
  for (const s of visible) {
    const shown = ([x, y], i, all) => (!spec.x.log || x > 0) && (!spec.y.log || y > 0)
      && (x >= d.x0 || (all[i + 1] && all[i + 1][0] >= d.x0)) && (x <= d.x1 || (i > 0 && all[i - 1][0] <= d.x1));
    // A point without a value (an interval without responses) is a gap:
    // the line stops before it and starts again after, rather than
    // joining its neighbours or dropping to zero.
    const pieces = [[]];
    s.points.forEach((p, i, all) => {
      if (p[1] === null || !Number.isFinite(p[1])) {
        if (pieces[pieces.length - 1].length) pieces.push([]);
      } else if (shown(p, i, all)) {
        pieces[pieces.length - 1].push(p);
      }
    });
    const lines = pieces.filter((piece) => piece.length);
    if (!lines.length) lines.push([]);
    let count = 0;
    for (const piece of lines) {
      const coords = piece.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
      svgNode('polyline', { points: coords, stroke: s.color, class: s.dashed ? 'line dashed' : 'line', 'data-series': s.name }, plot);
      if (piece.length === 1) svgNode('circle', { cx: sx(piece[0][0]), cy: sy(piece[0][1]), r: 3, fill: s.color }, plot);
      count += piece.length;
    }
    drawn = Math.max(drawn, count);
  }
  figure.dataset.points = drawn;
  for (const m of spec.markers || []) {
    if (m.x < d.x0 || m.x > d.x1) continue;
    svgNode('line', { x1: sx(m.x), x2: sx(m.x), y1: PAD.top, y2: HEIGHT - PAD.bottom, class: 'marker' }, svg);
    const nearRight = sx(m.x) > WIDTH - 140;
    svgNode('text', {
      x: sx(m.x) + (nearRight ? -4 : 4), y: PAD.top + 12, class: 'marker-label', 'text-anchor': nearRight ? 'end' : 'start',
    }, svg).textContent = m.label;
  }

  const cursor = svgNode('line', { y1: PAD.top, y2: HEIGHT - PAD.bottom, class: 'cursor', visibility: 'hidden' }, svg);
  const band = svgNode('rect', { y: PAD.top, height: HEIGHT - PAD.top - PAD.bottom, class: 'band', visibility: 'hidden' }, svg);
  const overlay = svgNode('rect', {
    x: PAD.left, y: PAD.top, width: WIDTH - PAD.left - PAD.right, height: HEIGHT - PAD.top - PAD.bottom, class: 'overlay',
  }, svg);
  const tip = htmlNode('div', { class: 'tip' }, figure);
  tip.hidden = true;
  const toSvgX = (event) => {
    const box = svg.getBoundingClientRect();
    return ((event.clientX - box.left) / box.width) * WIDTH;
  };
  let dragFrom = null;
  overlay.addEventListener('mousemove', (event) => {
    const px = toSvgX(event);
    const firstWithData = visible.find((s) => s.points.length) || { points: [] };
    const p = nearest(firstWithData.points.filter(([x]) => x >= d.x0 && x <= d.x1), sx.invert(px));
    if (p) {
      cursor.setAttribute('x1', sx(p[0]));
      cursor.setAttribute('x2', sx(p[0]));
      cursor.setAttribute('visibility', 'visible');
      showTip(figure, tip, spec, visible, p[0], sx(p[0]));
    }
    if (dragFrom !== null) {
      band.setAttribute('x', Math.min(dragFrom, px));
      band.setAttribute('width', Math.abs(px - dragFrom));
      band.setAttribute('visibility', 'visible');
    }
  });
  overlay.addEventListener('mouseleave', () => {
    tip.hidden = true;
    cursor.setAttribute('visibility', 'hidden');
  });
  overlay.addEventListener('mousedown', (event) => {
    dragFrom = toSvgX(event);
    event.preventDefault();
  });
  overlay.addEventListener('mouseup', (event) => {
    const to = toSvgX(event);
    if (dragFrom !== null && Math.abs(to - dragFrom) > 6) {
      const a = sx.invert(Math.min(dragFrom, to));
      const b = sx.invert(Math.max(dragFrom, to));
      state.zoom = [a, b];
      dragFrom = null;
      drawChart(figure, spec);
      return;
    }
    dragFrom = null;
    band.setAttribute('visibility', 'hidden');
  });
  overlay.addEventListener('dblclick', () => {
    state.zoom = null;
    drawChart(figure, spec);
  });
  if (state.zoom) htmlNode('div', { class: 'hint' }, figure, 'Zoomed: double-click the chart to see the whole run.');
  return figure;
}
