/**
 * @module The sluice packages the bench measures, loaded from the snapshot main.mjs takes when the run
 * starts (lib/snapshot.mjs), so a rebuild during a long run cannot change or break what is measured.
 * `SLUICE_BENCH_SNAPSHOT` names another snapshot directory (to compare two builds side by side); with no
 * snapshot the workspace packages are loaded as they are.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { defaultDir } from './snapshot.mjs'

const dir = process.env.SLUICE_BENCH_SNAPSHOT ?? defaultDir

/** The module of `@sluice/<name>` (core, redis, express, fastify). */
export function sluice(name) {
  const file = join(dir, 'node_modules', '@sluice', name, 'dist', 'index.js')
  return existsSync(file) ? import(pathToFileURL(file).href) : import(`@sluice/${name}`)
}
