// Calico BGPPeer password and ttlSecurity as blockspeaker's peers[].password and peers[].ttlSecurity.
// Calico reads password.secretKeyRef {name, key} from a Kubernetes Secret through the API server; blockspeaker
// reads files, so the Secret is expected mounted as a volume (secretName: NAME at CALICO_SECRETS_DIR/NAME), which
// puts each key in its own file: CALICO_SECRETS_DIR/NAME/KEY.
import type { SecretSource } from '../store/etcd-auth.ts';

export const CALICO_SECRETS_DIR = '/etc/blockspeaker/secrets';

/** A Secret's name and key: DNS subdomain / config-map key characters, so neither can climb out of the directory. */
const SECRET_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface CalicoPeerSecurity {
  password?: SecretSource;
  ttlSecurity?: number;
}

/** The peer's protection from its spec, or an error naming the field (the caller fails the object with it). */
export function calicoPeerSecurity(spec: Obj): CalicoPeerSecurity | { field: string; message: string } {
  const out: CalicoPeerSecurity = {};
  if (spec.password !== undefined && spec.password !== null) {
    const ref = isObj(spec.password) ? spec.password.secretKeyRef : undefined;
    if (!isObj(spec.password) || Object.keys(spec.password).some((k) => k !== 'secretKeyRef') || !isObj(ref)) {
      return { field: 'password', message: `must be { secretKeyRef: { name, key } }, got ${JSON.stringify(spec.password)}` };
    }
    const { name, key } = ref;
    if (typeof name !== 'string' || !SECRET_NAME.test(name) || name.includes('..')) {
      return { field: 'password.secretKeyRef.name', message: `must be a Secret name, got ${JSON.stringify(name)}` };
    }
    if (typeof key !== 'string' || !SECRET_KEY.test(key) || key === '.' || key === '..') {
      return { field: 'password.secretKeyRef.key', message: `must be a key of the Secret, got ${JSON.stringify(key)}` };
    }
    out.password = { file: `${CALICO_SECRETS_DIR}/${name}/${key}` };
  }
  if (spec.ttlSecurity !== undefined && spec.ttlSecurity !== null) {
    const n = spec.ttlSecurity;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 255) {
      return { field: 'ttlSecurity', message: `must be 0..255 hops, got ${JSON.stringify(n)}` };
    }
    if (n > 0) out.ttlSecurity = n; // 0: off, as in Calico
  }
  return out;
}
