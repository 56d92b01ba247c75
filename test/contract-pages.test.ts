/**
 * The contract's pages (docs/design/) are where code comments and tests look for what sluice promises:
 * nothing in the repository may cite a contract kept outside it, every page is reached from the index,
 * and every link between the pages, anchors included, leads somewhere.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('..', import.meta.url))
const design = join(root, 'docs', 'design')

/** The design document of the project's early waves, which the repository never held (spelled apart here). */
const OUTSIDE = ['DESIGN', 'md'].join('.')

/** Every .md file under `dir`, as absolute paths. */
function pagesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return pagesUnder(path)
    return name.endsWith('.md') ? [path] : []
  })
}

/** The relative links of a markdown page: `[text](target)`, web addresses left out. */
function linksOf(text: string): string[] {
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((target) => !/^[a-z]+:/.test(target))
}

/** The anchors of a page's headings, as GitHub makes them: lower case, punctuation dropped, spaces to `-`. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>()
  for (const [, heading] of text.matchAll(/^#{1,6} (.+)$/gm)) {
    anchors.add(
      heading!
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    )
  }
  return anchors
}

describe('the contract in the repository', () => {
  it(`no tracked file cites ${OUTSIDE}: comments and tests cite docs/design/`, () => {
    const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' })
      .split('\0')
      .filter((file) => file !== '' && existsSync(join(root, file)))
    const citing = files.filter((file) => readFileSync(join(root, file), 'latin1').includes(OUTSIDE))
    expect(citing).toEqual([])
  })

  it('reaches every page of docs/design/ from its index, and every link between them leads somewhere', () => {
    const pages = pagesUnder(design)
    const reached = new Set<string>()
    const broken: string[] = []
    const queue = [join(design, 'README.md')]
    while (queue.length > 0) {
      const page = queue.pop()!
      if (reached.has(page)) continue
      reached.add(page)
      for (const link of linksOf(readFileSync(page, 'utf8'))) {
        const [path, anchor] = link.split('#') as [string, string | undefined]
        const target = path === '' ? page : resolve(dirname(page), path)
        const where = `${relative(root, page)} -> ${link}`
        if (!existsSync(target)) {
          broken.push(where)
          continue
        }
        const file = statSync(target).isDirectory() ? join(target, 'README.md') : target
        if (anchor !== undefined && !anchorsOf(readFileSync(file, 'utf8')).has(anchor)) broken.push(where)
        if (file.startsWith(design) && file.endsWith('.md')) queue.push(file)
      }
    }
    expect(broken).toEqual([])
    expect(pages.filter((page) => !reached.has(page)).map((page) => relative(root, page))).toEqual([])
  })
})
