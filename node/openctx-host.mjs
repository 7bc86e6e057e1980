// OpenCtx host for amp.nvim-rs: runs OpenCtx provider modules (JS) for the
// native client. One long-lived process; Node 20+, no dependencies.
//
// Protocol: newline-delimited JSON on stdin/stdout.
//   request:  {"id": 1, "module": "file:///abs/p.mjs" | "/abs/p.mjs", "method": "annotations",
//              "params": {...}, "settings": {...}}
//   response: {"id": 1, "result": ...} | {"id": 1, "error": {"message": "...", "code"?: n, "kind"?: k}}
//             kind: "import" (the module failed to import or has no provider),
//                   "threw" (the provider's method threw or rejected)
//   load:     {"id": 3, "module": "...", "load": true} -> {"id": 3, "result": true} once imported
//   liveness: {"id": 2, "ping": true} -> {"id": 2, "result": "pong"}, answered at once: no
//             answer means a provider is blocking the event loop (the client restarts us).
//
// Each module is imported once and cached; its provider is `default` (or
// `default.default` when a bundle nests it). Calls run concurrently: a call that
// never settles does not hold up the others. Nothing but responses is written to
// stdout: console output and direct process.stdout writes go to stderr. The host
// exits when stdin closes (after the calls in flight, 2 s at most).

import { Console } from 'node:console'
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'
import { isAbsolute } from 'node:path'

// Keep the real stdout for responses, and send everything else to stderr.
const stdout = process.stdout
const writeResponse = stdout.write.bind(stdout)
const toStderr = (chunk, encoding, callback) => process.stderr.write(chunk, encoding, callback)
stdout.write = toStderr
globalThis.console = new Console({ stdout: process.stderr, stderr: process.stderr })

const log = (...args) => console.error('[openctx-host]', ...args)

stdout.on('error', err => {
    // The client went away: nothing left to do.
    if (err && err.code === 'EPIPE') process.exit(0)
    log('stdout error:', err)
})

// A provider's stray timer or unawaited promise must not take the host down.
process.on('uncaughtException', err => log('uncaught exception:', err))
process.on('unhandledRejection', err => log('unhandled rejection:', err))

/** module reference → Promise<provider> */
const providers = new Map()

function moduleURL(ref) {
    if (typeof ref !== 'string' || ref === '') throw new Error('request has no module')
    if (isAbsolute(ref)) return pathToFileURL(ref).href
    if (/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(ref)) return ref
    throw new Error(`module must be a file: URL or an absolute path: ${ref}`)
}

function providerOf(mod, url) {
    let p = mod && mod.default
    // Bundles compiled from CommonJS/TS sometimes nest the provider.
    if (p && (typeof p === 'object' || typeof p === 'function') && p.default && typeof p.meta !== 'function') {
        p = p.default
    }
    if (!p || (typeof p !== 'object' && typeof p !== 'function')) {
        throw new Error(`module ${url} has no default export (the provider object)`)
    }
    return p
}

function loadProvider(ref) {
    const url = moduleURL(ref)
    let loading = providers.get(url)
    if (!loading) {
        loading = import(url).then(mod => providerOf(mod, url))
        providers.set(url, loading)
        // A failed import is retried on the next call (the file may be fixed).
        loading.catch(() => {
            if (providers.get(url) === loading) providers.delete(url)
        })
    }
    return loading
}

const LIST_METHODS = new Set(['annotations', 'mentions', 'items'])

/** An error of one stage of a call: `kind` is "import" (the module could not be
 * imported, or has no provider) or "threw" (the provider's method threw or rejected). */
class StageError {
    constructor(kind, cause) {
        this.kind = kind
        this.cause = cause
    }
}

async function load(ref) {
    try {
        return await loadProvider(ref)
    } catch (err) {
        throw new StageError('import', err)
    }
}

async function run(request) {
    const provider = await load(request.module)
    // `{"load": true}`: import the module only (the client's start-up step).
    if (request.load === true) return true
    const method = request.method
    if (typeof method !== 'string' || method === '') throw new Error('request has no method')
    const fn = provider[method]
    if (typeof fn !== 'function') {
        if (LIST_METHODS.has(method)) return []
        throw new Error(`provider has no method ${method}`)
    }
    let result
    try {
        result = await fn.call(provider, request.params ?? {}, request.settings ?? {})
    } catch (err) {
        throw new StageError('threw', err)
    }
    return result === undefined ? null : result
}

function send(message) {
    let line
    try {
        line = JSON.stringify(message)
    } catch (err) {
        line = JSON.stringify({
            id: message.id,
            error: { message: `result is not serializable as JSON: ${err && err.message ? err.message : err}` },
        })
    }
    writeResponse(line + '\n')
}

function errorOf(err) {
    if (err instanceof StageError) return { ...errorOf(err.cause), kind: err.kind }
    const error = {
        message:
            err instanceof Error
                ? err.message || String(err)
                : typeof err === 'string'
                  ? err
                  : (() => {
                        try {
                            return JSON.stringify(err) ?? String(err)
                        } catch {
                            return String(err)
                        }
                    })(),
    }
    if (err && typeof err === 'object' && Number.isInteger(err.code)) error.code = err.code
    return error
}

function handle(line) {
    if (line.trim() === '') return
    let request
    try {
        request = JSON.parse(line)
    } catch (err) {
        log('ignoring a line that is not JSON:', line.slice(0, 200))
        return
    }
    const id = request && request.id
    if (id === undefined || id === null) {
        log('ignoring a request without id')
        return
    }
    if (request.ping === true) {
        send({ id, result: 'pong' })
        return
    }
    inflight++
    run(request)
        .then(
            result => send({ id, result }),
            err => send({ id, error: errorOf(err) }),
        )
        .finally(() => {
            inflight--
            if (closing && inflight === 0) process.exit(0)
        })
}

// stdin closed: the client is done. Finish what is running (briefly), then exit.
let inflight = 0
let closing = false
const input = createInterface({ input: process.stdin, crlfDelay: Infinity })
input.on('line', handle)
input.on('close', () => {
    closing = true
    if (inflight === 0) process.exit(0)
    setTimeout(() => process.exit(0), 2000)
})
