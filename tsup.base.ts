/**
 * @module The one build recipe every sluice package uses: ESM + CJS + types from `src/index.ts`.
 */
import type { Options } from 'tsup'

export const packageBuild: Options = {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: { compilerOptions: { composite: false, incremental: false } },
  clean: true,
  sourcemap: true,
  target: 'node20',
  splitting: false,
  treeshake: true,
}
