import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.base.ts'

// The library entry (spec parsing, for scripts and other tools) as every package builds it, and the
// `sluice` command as one ESM file that keeps its shebang.
export default defineConfig([
  packageBuild,
  {
    entry: ['src/main.ts'],
    format: ['esm'],
    dts: false,
    clean: false,
    sourcemap: true,
    target: 'node20',
    splitting: false,
  },
])
