/**
 * @module A snapshot of the sluice packages' builds, taken by main.mjs when a run starts, so a rebuild
 * during a long run cannot change or break what is measured. lib/sluice.mjs loads the packages from it.
 */
import { cpSync, existsSync, mkdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const PACKAGES = ['core', 'redis', 'express', 'fastify', 'metrics']
const root = fileURLToPath(new URL('../../', import.meta.url))
export const defaultDir = fileURLToPath(new URL('../.snapshot/', import.meta.url))

/** Copies each package's package.json and dist/ into `<dir>/node_modules/@sluice/`, with fastify-plugin beside them. */
export function snapshot(dir = defaultDir) {
  rmSync(dir, { recursive: true, force: true })
  for (const name of PACKAGES) {
    const from = join(root, 'packages', name)
    const to = join(dir, 'node_modules', '@sluice', name)
    if (!existsSync(join(from, 'dist', 'index.js')))
      throw new Error(`packages/${name} is not built: run pnpm build`)
    mkdirSync(to, { recursive: true })
    cpSync(join(from, 'package.json'), join(to, 'package.json'))
    cpSync(join(from, 'dist'), join(to, 'dist'), { recursive: true })
  }
  const plugin = dirname(
    createRequire(join(root, 'packages', 'fastify', 'package.json')).resolve('fastify-plugin/package.json'),
  )
  symlinkSync(plugin, join(dir, 'node_modules', 'fastify-plugin'), 'dir')
  // @sluice/metrics loads its optional peer from beside itself.
  const otel = realpathSync(join(root, 'packages', 'metrics', 'node_modules', '@opentelemetry', 'api'))
  mkdirSync(join(dir, 'node_modules', '@opentelemetry'), { recursive: true })
  symlinkSync(otel, join(dir, 'node_modules', '@opentelemetry', 'api'), 'dir')
  return dir
}
