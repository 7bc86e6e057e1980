// Benchmark provider (benches/bench/annotations.py, benchmark 7): 5,000 annotations on a
// document, spread over its lines. With a 5,000-line document most lines get
// one annotation, every 100th line three and every 100th+50 two (so 150 lines
// get none). Plain ESM, no imports, as an OpenCtx provider module.
//
// Settings (optional): { count = 5000 }.

const TOPICS = ['Issue', 'Doc', 'Trace', 'Owner', 'Flag']

function linesFor(count, nLines) {
    // Annotation k -> its line (0-based), ascending.
    const out = []
    let line = 0
    while (out.length < count) {
        const l = line % nLines
        const per = l % 100 === 0 ? 3 : l % 100 === 50 ? 2 : 1
        for (let j = 0; j < per && out.length < count; j++) out.push(l)
        line++
    }
    return out
}

export default {
    meta() {
        // No selectors: every document.
        return { name: 'bench-many', annotations: {} }
    },

    annotations(params, settings) {
        const count = Number(settings?.count ?? 5000)
        const nLines = Math.max(1, params.content.split('\n').length)
        return linesFor(count, nLines).map((line, k) => {
            const topic = TOPICS[k % TOPICS.length]
            return {
                uri: params.uri,
                range: { start: { line, character: 0 }, end: { line, character: 8 } },
                item: {
                    title: `${topic} #${1000 + k}: benchmark annotation ${k}`,
                    url: `https://example.com/${topic.toLowerCase()}/${1000 + k}`,
                    ui: { hover: { text: `Annotation ${k} on line ${line + 1}` } },
                },
            }
        })
    },
}
