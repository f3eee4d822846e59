// The capsim planner page: a form whose state lives in the URL, a plan from POST /v1/plan (with
// progress events), then for the chosen option its latency against load (/v1/capacity) and its
// memory per GPU (/v1/fit), and "several 4090s or one H100" (/v1/compare on the plan's cheapest
// option of each card). Every request goes to the server that served the page; nothing else is
// fetched. Contract for tests: body[data-state] is "planning", "done" or "error"; the rows of the
// plan table and of the compare table carry data-option (the option's label), and the plan
// table's cells data-col (the column: usd, ttft, tpot, data, bound, load, ...).
import {
  BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, LineController, LineElement,
  LogarithmicScale, PointElement, Tooltip,
} from 'chart.js';

Chart.register(BarController, BarElement, CategoryScale, Legend, LinearScale, LineController, LineElement,
  LogarithmicScale, PointElement, Tooltip);

const $ = (id) => document.getElementById(id);
const DEFAULT_CARDS = ['rtx-4090', 'l40s', 'h100-sxm'];
// Short runs keep the page responsive; the CLI's defaults (5 min searches) are for real plans.
// A run's measured window is at least 3 minutes and long enough for MIN_MEASURED requests
// (runLength): capsim calls no SLO met on fewer than 200 (docs/planning.md, "Too short to PASS"),
// and the page asks for twice that so that a plan of a few users still verifies its options.
// At most 3 hours measured: the server runs at most 4 simulated hours (capsim serve --max-duration);
// a lighter load gets "too short to support a PASS" from capsim, which says what to change.
const RUN = { warmup_s: 60, min_measured_s: 180, max_measured_s: 3 * 3600, search_duration: '2min' };
const MIN_MEASURED = 400;

// The mean of a length or time field as the page's form writes it: "250", "lognormal:250:1000"
// (the second field is the mean), "20s", "1.5min", "300ms". NaN when it is none of these.
function meanOf(field) {
  const m = /^(?:[a-z]+:)?([0-9.]+)\s*(ms|s|min|h)?\b/.exec(String(field).trim());
  if (!m) return NaN;
  const scale = { ms: 1e-3, s: 1, min: 60, h: 3600 }[m[2] ?? 's'];
  return Number(m[1]) * scale;
}

// The run's duration and warm-up: the measured window long enough for MIN_MEASURED requests at
// the form's load. Users send one request per think time plus answer, the answer taken at the
// TPOT bound (output mean x TPOT): a long estimate of the cycle, so the window errs long.
function runLength(s) {
  const amount = Number(s.amount);
  const perSecond = s.load === 'rate' ? amount
    : amount / (meanOf(s.think) + meanOf(s.out) * Number(s.tpot) / 1000);
  let measured = RUN.min_measured_s;
  if (perSecond > 0 && Number.isFinite(perSecond)) {
    measured = Math.min(RUN.max_measured_s, Math.max(measured, Math.ceil(MIN_MEASURED / perSecond / 60) * 60));
  }
  return { duration: `${(RUN.warmup_s + measured) / 60}min`, warmup: `${RUN.warmup_s / 60}min` };
}

// The chat users' workload of workloads/chatbot-500-users.yaml (the CLI's default scenario): think
// time, turns per session whose history is the next prompt's prefix, a shared system prompt, and
// the question and answer lengths. web/tests/page.test.mjs checks that the server reads the page's
// workload as it reads that file's.
const CHAT_WORKLOAD = { think: '20s', turns: 'geometric:5', system: '300', in: 'lognormal:150:1200', out: 'lognormal:250:1000' };

// ---- state <-> URL ------------------------------------------------------------------------------
const FIELDS = ['model', 'amount', 'think', 'turns', 'system', 'in', 'out', 'ttft', 'tpot'];
// Each catalogue card's class (GET /v1/cards: datacenter, workstation, consumer or null).
const CARD_CLASS = new Map();

function readForm() {
  const s = {};
  for (const f of FIELDS) s[f] = document.querySelector(`[name=${f}]`).value.trim();
  s.load = document.querySelector('[name=load]:checked').value;
  s.cards = [...document.querySelectorAll('#cards input:checked')].map((x) => x.value);
  s.cardClass = $('datacenter-only').checked ? 'datacenter' : '';
  s.config = $('model-config').value.trim();
  s.choice = state.choice ?? 0;
  return s;
}

function writeForm(s) {
  for (const f of FIELDS) if (s[f] !== undefined) document.querySelector(`[name=${f}]`).value = s[f];
  document.querySelector(`[name=load][value=${s.load === 'rate' ? 'rate' : 'users'}]`).checked = true;
  for (const box of document.querySelectorAll('#cards input')) box.checked = s.cards.includes(box.value);
  $('datacenter-only').checked = s.cardClass === 'datacenter';
  showCardClass();
  $('model-config').value = s.config || '';
  $('config-box').open = Boolean(s.config);
}

function toUrl(s) {
  const q = new URLSearchParams();
  for (const f of FIELDS) q.set(f, s[f]);
  q.set('load', s.load);
  q.set('cards', s.cards.join(','));
  if (s.cardClass) q.set('card_class', s.cardClass);
  if (s.config) q.set('config', s.config);
  if (s.choice) q.set('choice', String(s.choice));
  return `${location.pathname}?${q}${location.hash}`;
}

function fromUrl(defaults) {
  const q = new URLSearchParams(location.search);
  const s = { ...defaults };
  for (const f of FIELDS) if (q.has(f)) s[f] = q.get(f);
  if (q.has('load')) s.load = q.get('load');
  if (q.has('cards')) s.cards = q.get('cards').split(',').filter(Boolean);
  if (q.has('card_class')) s.cardClass = q.get('card_class');
  if (q.has('config')) s.config = q.get('config');
  if (q.has('choice')) s.choice = Number(q.get('choice')) || 0;
  return s;
}

// ---- requests -----------------------------------------------------------------------------------
function scenarioBody(s) {
  const workload = { ...runLength(s), input_tokens: s.in, output_tokens: s.out, system_prompt_tokens: /^\d+$/.test(s.system) ? Number(s.system) : s.system };
  if (s.load === 'rate') workload.rate = Number(s.amount);
  else Object.assign(workload, { users: Number(s.amount), think_time: `exponential:${s.think}`, turns: s.turns });
  const body = { model: s.model, workload, slo: { ttft_p95: `${s.ttft}ms`, tpot_p95: `${s.tpot}ms` }, seed: 1 };
  if (s.config) {
    try {
      body.model_config = JSON.parse(s.config);
    } catch (e) {
      throw new Error(`config.json: not JSON (${e.message})`);
    }
    delete body.model;
  }
  return body;
}

function planBody(s) {
  // No ticked card is an input error, not a reason to plan the defaults behind the user's back.
  if (!s.cards.length) throw new Error('Cards to consider: none is ticked; tick at least one card to plan on');
  const plan = { cards: s.cards, tp: [1, 2], search_duration: RUN.search_duration, top: 8 };
  // The server selects by class as `capsim plan --datacenter-only` does; the boxes already show it.
  if (s.cardClass) plan.card_class = [s.cardClass];
  return { ...scenarioBody(s), plan };
}

// "Datacenter cards only": the other cards' boxes are unticked and disabled while it holds; each
// remembers its tick, given back when the control is cleared.
function showCardClass() {
  const only = $('datacenter-only').checked;
  for (const box of document.querySelectorAll('#cards input')) {
    const excluded = only && CARD_CLASS.get(box.value) !== 'datacenter';
    if (excluded && !box.disabled) {
      box.dataset.ticked = box.checked ? '1' : '';
      box.checked = false;
    } else if (!excluded && box.disabled) {
      box.checked = box.dataset.ticked === '1';
    }
    box.disabled = excluded;
  }
}

async function errorOf(res) {
  try {
    return (await res.json()).error;
  } catch {
    return `${res.status} ${res.statusText}`;
  }
}

// A server started with --auth-token wants it on every API request: the page takes it from its
// address's fragment (#token=...), which the browser never sends to the server or to other sites.
const TOKEN = new URLSearchParams(location.hash.slice(1)).get('token');
function apiHeaders(extra = {}) {
  return TOKEN ? { ...extra, Authorization: `Bearer ${TOKEN}` } : extra;
}

async function postJson(path, body, signal) {
  const res = await fetch(path, { method: 'POST', headers: apiHeaders({ 'Content-Type': 'application/json' }), body: JSON.stringify(body), signal });
  if (!res.ok) throw new Error(`${path}: ${await errorOf(res)}`);
  return res.json();
}

// POST with Accept: text/event-stream: progress events, then the result (the command's JSON).
// Aborting the signal closes the connection, which cancels the job on the server.
async function postStream(path, body, signal, onProgress) {
  const res = await fetch(path, {
    method: 'POST', headers: apiHeaders({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }), body: JSON.stringify(body), signal,
  });
  if (!res.ok) throw new Error(`${path}: ${await errorOf(res)}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      const payload = JSON.parse(data.join('\n'));
      if (event === 'progress') onProgress(payload);
      else if (event === 'result') return payload;
      else if (event === 'error') throw new Error(`${path}: ${payload.error}`);
    }
  }
  throw new Error(`${path}: the stream ended without a result`);
}

// ---- rendering ----------------------------------------------------------------------------------
const ms = (v) => (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(0)} ms`);
const gib = (b) => b / 2 ** 30;
const label = (o) => `${o.card}${o.tp > 1 ? ` tp${o.tp}` : ''} ${o.weights}${o.kv_cache === 'fp8' ? ' kv-fp8' : ''}`;
const charts = {};

// printf's %.3g, as the CLI writes a load in requests/s.
function fmtG3(v) {
  if (v === 0) return '0';
  const text = Math.abs(v) < 1e-4 ? v.toExponential(2) : v.toPrecision(3);
  const [mantissa, exponent] = text.split('e');
  const trimmed = mantissa.includes('.') ? mantissa.replace(/\.?0+$/, '') : mantissa;
  if (exponent === undefined) return trimmed;
  const e = Number(exponent);
  return `${trimmed}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
}

// The plan's reasons beside its price, written as `capsim plan` writes its 'data', 'of bound' and
// 'more load' columns, from the JSON fields they come from (card_data, headroom): one answer
// whichever front end asks. The cells' titles give the numbers behind the text.
function loadNumber(v, unit) {
  if (unit === 'users') return `${v.toFixed(0)} users`;
  if (unit === 'concurrent requests') return `${v.toFixed(0)} concurrent`;
  if (unit === 'requests/s') return `${fmtG3(v)} req/s`;
  return `${(100 * v).toFixed(0)}%`;
}

function boundUseText(slos) {
  const metric = (slo) => slo.slice(0, slo.indexOf('_') < 0 ? slo.length : slo.indexOf('_'));
  const parts = slos.map((d) => {
    const name = slos.filter((x) => metric(x.slo) === metric(d.slo)).length > 1 ? d.slo : metric(d.slo);
    return `${name} ${d.upper_share_of_bound == null ? '-' : `${(100 * d.upper_share_of_bound).toFixed(0)}%`}`;
  });
  return parts.length ? parts.join(' ') : '-';
}

function boundUseTitle(slos) {
  return slos.map((d) => `${d.slo}: ${d.has_interval ? '95% interval upper end' : "the run's value"} ` +
    `${d.upper_s == null ? 'not measured' : ms(d.upper_s * 1000)} of its bound ${ms(d.bound_s * 1000)}`).join('\n');
}

function moreLoadText(h) {
  if (!h) return '-';
  if (h.capped) return `>= +${loadNumber(h.max_load_met - h.load, h.unit)}`;
  const slo = `${h.first_missed_slo}${h.first_missed_decision === 'INCONCLUSIVE' ? '?' : ''}`;
  if (h.max_load_met <= h.load) return `< +${loadNumber(h.least_load_missed - h.load, h.unit)}, ${slo}`;
  return `+${loadNumber(h.max_load_met - h.load, h.unit)}, ${slo}`;
}

function moreLoadTitle(h) {
  if (!h) return 'no headroom runs: a fixed request count, or ranked below the options the plan measures';
  const at = (v) => `${Number(v.toPrecision(4))} ${h.unit}`;
  const above = h.capped ? `still met at ${h.max_load_met === h.load * h.max_factor_tried ? `${h.max_factor_tried}x, the most tried` : at(h.max_load_met)}`
    : `${h.first_missed_slo} ${h.first_missed_decision} at ${at(h.least_load_missed)}`;
  return `the scenario: ${at(h.load)}; every SLO met at ${at(h.max_load_met)}; ${above} (${h.runs} runs of ${h.measured_window} each)`;
}

// The numbers behind plan's 'at p90 model error' cell: each SLO's latency, its p90 error, the two
// multiplied and the bound (docs/data-formats.md#model-error).
function modelErrorTitle(me) {
  return me.slos.map((s) => (s.p90 == null ? `${s.slo}: no model error for ${me.class.label}`
    : `${s.slo}: ${ms(s.latency_s * 1000)} x ${(1 + s.p90).toFixed(2)} = ${ms(s.with_error_s * 1000)} against ${ms(s.bound_s * 1000)}`)).join('\n');
}

function drawChart(id, config) {
  charts[id]?.destroy();
  charts[id] = new Chart($(id), { ...config, options: { animation: false, responsive: true, ...config.options } });
}

function setStatus(text, kind = '') {
  $('status').textContent = text;
  $('status').className = kind;
}

function renderPlan(plan, choice) {
  const body = $('plan-table').querySelector('tbody');
  body.replaceChildren();
  plan.options.forEach((o, i) => {
    const tr = document.createElement('tr');
    tr.dataset.option = `${o.replicas}x ${label(o)}`;
    if (i === choice) tr.className = 'chosen';
    const fewer = o.with_one_replica_fewer;
    const cells = [['rank', i + 1], ['deployment', label(o)],
      ['data', o.card_data.efficiencies, [o.card_data.card_class ?? 'class unstated', o.card_data.basis].filter(Boolean).join(': ')],
      ['replicas', o.replicas], ['cards', o.total_cards], ['router', o.router],
      ['ttft', ms(o.result.p95_ttft_ms)], ['tpot', ms(o.result.p95_tpot_ms)],
      ['bound', boundUseText(o.headroom.slos), boundUseTitle(o.headroom.slos)],
      ['load', moreLoadText(o.headroom.load), moreLoadTitle(o.headroom.load)],
      ['usd', o.usd_per_hour.toFixed(2)], ['usd-per-mtok', o.usd_per_million_output_tokens.toFixed(3)],
      ['binds', fewer ? `${fewer.worst_slo} with ${fewer.replicas} (${fewer.binding_resource})` : o.result.binding_resource],
      ['cost-source', o.model_error.cost_source === 'measured' ? 'measured tables' : 'roofline', o.model_error.class.label],
      ['model-error', o.model_error.text, modelErrorTitle(o.model_error)]];
    for (const [col, text, title] of cells) {
      const td = document.createElement('td');
      td.dataset.col = col;
      td.textContent = String(text);
      if (title) td.title = title;
      tr.append(td);
    }
    tr.addEventListener('click', () => choose(i));
    body.append(tr);
  });
  $('plan-note').textContent = plan.options.length
    ? "Cheapest first; each option verified as the whole cluster. 'data': what the card's efficiencies rest on " +
      "(an assumed card's latencies are less certain than their interval says); 'of bound' and 'more load': how far " +
      'inside its SLOs the option runs (hover a cell for the numbers). Click a row to see its details below.'
    : 'No candidate meets the SLOs (see the rejected candidates).';
  const rejected = $('rejected');
  rejected.replaceChildren(...plan.rejected.map((r) => {
    const li = document.createElement('li');
    li.textContent = `${r.card} tp${r.tp} ${r.weights} (KV ${r.kv_cache}): ${r.reason}`;
    return li;
  }));
  $('plan-section').hidden = false;
}

function renderCapacity(cap, slo) {
  const loads = cap.curve.map((p) => p.load);
  const line = (name, values, color, dash = []) => ({ label: name, data: values, borderColor: color, backgroundColor: color, borderDash: dash, pointRadius: dash.length ? 0 : 3 });
  drawChart('latency-chart', {
    type: 'line',
    data: {
      labels: loads.map((l) => (Number.isInteger(l) ? l : l.toFixed(2))),
      datasets: [
        line('TTFT p95 (ms)', cap.curve.map((p) => p.p95_ttft_ms), '#1f77b4'),
        line('TPOT p95 (ms)', cap.curve.map((p) => p.p95_tpot_ms), '#ff7f0e'),
        line('TTFT SLO', loads.map(() => slo.ttft), '#1f77b4', [6, 4]),
        line('TPOT SLO', loads.map(() => slo.tpot), '#ff7f0e', [6, 4]),
      ],
    },
    // Logarithmic: past the capacity TTFT grows by orders of magnitude, and the SLO lines stay readable.
    options: { scales: { x: { title: { display: true, text: cap.load_axis } }, y: { type: 'logarithmic', title: { display: true, text: 'ms (log scale)' } } } },
  });
  $('capacity-note').textContent = cap.capacity > 0
    ? `This deployment serves up to ${Number.isInteger(cap.capacity) ? cap.capacity : cap.capacity.toFixed(2)} ${cap.load_axis} within the SLOs.`
    : 'This deployment misses the SLOs even at the lightest load tried.';
}

function renderMemory(fit) {
  const g = fit.per_gpu;
  const parts = [['weights', g.weights_bytes, '#4c78a8'], ['activations', g.activations_bytes, '#f58518'],
    ['runtime', g.runtime_bytes, '#54a24b'], ['KV cache', g.kv_cache_bytes, '#e45756'],
    ['headroom', Math.max(0, g.visible_bytes - g.budget_bytes), '#bab0ac']];
  drawChart('memory-chart', {
    type: 'bar',
    data: { labels: [`${fit.card}, per GPU`], datasets: parts.map(([name, bytes, color]) => ({ label: name, data: [gib(bytes)], backgroundColor: color })) },
    options: { indexAxis: 'y', scales: { x: { stacked: true, min: 0, title: { display: true, text: 'GiB' } }, y: { stacked: true } } },
  });
  $('memory-label').textContent = `(${fit.model}: ${fit.kv_tokens.toLocaleString()} KV tokens)`;
}

// "Several RTX 4090s or one H100?" runs the plan's own choice on each card, never a deployment of
// its own, so the panel and the plan above it answer the question once.
const DUEL = [{ card: 'rtx-4090', name: 'RTX 4090' }, { card: 'h100-sxm', name: 'H100 SXM' }];

const rejections = (plan) => plan.rejected.map((r) => `tp${r.tp} ${r.weights} (KV ${r.kv_cache}): ${r.reason}`).join('; ');

// The plan's cheapest option on the duel's card: { option, alone } or { why } when there is none.
// The plan lists its 8 cheapest options; a card whose options all cost more is planned alone (the
// same search on that card only), so "one H100" is the cheapest H100 deployment that meets the SLOs.
async function duelOption(duel, s, body, signal) {
  const listed = state.plan.options.find((o) => o.card === duel.card);
  if (listed) return { duel, option: listed, alone: false };
  if (s.cardClass && CARD_CLASS.get(duel.card) !== s.cardClass) {
    return { duel, why: `${duel.name}: not a ${s.cardClass} card (clear "${s.cardClass} cards only" above to compare).` };
  }
  if (!s.cards.includes(duel.card)) return { duel, why: `${duel.name}: not among the cards considered (tick it above to compare).` };
  const alone = await postJson('v1/plan', { ...body, plan: { ...body.plan, cards: [duel.card], top: 1 } }, signal);
  if (alone.options.length) return { duel, option: alone.options[0], alone: true };
  return { duel, why: `${duel.name}: the plan found no option; ${rejections(alone)}.` };
}

// compare's text for an option: everything the plan chose, KV precision included (kv:PRECISION).
const deploymentText = (o) => `${o.replicas}x ${o.card}${o.tp > 1 ? ` tp${o.tp}` : ''} ${o.weights} kv:${o.kv_cache}`;

// One /v1/compare call for the options that share a router (the router is the scenario's), so
// each runs as the plan verified it; the rows come back in the options' order.
async function compareOptions(base, options, signal) {
  const rows = new Array(options.length);
  const routers = [...new Set(options.map((o) => o.router))];
  await Promise.all(routers.map(async (router) => {
    const mine = options.map((o, i) => i).filter((i) => options[i].router === router);
    const cmp = await postJson('v1/compare', { ...base, router, compare: { deployments: mine.map((i) => deploymentText(options[i])) } }, signal);
    mine.forEach((i, k) => { rows[i] = cmp.deployments[k]; });
  }));
  return rows;
}

// duels: [{ duel, option, alone, row }] (row: compare's answer for the option), or [{ duel, why }].
function renderCompare(duels) {
  const runs = duels.filter((d) => d.row && !d.row.error);
  $('compare-chart').hidden = runs.length === 0;
  if (runs.length) {
    drawChart('compare-chart', {
      type: 'bar',
      data: {
        labels: runs.map((d) => `${d.option.replicas}x ${label(d.option)}`),
        datasets: [
          { label: '$/hour', data: runs.map((d) => d.row.usd_per_hour), backgroundColor: runs.map((d) => (d.row.slos_met ? '#54a24b' : '#e45756')), yAxisID: 'y' },
          { label: 'TTFT p95 (ms)', data: runs.map((d) => d.row.p95_ttft_ms), backgroundColor: '#4c78a8', yAxisID: 'y2' },
        ],
      },
      options: { scales: { y: { min: 0, title: { display: true, text: '$/hour' } }, y2: { min: 0, position: 'right', title: { display: true, text: 'TTFT p95 (ms)' }, grid: { drawOnChartArea: false } } } },
    });
  } else {
    charts['compare-chart']?.destroy();
    delete charts['compare-chart'];
  }
  $('compare-table').querySelector('tbody').replaceChildren(...duels.filter((d) => d.option).map((d) => {
    const tr = document.createElement('tr');
    tr.dataset.option = `${d.option.replicas}x ${label(d.option)}`;
    const r = d.row;
    const source = d.alone ? 'planned alone: none among the plan\'s 8 cheapest' : 'the plan\'s';
    const cells = r.error
      ? [d.option.replicas, label(d.option), source, '', '', '', r.error]
      : [d.option.replicas, label(d.option), source, r.usd_per_hour.toFixed(2), ms(r.p95_ttft_ms), ms(r.p95_tpot_ms), r.slos_met ? 'met' : `missed: ${r.worst_slo}`];
    for (const c of cells) {
      const td = document.createElement('td');
      td.textContent = String(c);
      tr.append(td);
    }
    return tr;
  }));
  const met = runs.filter((d) => d.row.slos_met).sort((x, y) => x.row.usd_per_hour - y.row.usd_per_hour);
  const verdict = met.length
    ? `Verdict: ${met[0].option.replicas}x ${label(met[0].option)} at $${met[0].row.usd_per_hour.toFixed(2)}/hour, the cheapest here that meets every SLO (green).`
    : runs.length ? 'None of these meets every SLO.' : '';
  $('compare-note').textContent = [verdict, ...duels.filter((d) => d.why).map((d) => d.why)].filter(Boolean).join(' ');
}

// ---- the flow -----------------------------------------------------------------------------------
const state = { choice: 0, plan: null, controller: null, duels: null };

async function runPlan() {
  const s = readForm();
  history.replaceState(null, '', toUrl(s));
  state.controller?.abort();
  const controller = new AbortController();
  state.controller = controller;
  document.body.dataset.state = 'planning';
  setStatus('planning…');
  // The comparison belongs to the plan being replaced.
  $('compare-table').querySelector('tbody').replaceChildren();
  $('compare-note').textContent = '';
  $('progress').hidden = false;
  $('progress').value = 0;
  try {
    const plan = await postStream('v1/plan', planBody(s), controller.signal, (p) => {
      setStatus(`planning: ${p.phase} ${p.done}/${p.total}`);
      if (p.total) $('progress').value = p.done / p.total;
    });
    if (controller.signal.aborted) return;
    state.plan = plan;
    state.duels = null;
    state.choice = Math.min(s.choice, Math.max(0, plan.options.length - 1));
    renderPlan(plan, state.choice);
    setStatus(`${plan.options.length} options meet the SLOs`);
    document.body.dataset.state = 'done';
    $('progress').hidden = true;
    details(s, controller.signal);
  } catch (e) {
    if (controller.signal.aborted) return;
    clearPlan();
    setStatus(e.message, 'error');
    document.body.dataset.state = 'error';
    $('progress').hidden = true;
  }
}

// A plan stays on screen only while the inputs it answers are the ones in the form: after an
// input error the page shows the error and no plan, so no one reads an old answer as the new one.
function clearPlan() {
  state.plan = null;
  state.duels = null;
  $('plan-table').querySelector('tbody').replaceChildren();
  $('rejected').replaceChildren();
  $('plan-note').textContent = '';
  $('plan-section').hidden = true;
  $('charts').hidden = true;
}

// The chosen option's latency curve and memory, and the 4090-or-H100 comparison.
async function details(s, signal) {
  const option = state.plan.options[state.choice];
  $('charts').hidden = false;
  for (const id of ['latency-box', 'memory-box']) $(id).hidden = !option;
  const base = scenarioBody(s);
  // The comparison depends on the plan, not on the chosen row: run once per plan.
  state.duels ??= Promise.all(DUEL.map((duel) => duelOption(duel, s, planBody(s), signal)))
    .then(async (duels) => {
      const runs = duels.filter((d) => d.option);
      const rows = await compareOptions(base, runs.map((d) => d.option), signal);
      return duels.map((d) => (d.option ? { ...d, row: rows[runs.indexOf(d)] } : d));
    });
  const jobs = [state.duels.then(renderCompare)];
  if (option) {
    const deployment = { card: option.card, tp: option.tp, replicas: option.replicas, weights: option.weights, kv_cache: option.kv_cache };
    $('curve-label').textContent = `(${option.replicas}x ${label(option)}, ${option.router})`;
    $('memory-label').textContent = '';
    jobs.push(
      postJson('v1/capacity', { ...base, deployment, router: option.router, capacity: { points: 6 } }, signal)
        .then((cap) => renderCapacity(cap, { ttft: Number(s.ttft), tpot: Number(s.tpot) })),
      postJson('v1/fit', { ...base, deployment }, signal).then(renderMemory),
    );
  }
  const results = await Promise.allSettled(jobs);
  const failed = results.find((r) => r.status === 'rejected' && !signal.aborted);
  if (failed) setStatus(failed.reason.message, 'error');
}

function choose(i) {
  state.choice = i;
  history.replaceState(null, '', toUrl(readForm()));
  renderPlan(state.plan, i);
  details(readForm(), state.controller.signal);
}

let timer = null;
function scheduled() {
  state.choice = 0;
  clearTimeout(timer);
  timer = setTimeout(runPlan, 500);
}

async function start() {
  const [models, cards] = await Promise.all([fetch('v1/models', { headers: apiHeaders() }).then((r) => r.json()),
    fetch('v1/cards', { headers: apiHeaders() }).then((r) => r.json())]);
  $('model').replaceChildren(...models.map((m) => new Option(`${m.name} (${(m.total_params / 1e9).toFixed(1)}B)`, m.name)));
  for (const c of cards) CARD_CLASS.set(c.name, c.card_class);
  $('cards').replaceChildren(...cards.filter((c) => c.kind === 'gpu').map((c) => {
    const l = document.createElement('label');
    l.title = c.card_class ?? 'card class unstated';
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.value = c.name;
    l.append(box, ` ${c.name}`);
    return l;
  }));
  const s = fromUrl({ model: 'llama-3.1-8b', amount: '50', ...CHAT_WORKLOAD, ttft: '1000', tpot: '100', load: 'users', cards: DEFAULT_CARDS, cardClass: '', config: '', choice: 0 });
  state.choice = s.choice;
  writeForm(s);
  $('datacenter-only').addEventListener('input', showCardClass);
  $('inputs').addEventListener('input', scheduled);
  $('inputs').addEventListener('submit', (e) => {
    e.preventDefault();
    clearTimeout(timer);
    runPlan();
  });
  runPlan();
}

start().catch((e) => {
  setStatus(`cannot reach the capsim server: ${e.message}`, 'error');
  document.body.dataset.state = 'error';
});
