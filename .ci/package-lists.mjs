/**
 * The lists that name every package by hand, checked against packages/: a package added to the workspace
 * but missing from one of them fails here, naming the list and the package. What can be read at load time
 * is not listed (vitest.config.ts derives its aliases from each package.json `exports`). Each package is
 * read from packages/NAME/package.json: its name, and its entry points (`exports`), whose source is
 * src/index.ts for `.` and src/SUB/index.ts or else src/SUB.ts for `./SUB`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const read = (path) => readFileSync(`${root}${path}`, 'utf8')
const json = (path) => JSON.parse(read(path))

/** The source file of a package's entry point `subpath` (`.` or `./SUB`), relative to the repository. */
function sourceOf(dir, subpath) {
  if (subpath === '.') return `packages/${dir}/src/index.ts`
  const sub = subpath.slice(2)
  const folder = `packages/${dir}/src/${sub}/index.ts`
  return existsSync(`${root}${folder}`) ? folder : `packages/${dir}/src/${sub}.ts`
}

const packages = readdirSync(`${root}packages`)
  .filter((dir) => existsSync(`${root}packages/${dir}/package.json`))
  .map((dir) => {
    const manifest = json(`packages/${dir}/package.json`)
    const entries = Object.keys(manifest.exports ?? {}).filter((subpath) => subpath !== './package.json')
    return { dir, name: manifest.name, entries }
  })

const missing = []
const miss = (list, pkg, what) => missing.push(`${list}: misses ${what} (${pkg.name})`)

const references = (path) => new Set(json(path).references.map((reference) => reference.path))
const solution = references('tsconfig.json')
const tests = json('tsconfig.tests.json')
const testReferences = new Set(tests.references.map((reference) => reference.path))
const typedoc = new Set(json('typedoc.json').entryPoints)
const basePaths = json('tsconfig.base.json').compilerOptions.paths
const docsPaths = json('docs/typedoc.tsconfig.json').compilerOptions.paths
const readme = read('README.md')

for (const pkg of packages) {
  const at = `packages/${pkg.dir}`
  if (!solution.has(at)) miss('tsconfig.json references', pkg, at)
  // A package whose tests build with a tsconfig of their own (excluded from tsconfig.tests.json) is
  // referenced by tsconfig.json through that folder instead.
  const ownTests = (tests.exclude ?? []).includes(`${at}/test`)
  if (ownTests ? !solution.has(`${at}/test`) : !testReferences.has(at)) {
    miss(
      ownTests ? 'tsconfig.json references' : 'tsconfig.tests.json references',
      pkg,
      ownTests ? `${at}/test` : at,
    )
  }
  if (!readme.includes(`| \`${pkg.name}\``)) miss("README.md's package table", pkg, 'its row')
  for (const subpath of pkg.entries) {
    const source = sourceOf(pkg.dir, subpath)
    if (!typedoc.has(source)) miss('typedoc.json entryPoints', pkg, source)
    if (subpath === '.') continue
    const id = `${pkg.name}/${subpath.slice(2)}`
    if (basePaths[id] === undefined) miss('tsconfig.base.json paths', pkg, id)
    if (docsPaths[id] === undefined) miss('docs/typedoc.tsconfig.json paths', pkg, id)
  }
}

if (missing.length > 0) {
  console.error(`Lists that miss a package (add it, or the package is not built, typechecked or documented):`)
  for (const line of missing) console.error(`  ${line}`)
  process.exit(1)
}
console.log(`Every list names all ${packages.length} packages.`)
