// Picks a datastore layout by its user-facing name (config `ipam.layout`, CLI `--layout`).
import { calicoLayout } from './calico/layout.ts';
import { blockspeakerLayout, LAYOUT_NAMES, type Layout, type LayoutName } from './layout.ts';
import { IpamError } from './types.ts';

export function layoutByName(name: string | undefined): Layout {
  switch (name ?? 'blockspeaker') {
    case 'blockspeaker':
      return blockspeakerLayout;
    case 'calico':
      return calicoLayout();
    default:
      throw new IpamError('INVALID', `layout must be one of ${LAYOUT_NAMES.join(', ')}, got ${JSON.stringify(name)}`);
  }
}

export type { LayoutName };
