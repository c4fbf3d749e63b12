// Scores one `conformance server|client --requirements REV` run against the revision's frozen
// requirement set (the package's requirements/REV.yaml), from the run's console output.
//
//   node score.mjs server|client REV LOG [RESULTS]
//
// Prints a line per scored scenario that failed (every one with SCORE_VERBOSE set), then
// `scored: P/N scenarios, C passed, F failed` (the scored scenarios' checks). With RESULTS
// (the run's `-o` directory), the checks that failed or warned are printed under each
// failing scenario.
//
// Exits 1 unless every scored scenario of the leg passed (a scored scenario missing from
// the output fails the run too). Run it on the Node 22 of this directory's node_modules.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const [leg, rev, logFile, resultsDir] = process.argv.slice(2);
if (!['server', 'client'].includes(leg) || !rev || !logFile) {
  console.error('usage: node score.mjs server|client REV LOG [RESULTS]');
  process.exit(2);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.join(here, 'node_modules/@modelcontextprotocol/conformance');
const require = createRequire(path.join(pkg, 'package.json'));
const { parse } = require('yaml');
const requirements = parse(readFileSync(path.join(pkg, 'requirements', `${rev}.yaml`), 'utf8'));
const scored = requirements[leg] ?? [];
if (scored.length === 0) {
  console.error(`no ${leg} scenarios in requirements/${rev}.yaml`);
  process.exit(2);
}
// `✓ name: N passed, M failed[, K warnings]` lines of the closing summary.
const text = readFileSync(logFile, 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
const summary = text.slice(Math.max(text.lastIndexOf('SUMMARY ==='), 0));
const results = new Map();
for (const m of summary.matchAll(/^([✓✗]) (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings?)?$/gmu)) {
  results.set(m[2], { ok: m[1] === '✓', passed: +m[3], failed: +m[4], warnings: +(m[5] ?? 0) });
}

// checks.json of each scenario under RESULTS: `[server-]<name>-<timestamp>/checks.json`,
// auth/* ones one directory down.
const checksOf = new Map();
(function walk(dir) {
  if (!dir || !existsSync(dir)) return;
  for (const entry of readdirSync(dir).sort()) {
    const p = path.join(dir, entry);
    if (!statSync(p).isDirectory()) continue;
    const file = path.join(p, 'checks.json');
    if (!existsSync(file)) {
      walk(p);
      continue;
    }
    const name = path
      .relative(resultsDir, p)
      .replace(/^server-/, '')
      .replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, '');
    try {
      checksOf.set(name, JSON.parse(readFileSync(file, 'utf8')));
    } catch {
      // An unreadable file only loses the detail.
    }
  }
})(resultsDir);
const explain = (name) => {
  for (const c of checksOf.get(name) ?? []) {
    if (c.status === 'FAILURE' || c.status === 'WARNING') {
      console.log(`             ${c.status} ${c.id}: ${c.errorMessage ?? ''}`.slice(0, 400));
    }
  }
};

let ok = 0, passed = 0, failed = 0, bad = 0;
for (const name of scored) {
  const r = results.get(name);
  if (r) {
    passed += r.passed;
    failed += r.failed;
    if (r.ok) ok++;
  }
  const figures = r
    ? `${r.passed} passed, ${r.failed} failed` + (r.warnings ? `, ${r.warnings} warnings` : '')
    : 'not in the output';
  if (r?.ok) {
    if (process.env.SCORE_VERBOSE) console.log(`  ok       ${name} (${figures})`);
  } else {
    console.log(`  FAILED   ${name} (${figures})`);
    explain(name);
    bad++;
  }
}
console.log(
  `${leg} ${rev}: scored ${ok}/${scored.length} scenarios, ${passed} checks passed, ${failed} failed`,
);
process.exit(bad === 0 ? 0 : 1);
