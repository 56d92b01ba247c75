import { defineConfig } from 'tsup'

// The package is the `sluice` command only: one ESM file that keeps its shebang.
export default defineConfig({
  entry: ['src/main.ts'],
  format: ['esm'],
  dts: false,
  clean: true,
  sourcemap: true,
  target: 'node22',
  splitting: false,
})
