#!/usr/bin/env node
// Imports NVIDIA AIConfigurator's measured kernel databases (Apache-2.0; parquet files under
// aic-core/src/aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/) into
// capsim's measured-kernel tables, calibration/kernels/<card>/<op>-<dtype>.csv
// (docs/data-formats.md#measured-kernel-tables). Only the data is taken, with its provenance in
// every file's header and in calibration/kernels/SOURCES.md.
//
// Usage (from the repository root, after `npm ci` in scripts/kernel-import):
//   node scripts/kernel-import/import-aiconfigurator.mjs --repo <aiconfigurator git dir> \
//        [--commit <sha>] [--out calibration/kernels] [--models models]
// --repo is a clone (or bare mirror) of github.com/ai-dynamo/aiconfigurator; files are read with
// `git show <commit>:<path>`, so nothing needs checking out.
//
// Thinning (why the tables are small): GEMMs keep the (n, k) grid points from 256 up (smaller
// matrices are no linear layer of a catalogue model), drop k = 65536 (the grid lacks its
// 65536 x 65536 corner and no model's inner dimension is that wide; the lookup needs a complete
// grid), and keep the token counts m that are not the "+1" tile-boundary probes (17, 33, ...),
// with 1, 2, 4, 8, 16 below 17. Attention keeps the head shapes of the catalogue's models
// (models/*/config.json at TP 1, 2, 4, 8), MoE the rows with balanced routing, all-reduce vLLM's
// custom all-reduce in CUDA-graph mode; each table keeps one kernel (the one with most rows).

import { parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const DATA = 'aic-core/src/aiconfigurator_core/systems/data'
const FRAMEWORK = 'vllm'  // capsim models vLLM's engine

// AIConfigurator system -> capsim card (calibration/cards/<card>.yaml). The a100_sxm data was
// measured on an A100-SXM4-80GB (its `device` column), so it is the 80 GB SXM card.
const SYSTEMS = {
  a100_sxm: 'a100-80gb-sxm',
  h100_sxm: 'h100-sxm',
  h200_sxm: 'h200',
  b200_sxm: 'b200',
  b300_sxm: 'b300',
  gb200: 'gb200',  // one GPU of a GB200 NVL72 (the card file is per GPU)
  l40s: 'l40s',
  rtx_pro_6000_server: 'rtx-pro-6000',  // RTX PRO 6000 Blackwell Server Edition
}

// AIConfigurator dtype -> capsim precision name; others (fp8_block, ...) are not imported.
const GEMM_DTYPES = { bfloat16: 'bf16', fp8: 'fp8', nvfp4: 'nvfp4' }

function parseArgs(argv) {
  const args = { out: 'calibration/kernels', commit: 'HEAD', models: 'models' }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--repo') args.repo = value()
    else if (a === '--commit') args.commit = value()
    else if (a === '--out') args.out = value()
    else if (a === '--models') args.models = value()
    else fail(`unknown argument '${a}' (accepted: --repo DIR, --commit SHA, --out DIR, --models DIR)`)
  }
  if (!args.repo) fail('--repo <aiconfigurator git dir> is required')
  return args
}

function fail(message) {
  console.error(`import-aiconfigurator: ${message}`)
  process.exit(2)
}

function git(repo, ...args) {
  return execFileSync('git', ['-C', repo, ...args], { maxBuffer: 1 << 30 })
}

// Versions of `op` measured for `framework` on `system` that hold `table`.parquet itself (a
// version with only reuse.yaml borrows another version's file), newest first.
function measuredVersions(repo, commit, files, system, op, table) {
  const prefix = `${DATA}/${system}/${op}/${FRAMEWORK}/`
  const versions = new Set()
  for (const f of files) {
    if (f.startsWith(prefix) && f.endsWith(`/${table}.parquet`)) versions.add(f.slice(prefix.length).split('/')[0])
  }
  const key = v => v.split(/[.-]/).map(p => (/^\d+$/.test(p) ? p.padStart(6, '0') : p)).join('.')
  return [...versions].sort((a, b) => (key(a) < key(b) ? 1 : -1))
}

async function readParquet(repo, commit, path) {
  const buf = git(repo, 'show', `${commit}:${path}`)
  const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  return parquetReadObjects({ file, compressors })
}

// Four significant digits: 0.05% at worst, far below the run-to-run spread of a kernel timing.
function fmt(us) {
  return Number(us.toPrecision(4)).toString()
}

function header(meta) {
  return Object.entries(meta).map(([k, v]) => `# ${k}: ${v}`).join('\n') + '\n'
}

function keepGemmM(m) {
  if (m <= 16) return [1, 2, 4, 8, 16].includes(m)
  return m % 16 === 0
}

async function importGemm({ repo, commit, files, sha, system, card, out, sources }) {
  const versions = measuredVersions(repo, commit, files, system, 'gemm', 'gemm_perf')
  if (versions.length === 0) return
  const version = versions[0]
  const path = `${DATA}/${system}/gemm/${FRAMEWORK}/${version}/gemm_perf.parquet`
  const rows = await readParquet(repo, commit, path)
  const byDtype = {}
  for (const r of rows) {
    const dtype = GEMM_DTYPES[r.gemm_dtype]
    if (!dtype) continue
    const m = Number(r.m), n = Number(r.n), k = Number(r.k)
    if (n < 256 || k < 256 || k >= 65536 || !keepGemmM(m)) continue
    ;(byDtype[dtype] ??= { kernel: new Set(), device: r.device, rows: [] })
    byDtype[dtype].kernel.add(r.kernel_source)
    byDtype[dtype].rows.push([m, n, k, Number(r.latency) * 1000])  // latency is in ms
  }
  for (const [dtype, t] of Object.entries(byDtype)) {
    if (t.kernel.size !== 1) fail(`${path}: ${dtype} rows come from several kernels (${[...t.kernel]})`)
    t.rows.sort((a, b) => a[1] - b[1] || a[2] - b[2] || a[0] - b[0])
    const meta = {
      'capsim measured-kernel table': 1,
      op: 'gemm',
      dtype,
      card,
      device: t.device,
      framework: `vllm ${version}`,
      kernel: [...t.kernel][0],
      source: `github.com/ai-dynamo/aiconfigurator@${sha} ${path}`,
      licence: 'Apache-2.0',
      unit: 'us',
    }
    const body = ['n,k,m,us', ...t.rows.map(([m, n, k, us]) => `${n},${k},${m},${fmt(us)}`)].join('\n') + '\n'
    const file = join(out, card, `gemm-${dtype}.csv`)
    mkdirSync(join(out, card), { recursive: true })
    writeFileSync(file, header(meta) + body)
    sources.push({ file: `${card}/gemm-${dtype}.csv`, rows: t.rows.length, path, version, kernel: meta.kernel, device: t.device })
    console.log(`${file}: ${t.rows.length} rows`)
  }
}

// The attention shapes capsim's catalogue runs, per GPU at TP 1, 2, 4, 8: (query heads, KV heads
// (at least one per GPU: vLLM replicates them), head dim), from models/*/config.json. MLA models
// (kv_lora_rank) are left out: their kernels are the mla tables, not imported yet.
function catalogueAttentionShapes(modelsDir) {
  const shapes = new Set()
  for (const name of readdirSync(modelsDir)) {
    const path = join(modelsDir, name, 'config.json')
    if (!existsSync(path)) continue
    let c = JSON.parse(readFileSync(path, 'utf8'))
    c = c.text_config ?? c
    const heads = c.num_attention_heads ?? c.n_head
    const hidden = c.hidden_size ?? c.n_embd
    if (!heads || !hidden || c.kv_lora_rank) continue
    const kv = c.num_key_value_heads ?? heads
    const headDim = c.head_dim ?? hidden / heads
    for (const tp of [1, 2, 4, 8]) {
      if (heads % tp) continue
      shapes.add(`${heads / tp},${Math.max(1, kv / tp)},${headDim}`)
    }
  }
  return shapes
}

// Writes one table: `columns` are the op's shape columns (us is added), `rows` [shape..., us].
function writeTable({ out, card, op, dtype, device, version, kernel, path, sha, columns, rows, sources, note }) {
  rows.sort((a, b) => {
    for (let i = 0; i < a.length - 1; i++) if (a[i] !== b[i]) return a[i] - b[i]
    return 0
  })
  const meta = {
    'capsim measured-kernel table': 1,
    op,
    dtype,
    card,
    device,
    framework: `vllm ${version}`,
    kernel,
    source: `github.com/ai-dynamo/aiconfigurator@${sha} ${path}`,
    licence: 'Apache-2.0',
    unit: 'us',
  }
  if (note) meta.note = note
  const body = [[...columns, 'us'].join(','), ...rows.map(r => [...r.slice(0, -1), fmt(r[r.length - 1])].join(','))].join('\n') + '\n'
  mkdirSync(join(out, card), { recursive: true })
  const file = `${card}/${op}-${dtype}.csv`
  writeFileSync(join(out, file), header(meta) + body)
  sources.push({ file, rows: rows.length, path, version, kernel, device })
  console.log(`${file}: ${rows.length} rows`)
}

// The kernel with the most rows in `rows` (a table holds one kernel's times).
function mainKernel(rows) {
  const count = {}
  for (const r of rows) count[r.kernel_source] = (count[r.kernel_source] ?? 0) + 1
  return Object.entries(count).sort((a, b) => b[1] - a[1])[0][0]
}

async function newestTable(ctx, op, table) {
  const versions = measuredVersions(ctx.repo, ctx.commit, ctx.files, ctx.system, op, table)
  if (versions.length === 0) return null
  const path = `${DATA}/${ctx.system}/${op}/${FRAMEWORK}/${versions[0]}/${table}.parquet`
  return { version: versions[0], path, rows: await readParquet(ctx.repo, ctx.commit, path) }
}

// vLLM's custom all-reduce in CUDA-graph mode (the decode path), bf16: gpus, message bytes.
async function importAllreduce(ctx) {
  const t = await newestTable(ctx, 'comm', 'custom_allreduce_perf')
  if (!t) return
  const rows = t.rows.filter(r => r.backend === 'vllm_graph' && r.allreduce_dtype === 'bfloat16')
  if (rows.length === 0) return
  writeTable({ ...ctx, op: 'allreduce', dtype: 'bf16', device: rows[0].device, version: t.version,
    kernel: mainKernel(rows), path: t.path, columns: ['gpus', 'bytes'],
    rows: rows.filter(r => r.kernel_source === mainKernel(rows)).map(r => [Number(r.num_gpus), Number(r.message_size), Number(r.latency) * 1000]) })
}

// Fused MoE layer (routing, both grouped GEMMs, activation, combine).
const MOE_DTYPES = { bfloat16: 'bf16', fp8: 'fp8', fp8_block: 'fp8_block', nvfp4: 'nvfp4' }
async function importMoe(ctx) {
  const t = await newestTable(ctx, 'moe', 'moe_perf')
  if (!t) return
  for (const [source, dtype] of Object.entries(MOE_DTYPES)) {
    // Balanced routing, as capsim assumes; where only skewed runs exist (A100), the mildest.
    const ofDtype = t.rows.filter(r => r.moe_dtype === source)
    const distribution = ['balanced', 'power_law_1.01'].find(d => ofDtype.some(r => r.distribution === d))
    if (!distribution) continue
    const all = ofDtype.filter(r => r.distribution === distribution)
    const kernel = mainKernel(all)
    const rows = all.filter(r => r.kernel_source === kernel)
    writeTable({ ...ctx, op: 'moe', dtype, device: rows[0].device, version: t.version, kernel, path: t.path,
      note: `routing ${distribution}`,
      columns: ['tokens', 'hidden', 'inter', 'experts', 'topk', 'tp', 'ep'],
      rows: rows.map(r => [Number(r.num_tokens), Number(r.hidden_size), Number(r.inter_size), Number(r.num_experts),
        Number(r.topk), Number(r.moe_tp_size), Number(r.moe_ep_size), Number(r.latency) * 1000]) })
  }
}

// Attention with a 16-bit query, by KV-cache dtype, for the catalogue's head shapes. Decode
// (generation): one new token per sequence over `context` = isl + step tokens. Prefill
// (context): `tokens` new tokens per sequence, no cached prefix.
const KV_DTYPES = { bfloat16: 'bf16', fp8: 'fp8' }
async function importAttention(ctx) {
  for (const [table, op, lengthColumn] of [['generation_attention_perf', 'attention_decode', 'context'],
    ['context_attention_perf', 'attention_prefill', 'tokens']]) {
    const t = await newestTable(ctx, 'attention', table)
    if (!t) continue
    for (const [source, dtype] of Object.entries(KV_DTYPES)) {
      const all = t.rows.filter(r => r.attn_dtype === 'bfloat16' && r.kv_cache_dtype === source &&
        ctx.attentionShapes.has(`${r.num_heads},${r.num_key_value_heads},${r.head_dim}`))
      if (all.length === 0) continue
      const kernel = mainKernel(all)
      const rows = all.filter(r => r.kernel_source === kernel)
      writeTable({ ...ctx, op, dtype, device: rows[0].device, version: t.version, kernel, path: t.path,
        columns: ['batch', lengthColumn, 'heads', 'kv_heads', 'head_dim', 'window'],
        note: op === 'attention_decode' ? 'context = isl + step of the source (KV tokens read per sequence)' : undefined,
        rows: rows.map(r => [Number(r.batch_size), op === 'attention_decode' ? Number(r.isl) + Number(r.step) : Number(r.isl),
          Number(r.num_heads), Number(r.num_key_value_heads), Number(r.head_dim), Number(r.window_size), Number(r.latency) * 1000]) })
    }
  }
}

const args = parseArgs(process.argv.slice(2))
const sha = git(args.repo, 'rev-parse', args.commit).toString().trim()
const commitDate = git(args.repo, 'log', '-1', '--format=%cs', sha).toString().trim()
const files = git(args.repo, 'ls-tree', '-r', '--name-only', sha, `${DATA}/`).toString().split('\n')
const sources = []
const attentionShapes = catalogueAttentionShapes(args.models)
for (const [system, card] of Object.entries(SYSTEMS)) {
  const ctx = { repo: args.repo, commit: sha, files, sha, system, card, out: args.out, sources, attentionShapes }
  await importGemm(ctx)
  await importAttention(ctx)
  await importMoe(ctx)
  await importAllreduce(ctx)
}

const lines = [
  '# Sources of the measured-kernel tables',
  '',
  'Written by `scripts/kernel-import/import-aiconfigurator.mjs`; do not edit by hand',
  '(format: docs/data-formats.md#measured-kernel-tables).',
  '',
  `- Repository: github.com/ai-dynamo/aiconfigurator (NVIDIA AIConfigurator), commit \`${sha}\` (${commitDate})`,
  '- Licence: Apache License 2.0 (the repository\'s LICENSE). Only measured values are taken, thinned',
  '  as the importer\'s header says; no code.',
  `- Framework: vLLM, the newest version that holds each table's own parquet file`,
  '',
  '| file | rows | vLLM | kernel | device | source path |',
  '|---|---|---|---|---|---|',
  ...sources.map(s => `| ${s.file} | ${s.rows} | ${s.version} | ${s.kernel} | ${s.device} | ${s.path} |`),
  '',
]
writeFileSync(join(args.out, 'SOURCES.md'), lines.join('\n'))
