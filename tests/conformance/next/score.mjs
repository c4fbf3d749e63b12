// Scores one `conformance server|client --requirements REV` run against the revision's frozen
// requirement set (the package's requirements/REV.yaml), from the run's console output.
//
//   node score.mjs server|client REV LOG
//
// Prints one line per scored scenario, then `scored: P/N scenarios, C passed, F failed` (the
// scored scenarios' checks). Exits 1 unless every scored scenario of the leg passed, apart
// from PENDING_OAUTH below, which are printed as "pending OAuth" (and fail the run if one of
// them passes, so the list is trimmed as OAuth lands). A scored scenario missing from the
// output fails the run too. Run it on the Node 22 of this directory's node_modules.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The client's scored auth/* scenarios: they need an OAuth 2.1 client, which the conformance
// client does not have yet. Removing an entry makes that scenario required.
const PENDING_OAUTH = {
  '2025-11-25': [
    'auth/metadata-default',
    'auth/metadata-var1',
    'auth/metadata-var2',
    'auth/metadata-var3',
    'auth/basic-cimd',
    'auth/scope-from-www-authenticate',
    'auth/scope-from-scopes-supported',
    'auth/scope-omitted-when-undefined',
    'auth/scope-step-up',
    'auth/scope-retry-limit',
    'auth/token-endpoint-auth-basic',
    'auth/token-endpoint-auth-post',
    'auth/token-endpoint-auth-none',
    'auth/pre-registration',
  ],
  '2026-07-28': [
    'auth/metadata-default',
    'auth/metadata-var1',
    'auth/metadata-var2',
    'auth/metadata-var3',
    'auth/basic-cimd',
    'auth/scope-from-www-authenticate',
    'auth/scope-from-scopes-supported',
    'auth/scope-omitted-when-undefined',
    'auth/scope-step-up',
    'auth/scope-retry-limit',
    'auth/token-endpoint-auth-basic',
    'auth/token-endpoint-auth-post',
    'auth/token-endpoint-auth-none',
    'auth/pre-registration',
    'auth/resource-mismatch',
    'auth/offline-access-scope',
    'auth/offline-access-not-supported',
    'auth/authorization-server-migration',
    'auth/iss-supported',
    'auth/iss-not-advertised',
    'auth/iss-supported-missing',
    'auth/iss-wrong-issuer',
    'auth/iss-unexpected',
    'auth/iss-normalized',
    'auth/metadata-issuer-mismatch',
  ],
};

const [leg, rev, logFile] = process.argv.slice(2);
if (!['server', 'client'].includes(leg) || !rev || !logFile) {
  console.error('usage: node score.mjs server|client REV LOG');
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
const pending = new Set(leg === 'client' ? (PENDING_OAUTH[rev] ?? []) : []);
for (const name of pending) {
  if (!scored.includes(name)) {
    console.error(`PENDING_OAUTH[${rev}] names ${name}, which ${rev} does not score`);
    process.exit(2);
  }
}

// `✓ name: N passed, M failed[, K warnings]` lines of the closing summary.
const text = readFileSync(logFile, 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
const summary = text.slice(Math.max(text.lastIndexOf('SUMMARY ==='), 0));
const results = new Map();
for (const m of summary.matchAll(/^([✓✗]) (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings?)?$/gmu)) {
  results.set(m[2], { ok: m[1] === '✓', passed: +m[3], failed: +m[4], warnings: +(m[5] ?? 0) });
}

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
  if (pending.has(name)) {
    if (r?.ok) {
      console.log(`  PASSES   ${name} (${figures}): remove it from PENDING_OAUTH`);
      bad++;
    } else {
      console.log(`  pending OAuth  ${name} (${figures})`);
    }
  } else if (r?.ok) {
    console.log(`  ok       ${name} (${figures})`);
  } else {
    console.log(`  FAILED   ${name} (${figures})`);
    bad++;
  }
}
const required = scored.length - pending.size;
const requiredOk = scored.filter((n) => !pending.has(n) && results.get(n)?.ok).length;
console.log(
  `${leg} ${rev}: scored ${ok}/${scored.length} scenarios, ${passed} checks passed, ${failed} failed` +
    (pending.size ? `; required without OAuth ${requiredOk}/${required}, ${pending.size} pending OAuth` : ''),
);
process.exit(bad === 0 ? 0 : 1);
