// The planner page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core)
// against a real `capsim serve`: load the page and see a plan; change the number of users and see
// the plan change; the 4090-or-H100 panel runs the plan's own options and shows the plan's numbers;
// each option's data provenance and headroom are the plan JSON's; "datacenter cards only" plans no
// consumer card; follow the shared URL and see the same plan; the charts drawn; no request leaves
// the capsim server; no console error.
//   node web/tests/page.test.mjs --capsim build/capsim --web build/web
// Exit 0 pass, 1 fail, 77 skipped (no chromium, or web/node_modules not installed), with the reason.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const capsim = arg('capsim', join(here, '../../build/capsim'));
const webDir = arg('web', join(here, '../../build/web'));
const chromiumPath = arg('chromium', '/usr/bin/chromium');

function skip(reason) {
  console.log(`SKIPPED: ${reason}`);
  process.exit(77);
}
if (!existsSync(chromiumPath)) skip(`no Chromium at ${chromiumPath} (Debian package chromium; scripts/setup.sh installs it)`);
let chromium;
try {
  ({ chromium } = createRequire(import.meta.url)('playwright-core'));
} catch {
  skip('playwright-core is not installed (cd web && npm ci; scripts/setup.sh does it)');
}
if (!existsSync(join(webDir, 'index.html'))) skip(`the page is not built in ${webDir} (cmake builds it when web/node_modules exists)`);

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures += 1;
}

// capsim serve on a free port; resolves with its address once it prints it.
function startServer() {
  const proc = spawn(capsim, ['serve', '--port', '0', '--web-dir', webDir, '--workers', '2', '--queue', '16'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^/\s]+\/)/);
      if (m) resolve({ proc, origin: m[1] });
    });
    proc.on('exit', (code) => reject(new Error(`capsim serve exited (${code}): ${out}`)));
  });
}

// The plan table once the page says it is done: the rows' labels and their $/hour.
async function planOf(page) {
  await page.waitForSelector('body[data-state="done"], body[data-state="error"]', { timeout: 240_000 });
  const state = await page.getAttribute('body', 'data-state');
  if (state !== 'done') throw new Error(`the page failed: ${await page.textContent('#status')}`);
  return page.$$eval('#plan-table tbody tr', (rows) => rows.map((r) => ({
    option: r.dataset.option,
    usd: Number(r.querySelector('[data-col=usd]').textContent),
    text: r.textContent,
  })));
}

// The "several RTX 4090s or one H100?" panel once drawn: its rows' labels, origin and numbers.
async function panelOf(page) {
  await page.waitForFunction(() => document.querySelector('#compare-note').textContent.length > 0, null, { timeout: 240_000 });
  return page.$$eval('#compare-table tbody tr', (rows) => rows.map((r) => ({
    option: r.dataset.option,
    from: r.children[2].textContent,
    usd: r.children[3].textContent,
    ttft: r.children[4].textContent,
    tpot: r.children[5].textContent,
  })));
}

// The plan table's rows with the cells the panel repeats.
function planCells(page) {
  return page.$$eval('#plan-table tbody tr', (rows) => rows.map((r) => ({
    option: r.dataset.option,
    ...Object.fromEntries(['usd', 'ttft', 'tpot'].map((col) => [col, r.querySelector(`[data-col=${col}]`).textContent])),
  })));
}

// The panel shows, for each of the two cards, the plan's cheapest option on it with the plan's
// own numbers (compare runs the same deployment, KV precision and router with the same seed), or,
// where the plan's list holds none, the cheapest option of the plan on that card alone.
async function checkPanel(page, what, planRequest) {
  const panel = await panelOf(page);
  const plan = await planCells(page);
  for (const card of ['rtx-4090', 'h100-sxm']) {
    const onCard = (o) => new RegExp(`^\\d+x ${card} `).test(o.option);
    const listed = plan.find(onCard);
    const shown = panel.filter(onCard);
    if (listed) {
      const same = shown.length === 1 && shown[0].from === "the plan's" &&
        ['option', 'usd', 'ttft', 'tpot'].every((k) => shown[0][k] === listed[k]);
      check(same,
        `${what}: the panel's ${card} is the plan's ${listed.option} ($${listed.usd}/h, TTFT p95 ${listed.ttft}, TPOT p95 ${listed.tpot}); panel: ${JSON.stringify(shown)}`);
    } else {
      const body = { ...planRequest, plan: { ...planRequest.plan, cards: [card], top: 1 } };
      const alone = await (await fetch(`${origin}v1/plan`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })).json();
      const o = alone.options[0];
      const expected = o ? `${o.replicas}x ${o.card}${o.tp > 1 ? ` tp${o.tp}` : ''} ${o.weights}${o.kv_cache === 'fp8' ? ' kv-fp8' : ''}` : undefined;
      check(o ? shown.length === 1 && shown[0].option === expected && shown[0].from.startsWith('planned alone') && Number(shown[0].usd) === o.usd_per_hour
        : shown.length === 0 && (await page.textContent('#compare-note')).includes('the plan found no option'),
      `${what}: the plan lists no ${card} option; the panel shows the plan of ${card} alone: ${expected ?? 'none'}; panel: ${JSON.stringify(shown)}`);
    }
  }
}

async function postPlan(body) {
  return (await fetch(`${origin}v1/plan`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })).json();
}

// The plan table's 'data', 'of bound' and 'more load' cells read back into numbers, against the
// plan JSON the API gives for the same request (the runs are seeded, so it is the page's plan):
// the card data's provenance (text) and basis (title), each SLO's upper end as a share of its
// bound (whole percent), the extra load met, the SLO that failed first and whether inconclusive.
async function checkReasons(page, what, planRequest) {
  const rows = await page.$$eval('#plan-table tbody tr', (trs) => trs.map((r) => {
    const cell = (col) => r.querySelector(`[data-col=${col}]`);
    return { option: r.dataset.option, data: cell('data').textContent, dataTitle: cell('data').title, bound: cell('bound').textContent, load: cell('load').textContent,
      costSource: cell('cost-source').textContent, modelError: cell('model-error').textContent };
  }));
  const plan = await postPlan(planRequest);
  const labelOf = (o) => `${o.replicas}x ${o.card}${o.tp > 1 ? ` tp${o.tp}` : ''} ${o.weights}${o.kv_cache === 'fp8' ? ' kv-fp8' : ''}`;
  check(rows.length > 0 && rows.length === plan.options.length && rows.every((r, i) => r.option === labelOf(plan.options[i])),
    `${what}: the page's ${rows.length} options are the API's ${plan.options.length}, in order`);
  let measured = 0;
  let bounded = 0;
  rows.forEach((r, i) => {
    const o = plan.options[i];
    if (!o) return;
    const cd = o.card_data;
    check(r.data === cd.efficiencies && r.dataTitle === `${cd.card_class}: ${cd.basis}` && cd.basis.length > 0,
      `${what}: ${r.option} data "${r.data}" (${r.dataTitle}) is the plan's ${cd.efficiencies} (${cd.card_class}: ${cd.basis})`);
    const me = o.model_error;
    check(r.costSource === (me.cost_source === 'measured' ? 'measured tables' : 'roofline') && r.modelError === me.text &&
      (me.holds_at_p90 === true) === (me.text === 'holds'),
    `${what}: ${r.option} costs from "${r.costSource}", at p90 model error "${r.modelError}" are the plan's ${me.cost_source}, ${me.text}`);
    const shown = Object.fromEntries([...r.bound.matchAll(/(\w+) (\d+)%/g)].map((m) => [m[1], Number(m[2])]));
    const expected = Object.fromEntries(o.headroom.slos.map((d) => [d.slo.split('_')[0], Math.round(100 * d.upper_share_of_bound)]));
    check(Object.keys(expected).length > 0 && JSON.stringify(shown) === JSON.stringify(expected),
      `${what}: ${r.option} of bound "${r.bound}" is the plan's ${JSON.stringify(expected)}`);
    const h = o.headroom.load;
    const m = r.load.match(/^(>= |< )?\+(\d+) users(?:, (\w+)(\?)?)?$/);
    if (!h) {
      check(r.load === '-', `${what}: ${r.option} more load "${r.load}": the plan measured none`);
      return;
    }
    measured += 1;
    if (!h.capped && h.max_load_met > h.load) bounded += 1;
    const extra = Math.round((h.max_load_met > h.load || h.capped ? h.max_load_met : h.least_load_missed) - h.load);
    check(h.unit === 'users' && m !== null && (m[1] === '>= ') === h.capped && (m[1] === '< ') === (!h.capped && h.max_load_met <= h.load) &&
      Number(m[2]) === extra && (m[3] ?? null) === h.first_missed_slo && (m[4] === '?') === (h.first_missed_decision === 'INCONCLUSIVE'),
    `${what}: ${r.option} more load "${r.load}" is the plan's ${JSON.stringify(h)}`);
  });
  // Not only capped or unmeasured cells: the 20 users' plan has an option that binds above its load.
  check(measured > 0 && bounded > 0, `${what}: ${measured} options have headroom runs, ${bounded} of them with an SLO that fails above the load`);
}

const { proc, origin } = await startServer();
const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage();
  const errors = [];
  const foreign = [];
  // Chromium logs every 4xx answer as a console error; the bad-input step expects its 400.
  let expect400 = false;
  page.on('console', (m) => {
    if (m.type() === 'error' && !(expect400 && m.text().includes('status of 400'))) errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => { if (!r.url().startsWith(origin)) foreign.push(r.url()); });
  let planRequest = null;
  page.on('request', (r) => { if (r.url() === `${origin}v1/plan` && r.postDataJSON().plan.top > 1) planRequest = r.postDataJSON(); });

  // 1. Load: 20 chat users of Llama-3.1-8B on the default cards.
  await page.goto(`${origin}?amount=20`);
  const small = await planOf(page);
  check(small.length > 0, `20 users: a plan with ${small.length} options, cheapest ${small[0]?.option} at $${small[0]?.usd}/hour`);
  await page.waitForFunction(() => document.querySelector('#capacity-note').textContent.length > 0, null, { timeout: 240_000 });
  await page.waitForFunction(() => document.querySelector('#compare-note').textContent.length > 0, null, { timeout: 240_000 });
  check(await page.isVisible('#latency-chart'), 'the latency-against-load chart is drawn');
  check((await page.textContent('#memory-label')).includes('KV tokens'), 'the memory breakdown of the chosen option is drawn');
  check((await page.textContent('#compare-note')).length > 0, `4090s or an H100: ${await page.textContent('#compare-note')}`);
  await checkPanel(page, '20 users', planRequest);
  await checkReasons(page, '20 users', planRequest);

  // "Datacenter cards only" on cards that include GeForce ones: their boxes are unticked and
  // disabled, the plan asks for card_class ["datacenter"] and shows no consumer option nor
  // rejection; cleared, the 4090's tick comes back and so do its options.
  const dc = await browser.newPage();
  dc.on('pageerror', (e) => errors.push(String(e)));
  let dcPlan = null;
  dc.on('request', (r) => { if (r.url() === `${origin}v1/plan` && r.postDataJSON().plan.top > 1) dcPlan = r.postDataJSON(); });
  await dc.goto(`${origin}?amount=20&cards=rtx-4090,rtx-3090,l40s,h100-sxm`);
  check((await planOf(dc)).some((r) => r.option.includes(' rtx-')), 'before "datacenter cards only": the plan has GeForce options');
  await dc.check('#datacenter-only');
  await dc.waitForFunction(() => location.search.includes('card_class=datacenter'), null, { timeout: 30_000 });
  const dcRows = await planOf(dc);
  const boxes = await dc.$$eval('#cards input', (xs) => Object.fromEntries(xs.map((x) => [x.value, { checked: x.checked, disabled: x.disabled }])));
  const dcRejected = await dc.$$eval('#rejected li', (lis) => lis.map((li) => li.textContent));
  const dcTitles = await dc.$$eval('#plan-table td[data-col=data]', (tds) => tds.map((td) => td.title));
  check(JSON.stringify(dcPlan?.plan.card_class) === '["datacenter"]' && !dcPlan.plan.cards.some((c) => c.startsWith('rtx-')),
    `datacenter cards only: the plan request says card_class ${JSON.stringify(dcPlan?.plan.card_class)}, cards ${dcPlan?.plan.cards}`);
  check(['rtx-4090', 'rtx-3090'].every((c) => !boxes[c].checked && boxes[c].disabled) &&
    ['l40s', 'h100-sxm'].every((c) => boxes[c].checked && !boxes[c].disabled),
  `datacenter cards only: the GeForce boxes are unticked and disabled, l40s and h100-sxm ticked: ${JSON.stringify(boxes)}`);
  check(dcRows.length > 0 && dcRows.every((r) => !r.option.includes(' rtx-')) && dcRejected.every((t) => !t.startsWith('rtx-')) &&
    dcTitles.every((t) => t.startsWith('datacenter: ')),
  `datacenter cards only: ${dcRows.length} options, none on a consumer card: ${dcRows.map((r) => r.option).join(', ')}`);
  await dc.waitForFunction(() => document.querySelector('#compare-note').textContent.length > 0, null, { timeout: 240_000 });
  const dcNote = await dc.textContent('#compare-note');
  check(dcNote.includes('RTX 4090: not a datacenter card'), `datacenter cards only: the panel says why it has no 4090: ${dcNote}`);
  await dc.uncheck('#datacenter-only');
  await dc.waitForFunction(() => !location.search.includes('card_class'), null, { timeout: 30_000 });
  const undone = await planOf(dc);
  check(await dc.isChecked('#cards input[value=rtx-4090]') && undone.some((r) => r.option.includes(' rtx-4090 ')),
    'datacenter cards only cleared: the 4090 is ticked again and planned');

  // 2. Twenty times the users: the cheapest option must cost more (more or bigger cards).
  await page.fill('#amount', '400');
  // The page writes the URL and sets data-state "planning" in one synchronous step when the new
  // plan starts; a plan now takes a few hundred ms, so "planning" itself can come and go between
  // two polls. Waiting for the URL is race-free, and planOf then waits for that plan's "done".
  await page.waitForFunction(() => location.search.includes('amount=400'), null, { timeout: 30_000 });
  const big = await planOf(page);
  check(big.length > 0 && big[0].usd > small[0].usd,
    `400 users: the plan changes, cheapest ${big[0]?.option} at $${big[0]?.usd}/hour > $${small[0]?.usd}/hour`);
  await checkPanel(page, '400 users', planRequest);
  const shared = page.url();
  check(shared.includes('amount=400'), `the URL holds the state: ${shared}`);

  // An input error takes the plan off the screen and shows the error (before, the 400-user plan
  // stayed, under an error only the status line showed).
  expect400 = true;
  await page.fill('#input-tokens', 'lognormal:abc');
  await page.waitForSelector('body[data-state="error"]', { timeout: 60_000 });
  const status = await page.textContent('#status');
  check(status.includes("workload.input_tokens: 'lognormal:abc'") && !(await page.isVisible('#plan-section')) &&
    (await page.$$('#plan-table tbody tr')).length === 0 && !(await page.isVisible('#charts')),
  `an input error clears the plan and says what is wrong: ${status}`);

  // 3. The shared URL, in a fresh page: the same plan, row for row.
  const other = await browser.newPage();
  other.on('pageerror', (e) => errors.push(String(e)));
  await other.goto(shared);
  const again = await planOf(other);
  check(JSON.stringify(again.map((r) => r.text)) === JSON.stringify(big.map((r) => r.text)),
    'the shared URL shows the same plan');
  check(await other.inputValue('#amount') === '400', 'the shared URL restores the form');

  // No card ticked: the page refuses, saying so, and plans nothing (before, it planned the
  // default cards without a word).
  const noCards = await browser.newPage();
  noCards.on('pageerror', (e) => errors.push(String(e)));
  const noCardPlans = [];
  noCards.on('request', (r) => { if (r.url().startsWith(`${origin}v1/`) && r.method() === 'POST') noCardPlans.push(r.url()); });
  await noCards.goto(`${origin}?amount=20&cards=`);
  await noCards.waitForSelector('body[data-state="done"], body[data-state="error"]', { timeout: 60_000 });
  const noCardStatus = await noCards.textContent('#status');
  check(await noCards.getAttribute('body', 'data-state') === 'error' && noCardStatus.includes('none is ticked') &&
    noCardPlans.length === 0 && !(await noCards.isVisible('#plan-section')),
  `no card ticked: "${noCardStatus}", ${noCardPlans.length} API POSTs`);

  // 5. The page's chat users are the CLI's: the server reads the workload the page sends for 500
  // users exactly as the CLI reads workloads/chatbot-500-users.yaml (the simulate JSON's workload
  // description: users, think time, turns, question and answer lengths, system prompt), with the
  // same prefix caching. Before, the page's users were single-turn with no system prompt.
  const chat = await browser.newPage();
  chat.on('pageerror', (e) => errors.push(String(e)));
  let chatPlan = null;
  chat.on('request', (r) => { if (r.url() === `${origin}v1/plan` && !chatPlan) chatPlan = r.postDataJSON(); });
  await chat.goto(`${origin}?model=mistral-7b&amount=500&cards=h100-sxm`);
  await planOf(chat);
  const { plan: _, ...chatScenario } = chatPlan;
  const short = { duration: '20s', warmup: '0s' };
  const pageRun = await (await fetch(`${origin}v1/simulate`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ ...chatScenario, deployment: { card: 'h100-sxm' }, workload: { ...chatScenario.workload, ...short } }),
  })).json();
  const cliRun = JSON.parse(execFileSync(capsim, ['simulate', join(here, '../../workloads/chatbot-500-users.yaml'),
    '--duration', short.duration, '--warmup', short.warmup, '-q', '--json', '-'], { encoding: 'utf8' }));
  check(pageRun.workload === cliRun.workload && pageRun.deployment?.[0]?.enable_prefix_caching === cliRun.deployment[0].enable_prefix_caching,
    `the page's 500 chat users are chatbot-500-users.yaml's: page "${pageRun.workload ?? pageRun.error}" vs CLI "${cliRun.workload}"`);

  // 4. Llama-3.1-70B fits on neither card as the page plans it: no option on either, and the
  // panel says why (the plan's rejections) instead of an empty chart.
  const big70 = await browser.newPage();
  big70.on('pageerror', (e) => errors.push(String(e)));
  await big70.goto(`${origin}?model=llama-3.1-70b&amount=500`);
  await planOf(big70);
  const panel70 = await panelOf(big70);
  const note70 = await big70.textContent('#compare-note');
  check(panel70.length === 0 && /RTX 4090: the plan found no option; .*does not fit/.test(note70) && note70.includes('H100 SXM: the plan found no option'),
    `70B: the panel says why neither card has an option: ${note70.slice(0, 300)}`);

  check(foreign.length === 0, `no request leaves the capsim server${foreign.length ? `: ${foreign.join(', ')}` : ''}`);
  check(errors.length === 0, `no console error${errors.length ? `: ${errors.join(' | ')}` : ''}`);
} catch (e) {
  check(false, e.stack || String(e));
} finally {
  await browser.close();
  proc.kill('SIGTERM');
}
process.exit(failures ? 1 : 0);
