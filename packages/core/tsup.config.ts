import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.base.ts'

/**
 * Four entry points (the user's, the HTTP kit's, the option checks of sluice's packages, the store author's)
 * over shared chunks, so a class or a registry is one object whichever entry imported it.
 */
export default defineConfig({
  ...packageBuild,
  entry: {
    index: 'src/index.ts',
    http: 'src/http/index.ts',
    options: 'src/options.ts',
    store: 'src/store/index.ts',
  },
  splitting: true,
})
