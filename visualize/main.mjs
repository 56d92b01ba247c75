/**
 * `pnpm visualize`: compiles the visualiser (and the core source it runs) with the workspace's `tsc`
 * into node_modules/.cache, then writes one SVG per trace into docs/visualize/.
 * Node 22 (the oldest line sluice supports) runs TypeScript only from 22.18, and no Node typechecks it:
 * compiling keeps the visualiser typed on every supported Node, without a runner.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))
const outDir = `${root}node_modules/.cache/sluice-visualize/`
const docs = `${root}docs/visualize/`

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
execFileSync(process.execPath, [tsc, '-p', `${root}visualize/tsconfig.json`], { stdio: 'inherit' })
// Files under node_modules/ default to CommonJS; the compiled modules are ESM.
writeFileSync(`${outDir}package.json`, '{ "type": "module" }\n')

const { pictures } = await import(pathToFileURL(`${outDir}visualize/pictures.js`).href)
mkdirSync(docs, { recursive: true })
for (const { file, svg } of await pictures()) {
  writeFileSync(`${docs}${file}`, svg)
  console.log(`wrote docs/visualize/${file}`)
}
