#!/usr/bin/env node
/* global process, console, URL */
// The `nova-gateway` CLI (npx nova-gateway …): runs the compiled CLI from dist/, which
// `npm run build` (or `npm start`) produces in a checkout.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/cli/bin.js', import.meta.url);
if (!existsSync(entry)) {
  console.error('nova-gateway: the CLI is not built yet: run `npm run build` in the nova-gateway checkout');
  process.exit(2);
}
await import(entry.href);
