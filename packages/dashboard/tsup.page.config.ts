import { cpSync } from 'node:fs'
import { defineConfig } from 'tsup'

/**
 * The page's rule grammar, core's own (page/grammar.ts re-exports `parseRuleSpecs` and `formatRuleSpec`
 * from `@sluice/core`), bundled into one ES module for the browser: dist/page/grammar.js, which the
 * handler serves as assets/grammar.js. Node's built-ins stay outside, marked free of side effects, so
 * that the imports of them the grammar never uses (a concurrency lease's `randomUUID`) fall away; a test
 * checks that the served file imports nothing. The page's own files (HTML, CSS, the icon, its modules) are
 * copied beside it, so the package ships dist/ alone.
 */
export default defineConfig({
  entry: { 'page/grammar': 'page/grammar.ts' },
  format: ['esm'],
  platform: 'browser',
  target: 'es2022',
  outDir: 'dist',
  outExtension: () => ({ js: '.js' }),
  noExternal: [/.*/],
  removeNodeProtocol: false,
  dts: false,
  clean: false,
  sourcemap: false,
  splitting: false,
  treeshake: true,
  onSuccess: async () => {
    cpSync('page', 'dist/page', { recursive: true, filter: (path) => !/\.(ts|json)$/.test(path) })
  },
  esbuildPlugins: [
    {
      name: 'node-built-ins-unused',
      setup(build) {
        build.onResolve({ filter: /^node:/ }, ({ path }) => ({ path, external: true, sideEffects: false }))
      },
    },
  ],
})
