// amp.nvim-rs: Neovim's diagnostics for the Amp agent.
//
// The Amp CLI asks an editor for diagnostics (`getDiagnostics`) only when it
// is a JetBrains IDE. This plugin gives the agent a `neovim_diagnostics`
// tool that asks the Neovim running amp.nvim-rs for them: it finds that
// Neovim's lockfile (as the CLI does), opens its own WebSocket with the
// lockfile's token, sends one `getDiagnostics` request and closes.
//
// Installed by `:Amp cli-plugin install` into ~/.config/amp/plugins/
// ($XDG_CONFIG_HOME/amp/plugins/); see `:help amp-cli-plugin`.
import { readdir, readFile } from 'node:fs/promises'
import { homedir } from 'node:os'
import { isAbsolute, join, resolve, sep } from 'node:path'

import type { PluginAPI } from '@ampcode/plugin'

export const description = "Lets the agent read Neovim's diagnostics (LSP errors and warnings) through amp.nvim-rs"

/** How long one request may take (the CLI's own IDE requests wait as long). */
const TIMEOUT_MS = 2000

type Lock = { port: number; authToken: string; pid: number; workspaceFolders: string[]; ideName: string }
type Range = { startLine: number; startCharacter: number; endLine: number; endCharacter: number }
type Diagnostic = { range: Range; severity: string; description: string; lineContent?: string }
type Entry = { uri: string; diagnostics: Diagnostic[] }

/** Where editors write lockfiles: the directory amp.nvim-rs and the CLI use. */
export function lockDir(env: NodeJS.ProcessEnv = process.env): string {
	const base =
		env.AMP_DATA_HOME ||
		(env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME) ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share'))
	return join(base, 'amp', 'ide')
}

function alive(pid: number): boolean {
	try {
		process.kill(pid, 0)
		return true
	} catch (e) {
		return (e as { code?: string }).code === 'EPERM'
	}
}

function withSep(p: string): string {
	const r = resolve(p)
	return r.endsWith(sep) ? r : r + sep
}

function isLock(v: unknown): v is Lock {
	const l = v as Partial<Lock> | null
	return (
		!!l &&
		typeof l.port === 'number' &&
		typeof l.authToken === 'string' &&
		typeof l.pid === 'number' &&
		Array.isArray(l.workspaceFolders) &&
		typeof l.ideName === 'string' &&
		/nvim|neovim/i.test(l.ideName)
	)
}

/**
 * The live Neovim whose workspace folder holds `path` (or lies inside it),
 * the deepest folder first.
 */
export async function findNeovim(path: string, dir = lockDir()): Promise<Lock | undefined> {
	let names: string[]
	try {
		names = await readdir(dir)
	} catch {
		return undefined
	}
	const want = withSep(path)
	let best: { lock: Lock; depth: number } | undefined
	for (const name of names.filter((n) => n.endsWith('.json'))) {
		let lock: unknown
		try {
			lock = JSON.parse(await readFile(join(dir, name), 'utf8'))
		} catch {
			continue
		}
		if (!isLock(lock) || !alive(lock.pid)) continue
		for (const folder of lock.workspaceFolders) {
			const f = withSep(folder)
			if (want.startsWith(f) || f.startsWith(want)) {
				if (!best || f.length > best.depth) best = { lock, depth: f.length }
			}
		}
	}
	return best?.lock
}

/** One `getDiagnostics` request over a connection of its own. */
export function requestDiagnostics(lock: Lock, path: string): Promise<Entry[]> {
	return new Promise((done, fail) => {
		const ws = new WebSocket(`ws://127.0.0.1:${lock.port}/?auth=${encodeURIComponent(lock.authToken)}`)
		const id = `amp-nvim-rs-${Date.now()}`
		const timer = setTimeout(() => {
			ws.close()
			fail(new Error(`Neovim did not answer within ${TIMEOUT_MS} ms`))
		}, TIMEOUT_MS)
		ws.addEventListener('open', () => {
			ws.send(JSON.stringify({ clientRequest: { id, getDiagnostics: { path } } }))
		})
		ws.addEventListener('message', (ev) => {
			let msg: { serverResponse?: { id?: string; error?: { message?: string }; getDiagnostics?: { entries?: Entry[] } } }
			try {
				msg = JSON.parse(String(ev.data))
			} catch {
				return
			}
			const r = msg.serverResponse
			if (!r || r.id !== id) return // a notification (selection, visible files)
			clearTimeout(timer)
			ws.close()
			if (r.error) fail(new Error(r.error.message ?? 'getDiagnostics failed'))
			else done(r.getDiagnostics?.entries ?? [])
		})
		ws.addEventListener('error', () => {
			clearTimeout(timer)
			fail(new Error(`cannot connect to Neovim on port ${lock.port}`))
		})
		ws.addEventListener('close', (ev) => {
			clearTimeout(timer)
			if (ev.code === 1000 && ev.reason === 'Authentication failed') {
				fail(new Error('Neovim refused the token: its lockfile changed; try again'))
			}
		})
	})
}

const ORDER: Record<string, number> = { error: 0, warning: 1, info: 2, hint: 3 }

function filePath(uri: string): string {
	try {
		return decodeURIComponent(new URL(uri).pathname)
	} catch {
		return uri
	}
}

/** `path:line:col: severity: message` lines (1-based), errors first. */
export function formatDiagnostics(entries: Entry[]): string {
	const lines = entries
		.flatMap((e) => e.diagnostics.map((d) => ({ path: filePath(e.uri), d })))
		.sort((a, b) => (ORDER[a.d.severity] ?? 4) - (ORDER[b.d.severity] ?? 4) || a.path.localeCompare(b.path))
		.map(
			({ path, d }) =>
				`${path}:${d.range.startLine + 1}:${d.range.startCharacter + 1}: ${d.severity}: ${d.description}`,
		)
	return lines.length === 0 ? 'No diagnostics.' : lines.join('\n')
}

/** What the tool returns for `path`. */
export async function neovimDiagnostics(path: string): Promise<string> {
	if (!path || !isAbsolute(path)) throw new Error('path must be an absolute file or directory path')
	const lock = await findNeovim(path)
	if (!lock) {
		return `No Neovim running amp.nvim-rs has ${path} in its workspace (start the server there with :Amp start).`
	}
	return formatDiagnostics(await requestDiagnostics(lock, path))
}

export default function (amp: PluginAPI) {
	amp.registerTool({
		name: 'neovim_diagnostics',
		title: 'Neovim diagnostics',
		description:
			"Get the diagnostics (LSP errors, warnings, hints) Neovim shows for an absolute file or directory path, including unsaved buffers. Use it to check code for errors after editing, or when the user asks about errors or warnings in their editor.",
		inputSchema: {
			type: 'object',
			properties: {
				path: { type: 'string', description: 'Absolute path of a file or directory' },
			},
			required: ['path'],
		},
		async execute(input) {
			return neovimDiagnostics(typeof input.path === 'string' ? input.path : '')
		},
	})
}
