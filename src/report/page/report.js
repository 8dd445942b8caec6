// volley's report page: builds every section from the run's data (the
// report as JSON, plus each run's latency spectrum that volley computed
// from its histogram). The same code draws a saved report, a comparison,
// and the live dashboard, which feeds it one interval at a time.
'use strict';

// A dash, not "0 ms", where there is no figure (nothing succeeded).
const ms = (v) => (v === null || v === undefined || !Number.isFinite(v) ? '-' : `${formatNumber(v)} ms`);
const pct = (v) => `${formatNumber(v)}%`;

function section(parent, title, className) {
  const node = htmlNode('section', { class: className || '' }, parent);
  if (title) htmlNode('h2', {}, node, title);
  return node;
}

function table(parent, head, rows, className) {
  const t = htmlNode('table', { class: className || '' }, parent);
  const tr = htmlNode('tr', {}, t);
  for (const h of head) htmlNode('th', {}, tr, h);
  for (const row of rows) {
    const r = htmlNode('tr', {}, t);
    for (const cell of row) htmlNode('td', {}, r, typeof cell === 'number' ? formatNumber(cell) : cell);
  }
  return t;
}

function tile(parent, label, value, text, verdict) {
  const node = htmlNode('div', { class: `tile ${verdict || ''}`, 'data-tile': label, 'data-value': value }, parent);
  htmlNode('div', { class: 'tile-value' }, node, text);
  htmlNode('div', { class: 'tile-label' }, node, label);
  return node;
}

function chart(parent, spec) {
  return drawChart(htmlNode('figure', {}, parent), spec);
}

// "p99<500ms" -> "p99 below 500 ms"
function criterionInWords(text) {
  const m = /^\s*([a-z0-9_.]+)\s*(<=|>=|<|>)\s*(.+?)\s*$/i.exec(text);
  if (!m) return text;
  const op = { '<': 'below', '<=': 'at most', '>': 'above', '>=': 'at least' }[m[2]];
  const value = m[3].replace(/^([\d.]+)\s*(ms|s|us|%)$/, (_, n, u) => (u === '%' ? `${n}%` : `${n} ${u}`));
  const name = { errors: 'errors', rps: 'throughput', p50: 'median latency (p50)' }[m[1]] || m[1];
  return `${name} ${op} ${value}`;
}

function wordsList(items) {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

function seriesOf(rows, key) {
  return rows.map((r) => [r.t_s, typeof key === 'function' ? key(r) : r[key]]);
}

// Whether a summary or an interval had a successful response: without
// one its latency figures are zeros that mean "none", drawn as a gap and
// shown as a dash.
const answered = (m) => m && m.requests > m.errors;

// An interval's latency figure, or null (a gap in the chart) for an
// interval without a successful response.
const latencyOf = (pick) => (r) => (answered(r) ? pick(r) : null);

const timeAxis = { label: 'time since start (s)', name: 'time', hover: (v) => `${formatNumber(v)} s` };

function thresholdsBlock(parent, thresholds, url) {
  const mine = (thresholds || []).filter((t) => url === undefined || t.url === url);
  if (!mine.length) return;
  const list = htmlNode('ul', { class: 'thresholds' }, parent);
  for (const t of mine) {
    htmlNode('li', { class: t.passed ? 'pass' : 'fail' }, list,
      `${t.passed ? 'Passed' : 'Failed'}: ${criterionInWords(t.criterion)} (measured ${formatNumber(t.value)})`);
  }
}

function summaryTiles(parent, summary, thresholds, url, openModel) {
  const tiles = htmlNode('div', { class: 'tiles' }, parent);
  const s = summary || {};
  const lat = answered(s) ? s.latency_ms || {} : {};
  const errorPct = s.requests ? (100 * s.errors) / s.requests : 0;
  const failed = (name) => {
    const t = (thresholds || []).filter((x) => x.url === url && x.criterion.startsWith(name));
    if (!t.length) return '';
    return t.every((x) => x.passed) ? 'pass' : 'fail';
  };
  tile(tiles, 'requests', s.requests, formatNumber(s.requests));
  // Where nothing succeeded the rate is of attempts, not of answers.
  const rate = s.requests && !answered(s) ? 'attempts/s (none succeeded)' : 'req/s';
  tile(tiles, rate, s.rps, formatNumber(Math.round(s.rps * 10) / 10), failed('rps'));
  tile(tiles, 'errors', errorPct, pct(errorPct), failed('error'));
  tile(tiles, 'p50', lat.p50, ms(lat.p50), failed('p50'));
  tile(tiles, 'p99', lat.p99, ms(lat.p99), failed('p99'));
  tile(tiles, 'max', lat.max, ms(lat.max), failed('max'));
  if (openModel && s.service_ms) {
    const service = answered(s) ? s.service_ms : {};
    tile(tiles, 'service p50', service.p50, ms(service.p50));
    tile(tiles, 'service p99', service.p99, ms(service.p99));
  }
}

function spectrumChart(parent, id, spectra) {
  const series = spectra.filter((s) => s.points && s.points.length);
  if (!series.length) {
    htmlNode('p', { class: 'nodata' }, parent, 'No successful request: no latency spectrum.');
    return;
  }
  const percentile = (x) => `p${formatNumber(100 * (1 - 1 / x))}`;
  chart(parent, {
    id, title: 'Latency by percentile (log scale)',
    x: { label: 'percentile', name: 'percentile', log: true, tick: percentile },
    y: { label: 'latency (ms)', unit: 'ms', log: true },
    series,
  });
}

function distribution(parent, buckets) {
  if (!buckets || !buckets.length) return;
  htmlNode('h3', {}, parent, 'Response-time distribution');
  const t = htmlNode('table', { class: 'distribution' }, parent);
  for (const b of buckets) {
    const tr = htmlNode('tr', {}, t);
    htmlNode('td', {}, tr, b.label);
    const bar = htmlNode('td', { class: 'bar-cell' }, tr);
    htmlNode('div', { class: `bar ${b.label === 'failed' ? 'failed' : ''}`, style: `width:${Math.max(0, b.percent)}%` }, bar);
    htmlNode('td', {}, tr, formatNumber(b.count));
    htmlNode('td', {}, tr, pct(b.percent));
  }
}

function outcomes(parent, summary) {
  const statuses = Object.entries(summary.status || {});
  if (statuses.length) {
    htmlNode('h3', {}, parent, 'Status codes');
    table(parent, ['status', 'responses'], statuses.map(([code, n]) => [code, n]));
  }
  const errors = Object.entries(summary.errors_by_kind || {});
  if (errors.length) {
    htmlNode('h3', {}, parent, 'Errors');
    table(parent, ['kind', 'count', 'example'],
      errors.map(([kind, n]) => [kind, n, (summary.error_examples || {})[kind] || '']), 'errors');
  }
}

function scheduleWords(parent, schedule) {
  if (!schedule) return;
  htmlNode('p', { class: 'schedule' }, parent,
    `Open model: ${formatNumber(schedule.sent)} requests sent on schedule, ${formatNumber(schedule.late)} of them 1 ms or more late `
    + `(${formatNumber(schedule.late_waiting_for_connection)} waiting for a free connection); the largest delay was `
    + `${ms(schedule.max_delay_ms)}. Latency is measured from the intended send, service time from the actual send.`);
}

// A merged report (`volley merge`): its shards and how far off each
// started; a single shard's report: which shard, and its own start.
function shardsBlock(parent, report) {
  const merged = report.merged;
  const shard = report.plan && report.plan.shard;
  const start = report.start;
  if (!merged && !shard && !start) return;
  const node = section(parent, 'Shards', 'shards');
  const skew = (v) => (v === null || v === undefined ? 'not planned (no --start-at)' : `${ms(v)} ${v >= 0 ? 'late' : 'early'}`);
  if (merged) {
    const missing = merged.missing || [];
    htmlNode('p', {}, node, `Merged from ${formatNumber((merged.shards || []).length)} of ${formatNumber(merged.count)} shards`
      + (missing.length ? `; missing: shard ${missing.join(', ')} (a partial merge).` : '.'));
    table(node, ['shard', 'start skew'], (merged.shards || []).map((s) => [String(s.index), skew(s.skew_ms)]));
  } else if (shard) {
    htmlNode('p', {}, node, `This is shard ${shard.index} of ${shard.count} (numbered from 0).`);
  }
  if (start) htmlNode('p', {}, node, `Planned start ${start.planned_start}; this run started ${skew(start.skew_ms)}.`);
}

function runSection(parent, run, index, ctx) {
  const load = run.load !== undefined && run.load !== null ? ` at ${formatNumber(run.load)} ${ctx.unit || ''}` : '';
  const node = section(parent, `${run.url}${load}`, 'run');
  node.dataset.run = index;
  const facts = [run.protocol, run.interrupted ? 'interrupted' : ''].filter(Boolean).join(', ');
  if (facts) htmlNode('p', { class: 'facts' }, node, `Protocol: ${facts}`);
  const s = run.summary || {};
  summaryTiles(node, s, ctx.thresholds, run.url, ctx.openModel);
  thresholdsBlock(node, ctx.thresholds, run.url);
  if (run.warmup) {
    htmlNode('p', {}, node, `Warm-up (not counted): ${formatNumber(run.warmup.requests)} requests in ${formatNumber(run.warmup.elapsed_s)} s.`);
  }
  const rows = run.series || [];
  const tag = (name) => `${name}-${index}`;
  const throughput = [{ name: 'req/s', points: seriesOf(rows, 'rps') }];
  if (ctx.openModel) throughput.push({ name: 'asked req/s', points: seriesOf(rows, 'load') });
  throughput.push({ name: 'errors/s', points: rows.map((r, i) => {
    const span = r.t_s - (i ? rows[i - 1].t_s : 0);
    return [r.t_s, span > 0 ? r.errors / span : 0];
  }) });
  chart(node, { id: tag('throughput'), title: 'Requests and errors per second', x: timeAxis, y: { label: 'per second', unit: '/s' }, series: throughput });
  const quantiles = ['p50', 'p90', 'p99', 'max'];
  const latency = quantiles.map((k) => ({ name: k, points: seriesOf(rows, latencyOf((r) => r[k])) }));
  // Under -R each interval's service time (from the actual send) is drawn
  // beside the latency from the intended send: the same colour, dashed, so
  // the gap between a pair of lines is the time spent queueing.
  const withService = ctx.openModel && rows.some((r) => r.service);
  if (withService) {
    quantiles.forEach((k, i) => latency.push({
      name: `service ${k}`, color: PALETTE[i], dashed: true, points: seriesOf(rows, latencyOf((r) => (r.service ? r.service[k] : null))),
    }));
  }
  const title = withService ? 'Latency from the intended send, and service time (dashed), over time'
    : ctx.openModel ? 'Latency over time, from the intended send' : 'Latency over time';
  chart(node, { id: tag('latency'), title, x: timeAxis, y: { label: 'ms', unit: 'ms' }, series: latency });
  if (ctx.openModel && s.service_ms && answered(s)) {
    htmlNode('p', { class: 'service' }, node,
      `Service time (from the actual send, queueing excluded): p50 ${ms(s.service_ms.p50)}, p90 ${ms(s.service_ms.p90)}, `
      + `p99 ${ms(s.service_ms.p99)}, max ${ms(s.service_ms.max)}; latency from the intended send: p50 ${ms(s.latency_ms.p50)}, `
      + `p99 ${ms(s.latency_ms.p99)}.`);
  }
  const spectra = [{ name: 'latency', points: (ctx.spectra || [])[index] || [] }];
  const service = (ctx.serviceSpectra || [])[index];
  if (ctx.openModel && service && service.length) spectra.push({ name: 'service time', points: service });
  spectrumChart(node, tag('spectrum'), spectra);
  const classes = ['1xx', '2xx', '3xx', '4xx', '5xx'];
  const outcome = classes.map((c, i) => ({ name: c, points: seriesOf(rows, (r) => r.status_classes[i]) }))
    .filter((x, i) => i === 1 || x.points.some(([, y]) => y > 0));
  outcome.push({ name: 'errors', points: seriesOf(rows, 'errors') });
  chart(node, { id: tag('outcomes'), title: 'Responses by status class and errors, per interval', x: timeAxis, y: { label: 'count' }, series: outcome });
  if (run.target) {
    chart(node, { id: tag('target-rss'), title: 'Target memory (RSS)', x: timeAxis, y: { label: 'MiB', unit: 'MiB' },
      series: [{ name: 'RSS', points: seriesOf(rows, (r) => (r.target ? r.target.rss_mb : null)) }] });
    chart(node, { id: tag('target-cpu'), title: 'Target CPU', x: timeAxis, y: { label: '% of one core', unit: '%' },
      series: [{ name: 'CPU', points: seriesOf(rows, (r) => (r.target ? r.target.cpu_pct : null)) }] });
  }
  if (s.tls) {
    htmlNode('p', { class: 'tls' }, node,
      `TLS: ${formatNumber(s.tls.handshakes)} handshakes (${formatNumber(s.tls.resumed)} resumed`
      + (s.tls.zero_rtt_tried
        ? `; 0-RTT ${formatNumber(s.tls.zero_rtt_tried)} tried, ${formatNumber(s.tls.zero_rtt_accepted || 0)} accepted`
        : '')
      + `), taking p50 `
      + `${ms(s.tls.handshake_ms.p50)}, p99 ${ms(s.tls.handshake_ms.p99)}, max ${ms(s.tls.handshake_ms.max)}.`);
  }
  if (s.refused_s) {
    htmlNode('p', { class: 'refused' }, node,
      `Connections were refused for ${formatNumber(s.refused_s)} s of the run's ${formatNumber(s.elapsed_s)} s `
      + `(${pct(Math.round((1000 * s.refused_s) / Math.max(s.elapsed_s, 1e-9)) / 10)}).`);
  }
  scheduleWords(node, s.schedule);
  distribution(node, s.distribution);
  outcomes(node, s);
  const items = run.steps || [];
  if (items.length) {
    htmlNode('h3', {}, node, 'Plan items');
    table(node, ['item', 'requests', 'errors', 'req/s', 'p50', 'p90', 'p99', 'max'], items.map((it) => {
      const m = it.summary || {};
      const l = answered(m) ? m.latency_ms || {} : {};
      return [it.name, m.requests, m.errors, m.rps, ms(l.p50), ms(l.p90), ms(l.p99), ms(l.max)];
    }), 'items');
  }
}

function stepSection(parent, step) {
  const node = section(parent, 'Load levels', 'step');
  const unit = step.unit || '';
  const v = step.verdict || {};
  const levels = step.levels || [];
  const slo = (step.slo || []).map(criterionInWords);
  const words = [];
  words.push(`The service level asked for: ${slo.length ? wordsList(slo) : 'none given'}.`);
  words.push(`Responsiveness: at the lightest load (${formatNumber(v.lightest_load)} ${unit}) the median latency was ${ms(v.responsiveness_p50_ms)}.`);
  words.push(`Throughput: at best ${formatNumber(v.best_rps)} req/s, reached at ${formatNumber(v.best_rps_load)} ${unit}.`);
  words.push(v.max_load === null || v.max_load === undefined
    ? 'Maximum load: even the lightest level broke the service level.'
    : `Maximum load within the service level: ${formatNumber(v.max_load)} ${unit}.`);
  if (v.tail_p99_ms !== null && v.tail_p99_ms !== undefined) {
    words.push(`Tail latency there: p99 ${ms(v.tail_p99_ms)}, p99.9 ${ms(v.tail_p999_ms)}, max ${ms(v.tail_max_ms)}.`);
  }
  const past = Object.entries(v.errors_past_max || {});
  words.push(past.length
    ? `Past the maximum: ${wordsList(past.map(([k, n]) => `${formatNumber(n)} ${k} errors`))}`
      + (v.failure_p50_ms_past_max !== null && v.failure_p50_ms_past_max !== undefined
        ? `, failing in ${ms(v.failure_p50_ms_past_max)} at the median (slowest ${ms(v.failure_max_ms_past_max)}).` : '.')
    : 'Past the maximum: no errors.');
  if (v.p99_past_max_ms !== null && v.p99_past_max_ms !== undefined) words.push(`p99 at the next level: ${ms(v.p99_past_max_ms)}.`);
  if (v.stopped_early) words.push('The step stopped early: errors passed the stop limit.');
  const list = htmlNode('ul', { class: 'verdict' }, node);
  for (const w of words) htmlNode('li', {}, list, w);
  const markers = v.max_load !== null && v.max_load !== undefined ? [{ x: v.max_load, label: 'maximum load' }] : [];
  const x = { label: `load (${unit}, log scale)`, name: 'load', log: true };
  const byLoad = (key) => levels.map((l) => [l.load, l[key]]);
  // A level where nothing succeeded has no latency: a gap, not 0 ms.
  const latencyByLoad = (key) => levels.map((l) => [l.load, l.requests && l.error_pct < 100 ? l[key] : null]);
  chart(node, { id: 'levels-latency', title: 'Latency by load level', x, y: { label: 'ms', unit: 'ms' }, markers,
    series: [{ name: 'p50', points: latencyByLoad('p50_ms') }, { name: 'p99', points: latencyByLoad('p99_ms') }] });
  chart(node, { id: 'levels-rps', title: 'Throughput by load level', x, y: { label: 'req/s', unit: 'req/s' }, markers,
    series: [{ name: 'req/s', points: byLoad('rps') }] });
  chart(node, { id: 'levels-errors', title: 'Errors by load level', x, y: { label: '% of requests', unit: '%' }, markers,
    series: [{ name: 'errors', points: byLoad('error_pct') }] });
  table(node, [`load (${unit})`, 'requests', 'req/s', 'p50', 'p99', 'errors', 'service level'],
    levels.map((l) => {
      const none = !(l.requests && l.error_pct < 100);
      return [l.load, l.requests, l.rps, ms(none ? null : l.p50_ms), ms(none ? null : l.p99_ms), pct(l.error_pct),
        l.within_slo ? 'met' : 'broken'];
    }));
}

function humanKey(key) {
  return key.replace(/_ms$/, ' (ms)').replace(/_s$/, ' (s)').replace(/_/g, ' ');
}

// The plan as a list of settings, nested lists for nested settings.
function settingsList(parent, value) {
  const list = htmlNode('dl', { class: 'settings' }, parent);
  for (const [key, v] of Object.entries(value || {})) {
    if (v === null || v === undefined || (Array.isArray(v) && !v.length)) continue;
    htmlNode('dt', {}, list, humanKey(key));
    const dd = htmlNode('dd', {}, list);
    if (Array.isArray(v) && v.every((x) => typeof x !== 'object')) dd.textContent = v.join(', ');
    else if (Array.isArray(v)) v.forEach((x) => (typeof x === 'object' ? settingsList(dd, x) : htmlNode('div', {}, dd, String(x))));
    else if (typeof v === 'object') settingsList(dd, v);
    else dd.textContent = typeof v === 'number' ? formatNumber(v) : String(v);
  }
}

function compareSection(parent, data) {
  const node = section(parent, 'Comparison', 'compare');
  htmlNode('p', {}, node, `A is ${data.names[0]}; B is ${data.names[1]}. A change is significant when p < 0.05 and larger than the noise threshold.`);
  data.pairs.forEach((pair, i) => {
    htmlNode('h3', {}, node, pair.url_a === pair.url_b ? pair.url_a : `${pair.url_a} against ${pair.url_b}`);
    const list = htmlNode('ul', { class: 'verdict' }, node);
    for (const r of pair.rows) {
      const worse = r.change_pct > 0 === r.higher_is_worse;
      const judged = !r.significant ? 'no significant change'
        : r.within_noise ? 'significant but within the noise'
          : worse ? 'significantly worse' : 'significantly better';
      const p = r.p_value === null || r.p_value === undefined ? '' : ` (p = ${formatNumber(r.p_value)})`;
      const item = htmlNode('li', { class: r.significant && !r.within_noise ? (worse ? 'fail' : 'pass') : '' }, list,
        `${r.metric}: ${formatNumber(r.a)} → ${formatNumber(r.b)} (${r.change_pct > 0 ? '+' : ''}${formatNumber(r.change_pct)}%), ${judged}${p}`);
      item.dataset.metric = r.metric;
    }
    const ra = (data.a.runs || [])[i] || {};
    const rb = (data.b.runs || [])[i] || {};
    const both = (key) => [
      { name: `A ${key}`, points: seriesOf(ra.series || [], key) },
      { name: `B ${key}`, points: seriesOf(rb.series || [], key) },
    ];
    chart(node, { id: `compare-rps-${i}`, title: 'Requests per second, A and B', x: timeAxis, y: { label: 'req/s', unit: '/s' }, series: both('rps') });
    chart(node, { id: `compare-latency-${i}`, title: 'Latency over time, A and B', x: timeAxis, y: { label: 'ms', unit: 'ms' },
      series: [...both('p50'), ...both('p99')] });
    spectrumChart(node, `compare-spectrum-${i}`, [
      { name: 'A', points: (data.spectra_a || [])[i] || [] },
      { name: 'B', points: (data.spectra_b || [])[i] || [] },
    ]);
  });
}

function progressBlock(parent, live) {
  const p = live.progress || {};
  const node = htmlNode('div', { class: 'progress', id: 'progress' }, parent);
  node.dataset.state = live.finished ? 'finished' : live.failed ? 'failed' : 'running';
  if (live.finished) {
    node.textContent = 'The run has ended: this is the final report.';
    return;
  }
  if (live.failed) {
    node.textContent = `The run ended without a merged report: ${live.failed}`;
    return;
  }
  const planned = p.planned_s ? ` of ${formatNumber(p.planned_s)} s` : '';
  const stage = p.level !== null && p.level !== undefined ? `, level ${formatNumber(p.level)} ${p.unit || ''}` : '';
  const which = p.runs > 1 ? ` (run ${p.index + 1} of ${p.runs})` : '';
  htmlNode('span', {}, node, `Running: ${formatNumber(p.elapsed_s || 0)} s${planned}${stage}${which}`);
  if (p.planned_s) {
    const bar = htmlNode('div', { class: 'progress-bar' }, node);
    htmlNode('div', { style: `width:${Math.min(100, (100 * (p.elapsed_s || 0)) / p.planned_s)}%` }, bar);
  }
}

// A live merge of shards: each shard's standing, and the intervals shown
// before every shard had sent them.
function liveShardsBlock(parent, live, runs) {
  const shards = (live.shards || {}).shards || [];
  if (!shards.length) return;
  const node = section(parent, 'Shards, live', 'live-shards');
  node.id = 'live-shards';
  const reporting = shards.filter((s) => s.state === 'running' || s.state === 'finished').length;
  node.dataset.shards = shards.length;
  node.dataset.reporting = reporting;
  htmlNode('p', {}, node, `${formatNumber(reporting)} of ${formatNumber(shards.length)} shards running or finished; `
    + 'each interval is shown once every shard has sent it, or as partial after the grace period.');
  table(node, ['shard', 'state', 'last sent'], shards.map((s) => [s.shard, s.state, s.last]), 'shards-live');
  const partial = [];
  runs.forEach((run) => (run.series || []).forEach((r) => {
    if (!r.shards || !r.shards.partial) return;
    const missing = [r.shards.lagging.length ? `lagging ${r.shards.lagging.join(', ')}` : '',
      r.shards.gone.length ? `gone ${r.shards.gone.join(', ')}` : ''].filter(Boolean).join('; ');
    partial.push(`${formatNumber(r.t_s)} s (${missing})`);
  }));
  if (partial.length) htmlNode('p', { class: 'partial' }, node, `Partial intervals: ${partial.join(', ')}.`);
}

// Draws the whole page from `data`: { report, spectra, compare?, live? }.
function renderPage(data) {
  const root = document.getElementById('report');
  root.replaceChildren();
  if (data.compare) {
    htmlNode('h1', {}, root, 'volley comparison');
    compareSection(root, data.compare);
    return;
  }
  const report = data.report || {};
  const kind = report.step ? 'step' : (report.runs || []).some((r) => (r.steps || []).length) ? 'plan' : 'run';
  htmlNode('h1', {}, root, data.live && !data.live.finished ? 'volley, live' : `volley ${kind} report`);
  if (report.started_at) htmlNode('p', { class: 'facts' }, root, `Started ${report.started_at}${report.tool ? ` by ${report.tool.name} ${report.tool.version}` : ''}.`);
  if (data.live) progressBlock(root, data.live);
  if (data.live && !data.live.finished) liveShardsBlock(root, data.live, report.runs || []);
  if (report.interrupted) htmlNode('p', { class: 'fail' }, root, 'Interrupted (Ctrl-C): the figures cover what was measured until then.');
  if (report.aborted_by) htmlNode('p', { class: 'fail' }, root, `Stopped early: the threshold ${criterionInWords(report.aborted_by)} failed.`);
  thresholdsBlock(root, report.thresholds);
  shardsBlock(root, report);
  if (report.step) stepSection(root, report.step);
  const ctx = {
    thresholds: report.thresholds, spectra: data.spectra, serviceSpectra: data.service_spectra, openModel: report.plan && typeof report.plan.rate === 'number',
    unit: report.step ? report.step.unit : (data.live && data.live.progress.unit) || '',
  };
  (report.runs || []).forEach((run, i) => runSection(root, run, i, ctx));
  if (report.plan) {
    const node = section(root, 'Settings', 'plan');
    settingsList(node, report.plan);
  }
}

// Marks the page for checks and for people: how many points each chart drew.
function markDrawn() {
  const figures = [...document.querySelectorAll('figure.chart')];
  document.body.dataset.charts = figures.length;
  document.body.dataset.chartsOk = String(figures.length > 0 && figures.every((f) => Number(f.dataset.points) >= 1));
}

async function embeddedData() {
  const node = document.getElementById('volley-data');
  const bytes = Uint8Array.from(atob(node.textContent.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text());
}

function render(data) {
  const started = performance.now();
  renderPage(data);
  markDrawn();
  document.body.dataset.drawMs = (performance.now() - started).toFixed(1);
}

// The live dashboard: history first, then one event per interval.
function followLive() {
  const data = { report: { runs: [] }, spectra: [], live: { progress: {} } };
  const events = new EventSource('events');
  let pending = false;
  const redraw = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(data); });
  };
  events.addEventListener('begin', (e) => {
    const m = JSON.parse(e.data);
    data.report.plan = m.plan;
    data.report.started_at = m.started_at;
    data.report.step = m.step;
    redraw();
  });
  events.addEventListener('run', (e) => {
    const m = JSON.parse(e.data);
    data.report.runs[m.index] = { url: m.url, load: m.level, series: [], summary: {} };
    Object.assign(data.live.progress, { index: m.index, runs: m.runs, level: m.level, unit: m.unit, planned_s: m.planned_s, elapsed_s: 0 });
    redraw();
  });
  // Adds a row, or replaces it when the history and the latest event both
  // carry the same interval.
  const addRow = (m) => {
    const run = data.report.runs[m.index];
    const last = run.series[run.series.length - 1];
    if (last && last.t_s === m.row.t_s) run.series[run.series.length - 1] = m.row;
    else run.series.push(m.row);
    data.live.progress.elapsed_s = m.row.t_s;
    return run;
  };
  events.addEventListener('row', (e) => {
    addRow(JSON.parse(e.data));
    redraw();
  });
  events.addEventListener('interval', (e) => {
    const m = JSON.parse(e.data);
    addRow(m).summary = m.summary;
    data.spectra[m.index] = m.spectrum;
    if (m.shards) data.live.shards = m.shards;
    redraw();
  });
  // A live merge: a shard's standing changed between intervals.
  events.addEventListener('shards', (e) => {
    data.live.shards = JSON.parse(e.data);
    redraw();
  });
  // A live merge that ended without a report (a shard failed or went away).
  events.addEventListener('failed', (e) => {
    events.close();
    data.live.failed = JSON.parse(e.data).message;
    redraw();
  });
  events.addEventListener('run_done', (e) => {
    const m = JSON.parse(e.data);
    data.report.runs[m.index].summary = m.summary;
    data.spectra[m.index] = m.spectrum;
    redraw();
  });
  events.addEventListener('final', (e) => {
    const m = JSON.parse(e.data);
    events.close();
    data.report = m.report;
    data.spectra = m.spectra;
    data.live.finished = true;
    redraw();
  });
  events.onerror = () => {
    if (!data.live.finished && !data.live.failed) document.body.dataset.connection = 'lost';
  };
}

window.addEventListener('DOMContentLoaded', async () => {
  if (document.body.dataset.mode === 'live') {
    followLive();
    return;
  }
  render(await embeddedData());
});
