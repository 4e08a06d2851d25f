/**
 * The CarrySeal port with the solver keys a process holds: HMAC-SHA256 under a key derived from
 * the provider's key (never the key itself), so a copy of a message carrying a paid submission or
 * an answer can be trusted by the lanes that hold that provider's key and forged by no producer.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { CarrySeal } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import type { Redactor } from '../core/redaction.js';
import type { KeyLoaders } from './solver-key.js';

/** What the seal's key is derived for: the provider key signs nothing else under this label. */
const LABEL = 'captcha-fleet redelivery seal v1';

export type { KeyLoaders } from './solver-key.js';

/**
 * A seal over the keys given. A key that cannot be read seals nothing (the carry is then not
 * made: the next delivery falls back to what the record holds). Each key read is also given to
 * `redactor`, so the consumer's logs know it from then on.
 */
export function createCarrySeal(loaders: KeyLoaders, redactor?: Redactor): CarrySeal {
  const derived = new Map<SolverProvider, Buffer>();
  const keyOf = async (provider: SolverProvider): Promise<Buffer | undefined> => {
    const known = derived.get(provider);
    if (known !== undefined) return known;
    const load = loaders[provider];
    if (load === undefined) return undefined;
    let key: string;
    try {
      key = await load();
    } catch {
      return undefined;
    }
    redactor?.add(key);
    const sealKey = createHmac('sha256', key).update(LABEL).digest();
    derived.set(provider, sealKey);
    return sealKey;
  };
  const macOf = (key: Buffer, payload: string) => createHmac('sha256', key).update(payload).digest();
  return {
    async seal(provider, payload) {
      const key = await keyOf(provider);
      return key === undefined ? undefined : macOf(key, payload).toString('hex');
    },
    async verify(provider, payload, mac) {
      const key = await keyOf(provider);
      if (key === undefined || !/^[0-9a-f]{64}$/.test(mac)) return false;
      return timingSafeEqual(macOf(key, payload), Buffer.from(mac, 'hex'));
    },
  };
}
