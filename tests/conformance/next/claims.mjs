// The suite's extension scenarios this project claims, and the check of a run of them.
//
//   node claims.mjs list server|client      the claimed scenarios, one a line
//   node claims.mjs check server|client DIR  every claimed scenario's checks under DIR
//                                            (the runs' `-o DIR`) must all have run and
//                                            passed: a FAILURE, a WARNING or a SKIPPED check
//                                            fails the leg, and so does a claimed scenario
//                                            with no results or with no check at all.
//
// Extension scenarios are not scored by `--requirements`: a server that does not declare an
// extension passes them with every check skipped. Claiming one here means its checks run.

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const CLAIMED = {
  server: [
    // Tasks (SEP-2663).
    'tasks-lifecycle',
    'tasks-capability-negotiation',
    'tasks-wire-fields',
    'tasks-request-state-removal',
    'tasks-mrtr-input',
    'tasks-request-headers',
    'tasks-dispatch-and-envelope',
    'tasks-required-task-error',
    'tasks-mrtr-composition',
    // Skills (SEP-2640).
    'sep-2640-skills-directory',
    'sep-2640-skills-enumeration',
    'sep-2640-skills-manifest',
  ],
  client: [
    // Authorization, every auth/* client scenario of the suite (33), extensions included:
    // discovery and metadata (RFC 9728, RFC 8414, the 2025-03-26 fallbacks), registration
    // (DCR, CIMD, pre-registration), token endpoint authentication, scopes and step-up,
    // RFC 9207 iss, resource and issuer mismatches, the server moving to another AS.
    'auth/2025-03-26-oauth-endpoint-fallback',
    'auth/2025-03-26-oauth-metadata-backcompat',
    'auth/authorization-server-migration',
    'auth/basic-cimd',
    'auth/iss-normalized',
    'auth/iss-not-advertised',
    'auth/iss-supported',
    'auth/iss-supported-missing',
    'auth/iss-unexpected',
    'auth/iss-wrong-issuer',
    'auth/metadata-default',
    'auth/metadata-issuer-mismatch',
    'auth/metadata-var1',
    'auth/metadata-var2',
    'auth/metadata-var3',
    'auth/offline-access-not-supported',
    'auth/offline-access-scope',
    'auth/pre-registration',
    'auth/resource-mismatch',
    'auth/scope-from-scopes-supported',
    'auth/scope-from-www-authenticate',
    'auth/scope-omitted-when-undefined',
    'auth/scope-retry-limit',
    'auth/scope-step-up',
    'auth/token-endpoint-auth-basic',
    'auth/token-endpoint-auth-none',
    'auth/token-endpoint-auth-post',
    // OAuth client credentials (SEP-1046): client_secret_basic, and private_key_jwt
    // (RFC 7523 §2.2) with the scenario's ES256 key.
    'auth/client-credentials-basic',
    'auth/client-credentials-jwt',
    // Workload identity federation (SEP-1933): the JWT bearer grant (RFC 7523 §2.1).
    'auth/wif-jwt-bearer',
    // Enterprise-managed authorization (SEP-990): the IdP's token exchange (RFC 8693) for an
    // ID-JAG, redeemed with the JWT bearer grant.
    'auth/enterprise-managed-authorization',
    // DPoP (SEP-1932, RFC 9449): bound tokens, a proof per request, both servers' nonces.
    'auth/dpop',
    'auth/dpop-nonce',
    // Skills (SEP-2640).
    'sep-2640-client-no-prefetch',
    'sep-2640-client-verify-digest',
    'sep-2640-client-verify-size',
    'sep-2640-client-verify-frontmatter',
  ],
};

// Scenarios of the extensions above that are not claimed, and why.
export const NOT_CLAIMED = {
  'tasks-status-notifications':
    'a placeholder in 0.2.0-alpha.12: it reports one SKIPPED check whatever the server does ' +
    '("pending subscriptions/listen rewrite"); status notifications are optional',
};

const OK = new Set(['SUCCESS', 'INFO']);

const [cmd, leg, dir] = process.argv.slice(2);
if (!['list', 'check'].includes(cmd) || !CLAIMED[leg] || (cmd === 'check' && !dir)) {
  console.error('usage: node claims.mjs list server|client | check server|client DIR');
  process.exit(2);
}
if (cmd === 'list') {
  console.log(CLAIMED[leg].join('\n'));
  process.exit(0);
}

// `[server-]<name>-<timestamp>/checks.json`, `auth/*` ones one directory down (`auth/`); the
// newest run of a scenario counts (sorted by name, the timestamps sort by time).
const runs = new Map();
for (const sub of ['', 'auth']) {
  const base = path.join(dir, sub);
  for (const entry of existsSync(base) ? readdirSync(base).sort() : []) {
    const file = path.join(base, entry, 'checks.json');
    if (!existsSync(file)) continue;
    const name = entry.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, '');
    runs.set(sub ? `${sub}/${name}` : name, file);
  }
}

let bad = 0;
for (const name of CLAIMED[leg]) {
  const file = runs.get(name);
  let checks = [];
  try {
    checks = file ? JSON.parse(readFileSync(file, 'utf8')) : [];
  } catch (e) {
    console.log(`✗ ${name}: unreadable results (${e.message})`);
    bad++;
    continue;
  }
  const failing = checks.filter((c) => !OK.has(c.status));
  if (!file || checks.length === 0) {
    console.log(`✗ ${name}: no check ran`);
    bad++;
  } else if (failing.length > 0) {
    console.log(`✗ ${name}: ${checks.length - failing.length}/${checks.length} checks passed`);
    for (const c of failing) {
      console.log(`    ${c.status} ${c.id}: ${c.errorMessage ?? ''}`.slice(0, 400));
    }
    bad++;
  } else {
    console.log(`✓ ${name}: ${checks.length}/${checks.length} checks passed`);
  }
}
console.log(`claimed ${leg} extension scenarios: ${CLAIMED[leg].length - bad}/${CLAIMED[leg].length} with every check run and passed`);
process.exit(bad === 0 ? 0 : 1);
