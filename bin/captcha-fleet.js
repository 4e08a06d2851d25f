#!/usr/bin/env node
// The `captcha-fleet` command. The installed package runs its compiled CLI (dist/); a checkout,
// which has the TypeScript source beside this file, runs that source through tsx (a development
// dependency), so what runs there is always the code as edited.
import { existsSync } from 'node:fs';

const source = new URL('./captcha-fleet.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import('../dist/bin/captcha-fleet.js');
}
