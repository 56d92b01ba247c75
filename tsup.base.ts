/**
 * @module The one build recipe every sluice package uses: ESM + CJS + types from `src/index.ts`.
 */
import type { Options } from 'tsup'

/** Declarations import other sluice packages by name, from their builds, as users will; not from sources. */
export const declarationCompilerOptions = { composite: false, incremental: false, paths: {} }

export const packageBuild: Options = {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: { compilerOptions: declarationCompilerOptions },
  clean: true,
  sourcemap: true,
  target: 'node22',
  splitting: false,
  treeshake: true,
}
