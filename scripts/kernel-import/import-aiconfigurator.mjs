#!/usr/bin/env node
// Imports NVIDIA AIConfigurator's measured kernel databases (Apache-2.0; parquet files under
// aic-core/src/aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/) into
// capsim's measured-kernel tables, calibration/kernels/<card>/<op>-<dtype>.csv
// (docs/data-formats.md#measured-kernel-tables). Only the data is taken, with its provenance in
// every file's header and in calibration/kernels/SOURCES.md.
//
// Usage (from the repository root, after `npm ci` in scripts/kernel-import):
//   node scripts/kernel-import/import-aiconfigurator.mjs --repo <aiconfigurator git dir> \
//        [--commit <sha>] [--out calibration/kernels]
// --repo is a clone (or bare mirror) of github.com/ai-dynamo/aiconfigurator; files are read with
// `git show <commit>:<path>`, so nothing needs checking out.
//
// Thinning (why the tables are small): GEMMs keep the (n, k) grid points from 256 up (smaller
// matrices are no linear layer of a catalogue model), drop k = 65536 (the grid lacks its
// 65536 x 65536 corner and no model's inner dimension is that wide; the lookup needs a complete
// grid), and keep the token counts m that are not the "+1" tile-boundary probes (17, 33, ...),
// with 1, 2, 4, 8, 16 below 17.

import { parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
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
  l40s: 'l40s',
}

// AIConfigurator dtype -> capsim precision name; others (fp8_block, ...) are not imported.
const GEMM_DTYPES = { bfloat16: 'bf16', fp8: 'fp8', nvfp4: 'nvfp4' }

function parseArgs(argv) {
  const args = { out: 'calibration/kernels', commit: 'HEAD' }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`)
      return argv[++i]
    }
    if (a === '--repo') args.repo = value()
    else if (a === '--commit') args.commit = value()
    else if (a === '--out') args.out = value()
    else fail(`unknown argument '${a}' (accepted: --repo DIR, --commit SHA, --out DIR)`)
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

const args = parseArgs(process.argv.slice(2))
const sha = git(args.repo, 'rev-parse', args.commit).toString().trim()
const commitDate = git(args.repo, 'log', '-1', '--format=%cs', sha).toString().trim()
const files = git(args.repo, 'ls-tree', '-r', '--name-only', sha, `${DATA}/`).toString().split('\n')
const sources = []
for (const [system, card] of Object.entries(SYSTEMS)) {
  await importGemm({ repo: args.repo, commit: sha, files, sha, system, card, out: args.out, sources })
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
