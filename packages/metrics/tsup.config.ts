import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.base.ts'

// `shims`: the CommonJS build gets `import.meta.url`, which loads the optional peers (see src/shared.ts).
export default defineConfig({ ...packageBuild, shims: true })
