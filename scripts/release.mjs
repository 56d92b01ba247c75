/**
 * @module `pnpm release`: builds what is stale, packs every public package under packages/ (pnpm turns each
 * `workspace:` range into the version it points at), checks each tarball as npm users will get it, and only
 * when every tarball passes publishes them with the npm client, in dependency order, to one registry.
 *
 *   pnpm release [--registry URL] [--tag TAG] [--provenance] [--dry-run]
 *
 * The registry is `--registry`, else $SLUICE_REGISTRY, else npm's public registry: the same command publishes
 * to a local Verdaccio (the registry test, `bash dev.sh registry`). A version the registry already has is
 * skipped, so a release that stopped half way can be run again. `--provenance` is for the release workflow,
 * where npm signs where each package was built. `--dry-run` packs and checks, and publishes nothing.
 * Versions and changelogs are written before, by `pnpm changeset version`.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core'
import { publint } from 'publint'
import { formatMessage } from 'publint/utils'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const PUBLIC_REGISTRY = 'https://registry.npmjs.org/'

/** What a tarball may hold besides dist/: npm adds package.json, README, LICENSE and CHANGELOG itself. */
const TOP_LEVEL = ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']
/** The fields npm shows and users follow from a package's page. */
const METADATA = ['repository', 'homepage', 'bugs', 'license', 'keywords', 'engines']

/** Every package under packages/ that is published, as its manifest says. */
function publicPackages() {
  return readdirSync(join(ROOT, 'packages'))
    .map((folder) => join(ROOT, 'packages', folder))
    .filter((dir) => existsSync(join(dir, 'package.json')))
    .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }))
    .filter(({ manifest }) => manifest.private !== true)
}

/** `packages` ordered so that each comes after every sluice package it depends on (by name among equals). */
function dependencyOrder(packages) {
  const byName = new Map(packages.map((p) => [p.manifest.name, p]))
  const internal = (p) =>
    Object.keys({
      ...p.manifest.dependencies,
      ...p.manifest.peerDependencies,
      ...p.manifest.optionalDependencies,
    }).filter((name) => byName.has(name))
  const ordered = []
  const state = new Map()
  const visit = (p, path) => {
    if (state.get(p) === 'done') return
    if (state.get(p) === 'visiting') {
      throw new Error(`Packages depend on each other in a cycle: ${[...path, p.manifest.name].join(' -> ')}`)
    }
    state.set(p, 'visiting')
    for (const name of internal(p).sort()) visit(byName.get(name), [...path, p.manifest.name])
    state.set(p, 'done')
    ordered.push(p)
  }
  for (const p of [...packages].sort((a, b) => a.manifest.name.localeCompare(b.manifest.name))) visit(p, [])
  return ordered
}

/** Everything wrong with one packed tarball, as lines naming the package; empty when it is fit to publish. */
async function checkTarball(tarball, name) {
  const problems = []
  const entries = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' })
    .split('\n')
    .filter((entry) => entry !== '' && !entry.endsWith('/'))
    .map((entry) => entry.replace(/^package\//, ''))
  for (const entry of entries) {
    if (!entry.startsWith('dist/') && !TOP_LEVEL.includes(entry)) problems.push(`ships ${entry}`)
  }
  for (const needed of TOP_LEVEL) if (!entries.includes(needed)) problems.push(`has no ${needed}`)
  if (!entries.some((entry) => entry.startsWith('dist/'))) problems.push('has no dist/ (not built?)')
  const read = (file) => execFileSync('tar', ['-xOzf', tarball, `package/${file}`], { encoding: 'utf8' })
  const packedManifest = read('package.json')
  const manifest = JSON.parse(packedManifest)
  if (packedManifest.includes('workspace:')) problems.push('still has a workspace: range')
  for (const field of METADATA) {
    const value = manifest[field]
    if (value === undefined || (Array.isArray(value) && value.length === 0)) problems.push(`has no ${field}`)
  }
  if (entries.includes('README.md')) {
    const install = /^# [^\n]+\n+```sh\n([^\n]*)/.exec(read('README.md'))?.[1] ?? ''
    if (!install.startsWith(`npm install ${name}`)) {
      problems.push(`README.md does not start with its install line (\`npm install ${name} …\`)`)
    }
  }
  const data = readFileSync(tarball)
  // --strict: a publint warning fails as an error does; a suggestion does not.
  const linted = await publint({ pack: { tarball: new Uint8Array(data).buffer }, strict: true })
  for (const message of linted.messages) {
    if (message.type !== 'suggestion') problems.push(`publint: ${formatMessage(message, linted.pkg)}`)
  }
  // A package with a library entry must type it for every resolution but node10's (the node16 profile);
  // a command alone (no "." export) has no types to check.
  if (manifest.exports?.['.'] !== undefined) {
    const analysis = await checkPackage(createPackageFromTarballData(new Uint8Array(data)))
    if (analysis.types === false) problems.push('attw: no types')
    else {
      for (const problem of analysis.problems) {
        if (!('resolutionKind' in problem) || problem.resolutionKind !== 'node10') {
          problems.push(`attw: ${JSON.stringify(problem)}`)
        }
      }
    }
  }
  return problems.map((problem) => `${name}: ${problem}`)
}

/** Packs each package into `into`; answers its tarball's path beside the package. */
function pack(packages, into) {
  return packages.map((p) => {
    const before = new Set(readdirSync(into))
    execFileSync('pnpm', ['pack', '--pack-destination', into], { cwd: p.dir, stdio: 'ignore' })
    const made = readdirSync(into).filter((file) => !before.has(file))
    if (made.length !== 1) throw new Error(`pnpm pack of ${p.manifest.name} made ${made.length} files`)
    return { ...p, tarball: join(into, made[0]) }
  })
}

/** npm's flags for `registry`: the scope's own setting too, which would otherwise win over `--registry`. */
function registryArgs(registry) {
  return ['--registry', registry, `--@sluice:registry=${registry}`]
}

/** Whether `registry` already has this version of the package. */
function published(name, version, registry) {
  try {
    const out = execFileSync('npm', ['view', `${name}@${version}`, 'version', ...registryArgs(registry)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
    return out.trim() === version
  } catch {
    return false
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      registry: { type: 'string' },
      tag: { type: 'string', default: 'latest' },
      provenance: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
    },
  })
  const registry = values.registry ?? process.env.SLUICE_REGISTRY ?? PUBLIC_REGISTRY

  execFileSync('bash', ['dev.sh', 'build'], { cwd: ROOT, stdio: 'inherit' })
  const scratch = mkdtempSync(join(tmpdir(), 'sluice-release-'))
  try {
    const packed = pack(dependencyOrder(publicPackages()), scratch)
    const problems = []
    for (const p of packed) problems.push(...(await checkTarball(p.tarball, p.manifest.name)))
    if (problems.length > 0) {
      console.error(`Not published: ${problems.length} problem(s) in the packed tarballs.`)
      for (const problem of problems) console.error(`  ${problem}`)
      process.exitCode = 1
      return
    }
    console.log(`Checked ${packed.length} tarballs (files, metadata, install line, publint, attw).`)
    for (const p of packed) {
      const id = `${p.manifest.name}@${p.manifest.version}`
      const size = `${(statSync(p.tarball).size / 1024).toFixed(1)} kB`
      if (values['dry-run']) {
        console.log(`would publish ${id} (${size})`)
      } else if (published(p.manifest.name, p.manifest.version, registry)) {
        console.log(`${id} is already on ${registry}`)
      } else {
        const args = [
          'publish',
          p.tarball,
          ...registryArgs(registry),
          '--tag',
          values.tag,
          '--access',
          'public',
        ]
        args.push('--loglevel', 'warn')
        if (values.provenance) args.push('--provenance')
        execFileSync('npm', args, { stdio: ['ignore', 'ignore', 'inherit'] })
        console.log(`published ${id} (${size}) to ${registry}`)
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

await main()
