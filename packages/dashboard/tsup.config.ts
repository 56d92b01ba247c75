import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.base.ts'

// `shims`: the CommonJS build gets `import.meta.url`, which finds the page's files (page/, beside dist/).
export default defineConfig({ ...packageBuild, shims: true })
