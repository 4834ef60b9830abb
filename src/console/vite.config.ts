import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Built into dist/console, which the gateway serves at /console/ (docs/console.md).
const here = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root: here,
  base: '/console/',
  plugins: [react()],
  // `npm run console:dev`: the page from Vite, its API calls to a running gateway (same origin for the cookie).
  server: {
    proxy: Object.fromEntries(['/console/session', '/admin', '/v1'].map((path) => [path, process.env.NOVA_GATEWAY_URL ?? 'http://127.0.0.1:8080'])),
  },
  build: {
    outDir: fileURLToPath(new URL('../../dist/console', import.meta.url)),
    emptyOutDir: true,
    // The CSP allows no inline script or style: every asset is a file, never a data: URL in the HTML.
    assetsInlineLimit: 0,
    // React, React DOM and Recharts in one file: about 700 kB, 200 kB gzipped; fine for an operator console.
    chunkSizeWarningLimit: 1000,
  },
});
