// Holds scenario runs made by name (`conformance server|client --scenario NAME -o DIR`) to
// every check passing: reads each `checks.json` under DIR and fails on any check whose
// status is not SUCCESS (INFO lines aside), so a FAILURE, a WARNING or a SKIPPED check fails
// the run; so does an expected scenario with no results.
//
//   node strict.mjs DIR SCENARIO...
//
// Prints one line per result directory (`ok|FAILED <dir>: P passed, F failed, S skipped, W
// warnings`, then the checks that did not pass) and a closing `scenarios: N passed, M failed`
// (scenario runs). Exits 1 unless every run of every SCENARIO passed.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const [dir, ...expected] = process.argv.slice(2);
if (!dir || expected.length === 0) {
  console.error('usage: node strict.mjs DIR SCENARIO...');
  process.exit(2);
}

// `[server-]<scenario>-<timestamp>/checks.json`, at any depth.
const runs = [];
(function walk(d) {
  if (!existsSync(d)) return;
  for (const entry of readdirSync(d).sort()) {
    const p = path.join(d, entry);
    if (!statSync(p).isDirectory()) continue;
    const file = path.join(p, 'checks.json');
    if (existsSync(file)) runs.push({ dir: path.relative(dir, p), file });
    else walk(p);
  }
})(dir);

let passed = 0;
let failed = 0;
for (const run of runs) {
  let checks;
  try {
    checks = JSON.parse(readFileSync(run.file, 'utf8'));
  } catch (e) {
    console.log(`  FAILED   ${run.dir}: unreadable checks.json (${e.message})`);
    failed++;
    continue;
  }
  const count = (status) => checks.filter((c) => c.status === status).length;
  const bad = checks.filter((c) => c.status !== 'SUCCESS' && c.status !== 'INFO');
  const ok = bad.length === 0 && count('SUCCESS') > 0;
  console.log(
    `  ${ok ? 'ok      ' : 'FAILED  '} ${run.dir}: ${count('SUCCESS')} passed, ` +
      `${count('FAILURE')} failed, ${count('SKIPPED')} skipped, ${count('WARNING')} warnings`,
  );
  for (const c of bad) {
    console.log(`             ${c.status} ${c.id}: ${c.errorMessage ?? ''}`.slice(0, 400));
  }
  if (ok) passed++;
  else failed++;
}
const name = (run) => path.basename(run.dir).replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, '');
for (const scenario of expected) {
  if (!runs.some((run) => name(run) === scenario)) {
    console.log(`  FAILED   ${scenario}: no results`);
    failed++;
  }
}
console.log(`scenarios: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
