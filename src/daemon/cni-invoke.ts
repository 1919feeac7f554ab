// `cni.invoke` on the control socket: one CNI invocation forwarded by bin/blockspeaker-cni-shim (a Perl script that
// starts in a few ms where Node.js takes ~100), run here by the same plugin code the Node.js executable runs
// (src/cni/plugin.ts), so both entries answer alike. The plugin talks to the IPAM methods over the socket named in
// its config, as it does from its own process: one local round trip, and the same checks on the way.
import type { CniOutcome } from '../cni/plugin.ts';

export interface CniInvokeParams {
  env?: unknown;
  stdin?: unknown;
}

class CniInvokeError extends Error {
  override name = 'CniInvokeError';
  readonly code = 'BAD_REQUEST';
}

/** Only CNI_* variables with string values reach the plugin; the reply's key order is what the shim parses. */
export async function cniInvoke(p: CniInvokeParams): Promise<CniOutcome> {
  if (!p || typeof p !== 'object' || !p.env || typeof p.env !== 'object' || Array.isArray(p.env)) throw new CniInvokeError('cni.invoke: params.env must be an object of CNI_* variables');
  if (typeof p.stdin !== 'string') throw new CniInvokeError('cni.invoke: params.stdin must be the network configuration as a string');
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(p.env as Record<string, unknown>)) {
    if (k.startsWith('CNI_') && typeof v === 'string') env[k] = v;
  }
  const { runCni } = await import('../cni/plugin.ts'); // loaded on first use: most daemons never see the shim
  const out = await runCni({ env, stdin: p.stdin });
  return { stdout: out.stdout, exitCode: out.exitCode };
}
