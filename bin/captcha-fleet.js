#!/usr/bin/env node
// Shim so `npx captcha-fleet` works without a build step: register tsx's ESM loader, then run
// the TypeScript entry point.
import { register } from 'tsx/esm/api';

register();
await import('./captcha-fleet.ts');
