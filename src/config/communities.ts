// bgp.communities (named community values) and bgp.prefixAdvertisements (cidr -> community names or literal
// values), shaped like Calico's BGPConfiguration so one resolver serves the config file and the importer.
// Names resolve to values here: the speaker only sees literal values (src/bgp/communities.ts).
import { formatPrefix, parsePrefix } from '../net/ip.ts';
import { isCommunityText, parseCommunity, type PrefixAdvertisement } from '../bgp/communities.ts';
import { isPlainObject, show, type Checker, type Path } from './check.ts';

export const COMMUNITY_BGP_FIELDS = ['communities', 'prefixAdvertisements'] as const;

export interface NamedCommunity {
  name: string;
  value: string;
}

/** A problem at a path relative to the object holding communities / prefixAdvertisements. */
export interface CommunityIssue {
  path: Path;
  message: string;
}

/**
 * Check both lists and resolve names. Returns the advertisements with literal values in the order written
 * (duplicates within one advertisement dropped, as confd does), and every problem found.
 */
export function resolveCommunities(communities: unknown, ads: unknown): { named: NamedCommunity[]; ads: PrefixAdvertisement[]; issues: CommunityIssue[] } {
  const issues: CommunityIssue[] = [];
  const named: NamedCommunity[] = [];
  const byName = new Map<string, string>();
  if (communities !== undefined && communities !== null) {
    if (!Array.isArray(communities)) issues.push({ path: ['communities'], message: `must be a list of { name, value }, got ${show(communities)}` });
    else {
      communities.forEach((c, i) => {
        const at: Path = ['communities', i];
        if (!isPlainObject(c) || Object.keys(c).some((k) => k !== 'name' && k !== 'value')) {
          return issues.push({ path: at, message: `must be { name, value }, got ${show(c)}` });
        }
        if (typeof c.name !== 'string' || c.name === '') return issues.push({ path: [...at, 'name'], message: `must be a non-empty name, got ${show(c.name)}` });
        if (isCommunityText(c.name)) return issues.push({ path: [...at, 'name'], message: `${show(c.name)} looks like a community value; a name must not` });
        if (byName.has(c.name)) return issues.push({ path: [...at, 'name'], message: `${show(c.name)} is defined twice` });
        try {
          parseCommunity(String(c.value));
        } catch (e) {
          return issues.push({ path: [...at, 'value'], message: (e as Error).message });
        }
        byName.set(c.name, String(c.value));
        named.push({ name: c.name, value: String(c.value) });
      });
    }
  }
  const out: PrefixAdvertisement[] = [];
  if (ads !== undefined && ads !== null) {
    if (!Array.isArray(ads)) issues.push({ path: ['prefixAdvertisements'], message: `must be a list of { cidr, communities }, got ${show(ads)}` });
    else {
      ads.forEach((a, i) => {
        const at: Path = ['prefixAdvertisements', i];
        if (!isPlainObject(a) || Object.keys(a).some((k) => k !== 'cidr' && k !== 'communities')) {
          return issues.push({ path: at, message: `must be { cidr, communities }, got ${show(a)}` });
        }
        let cidr: string;
        try {
          cidr = formatPrefix(parsePrefix(String(a.cidr ?? '')));
        } catch (e) {
          return issues.push({ path: [...at, 'cidr'], message: `${(e as Error).message}, got ${show(a.cidr)}` });
        }
        if (!Array.isArray(a.communities)) return issues.push({ path: [...at, 'communities'], message: `must be a list of community names or aa:nn / aa:nn:mm values, got ${show(a.communities)}` });
        const values: string[] = [];
        a.communities.forEach((c, j) => {
          const t = String(c);
          let v: string | undefined;
          if (isCommunityText(t)) {
            try {
              parseCommunity(t);
              v = t;
            } catch (e) {
              issues.push({ path: [...at, 'communities', j], message: (e as Error).message });
              return;
            }
          } else v = byName.get(t);
          if (v === undefined) {
            issues.push({ path: [...at, 'communities', j], message: `${show(c)} is neither a value (aa:nn, aa:nn:mm) nor a name defined in communities${byName.size ? ` (${[...byName.keys()].join(', ')})` : ''}` });
          } else if (!values.includes(v)) values.push(v);
        });
        out.push({ cidr, communities: values });
      });
    }
  }
  return { named, ads: out, issues };
}

/** The config file's bgp.communities / bgp.prefixAdvertisements, issues reported through the checker. */
export function bgpCommunities(c: Checker, o: Record<string, unknown>): { communities?: NamedCommunity[]; prefixAdvertisements?: PrefixAdvertisement[] } {
  const r = resolveCommunities(o.communities, o.prefixAdvertisements);
  for (const i of r.issues) c.fail(['bgp', ...i.path], i.message);
  const out: { communities?: NamedCommunity[]; prefixAdvertisements?: PrefixAdvertisement[] } = {};
  if (r.named.length) out.communities = r.named;
  if (r.ads.length) out.prefixAdvertisements = r.ads;
  return out;
}
