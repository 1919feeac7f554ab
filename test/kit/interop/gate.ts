// The tap gate of the interop tests: skip (or, under REQUIRE_PEERS=1, fail) when the machine cannot run peers.
//   const gate = interopGate(t, ['bird', 'gobgp']);   // false when usable, else a skip reason
//   t.test('bird <-> gobgp', { skip: gate }, async (t) => { ... });
// Without REQUIRE_PEERS=1 a missing package or not being root skips with the reason ("bird not found: apt-get
// install bird2"); with REQUIRE_PEERS=1 (CI) it is a test failure. When usable, the gate also removes leftovers
// of earlier crashed runs (namespaces `bs-*-<pid>` and temp dirs `bs-interop-<pid>-*` of dead pids) and registers
// `cleanupAll()` on t.teardown.
import { cleanupAll, cleanupLeftovers } from './netns.ts';
import type { PeerKind } from './peer-types.ts';
import { missingPrereqs } from './prereqs.ts';

export const requirePeers = (): boolean => process.env.REQUIRE_PEERS === '1' || process.env.REQUIRE_PEERS === 'true';

interface GateTest {
  fail(message: string): unknown;
  teardown(fn: () => unknown): unknown;
  comment(...args: unknown[]): unknown;
}

/**
 * false when the peers can run (and then leftovers are cleaned and cleanupAll is registered on t.teardown), else
 * the skip reason. With REQUIRE_PEERS=1 a missing prerequisite is also reported as a failure on t.
 */
export function interopGate(t: GateTest, kinds: PeerKind[]): false | string {
  const d = gateDecision(missingPrereqs(kinds));
  if (d.fail) t.fail(`${d.skip} (REQUIRE_PEERS=1, so this is a failure, not a skip)`);
  else if (d.skip) t.comment(`skipping: ${d.skip} (set REQUIRE_PEERS=1 to make this a failure)`);
  if (d.skip) return d.skip;
  cleanupLeftovers();
  t.teardown(() => cleanupAll());
  return false;
}

/** The gate's decision for a list of missing prerequisites: skip reason (or false) and whether it is a failure. */
export function gateDecision(missing: string[], required = requirePeers()): { skip: false | string; fail: boolean } {
  if (!missing.length) return { skip: false, fail: false };
  return { skip: `interop peers unavailable: ${missing.join('; ')}`, fail: required };
}
