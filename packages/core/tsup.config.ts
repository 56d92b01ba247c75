import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.base.ts'

/**
 * Three entry points (the user's, the HTTP kit's, the store author's) over shared chunks, so a class or a
 * registry is one object whichever entry imported it.
 */
export default defineConfig({
  ...packageBuild,
  entry: { index: 'src/index.ts', http: 'src/http/index.ts', store: 'src/store/index.ts' },
  splitting: true,
})
