// Bundles the planner page into OUTDIR (argv[2]): index.html, assets/app.js (the page's code and
// Chart.js, minified, no source fetched at run time) and assets/style.css. `capsim serve` serves
// OUTDIR; CMake runs this at build time into build/web/.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, 'dist');
mkdirSync(join(out, 'assets'), { recursive: true });
await build({
  entryPoints: [join(here, 'src/main.js')],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  outfile: join(out, 'assets/app.js'),
  legalComments: 'linked',
  logLevel: 'warning',
});
copyFileSync(join(here, 'src/index.html'), join(out, 'index.html'));
copyFileSync(join(here, 'src/style.css'), join(out, 'assets/style.css'));
