//! OpenCtx annotations in the buffer: virtual text at the end of the
//! annotated line, in the plugin's own namespace, several on one line shown
//! together. Also the main-thread ends of OpenCtx requests.
//!
//! Drawn lazily, the way `vim.lsp.inlay_hint` draws: an answer is only
//! stored (per buffer, by line), and a decoration provider draws the lines a
//! window shows when the window is redrawn. Setting one extmark per
//! annotated line took ~2/3 of a 5,000-line render; now a render costs the
//! same for 50 or 5,000 annotated lines, and scrolling draws the rest.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

use super::{api_err, bulk, events, lua, path_from_lua};

/// Buffer variable holding the answer's annotations as JSON text, for
/// `:Amp annotations list`, hover and open (`amp.openctx.annotations()`
/// decodes it). Set whole with each answer: it does not depend on what is
/// drawn yet.
const ANNOTATIONS_VAR: &str = "amp_openctx_annotations";

/// A document to annotate, read on the main thread.
pub struct Document {
    pub bufnr: i32,
    /// The buffer's changedtick: an answer for an older tick is dropped.
    pub generation: u32,
    pub path: PathBuf,
    pub text: String,
}

/// One annotation's place in the buffer (byte column) and its title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub line: usize,
    pub col: usize,
    pub title: String,
}

/// The titles of the annotations on one line (0-based), in the order they
/// are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineTitles {
    pub line: usize,
    pub titles: Vec<String>,
}

/// A buffer's newest answer, drawn line by line as its lines come into view.
#[derive(Debug)]
struct Answer {
    /// The changedtick of the text the answer is for. After an edit its lines
    /// may no longer be where they were, so nothing more is drawn until the
    /// refresh that follows the edit (what is drawn moves with the text).
    tick: u32,
    /// Annotated lines in ascending order. An entry's titles are taken when
    /// its line is drawn: an empty list means "drawn".
    lines: Vec<LineTitles>,
}

impl Answer {
    /// `line_count` is the buffer's: lines past its end go on its last line.
    fn new(tick: u32, mut lines: Vec<LineTitles>, line_count: usize) -> Self {
        lines.retain(|l| !l.titles.is_empty());
        lines.sort_by_key(|l| l.line); // stable: titles keep their order
        let last = line_count.saturating_sub(1);
        if lines.last().is_some_and(|l| l.line > last) {
            // Cannot happen at the answer's changedtick (positions are
            // clamped to its text), but a mark past the end would be an error.
            let from = lines.partition_point(|l| l.line < last);
            let titles = lines.drain(from..).flat_map(|l| l.titles).collect();
            lines.push(LineTitles { line: last, titles });
        }
        Answer { tick, lines }
    }

    /// Takes the titles of the lines in `top..=bottom` not drawn yet.
    fn take_undrawn(&mut self, top: usize, bottom: usize) -> Vec<LineTitles> {
        let from = self.lines.partition_point(|l| l.line < top);
        self.lines[from..]
            .iter_mut()
            .take_while(|l| l.line <= bottom)
            .filter(|l| !l.titles.is_empty())
            .map(|l| LineTitles { line: l.line, titles: std::mem::take(&mut l.titles) })
            .collect()
    }
}

thread_local! {
    static NAMESPACE: Cell<Option<i64>> = const { Cell::new(None) };
    static HIDDEN: Cell<bool> = const { Cell::new(false) };
    /// The newest generation requested per buffer.
    static LATEST: RefCell<HashMap<i32, u32>> = RefCell::new(HashMap::new());
    /// The answer being drawn per buffer.
    static ANSWERS: RefCell<HashMap<i32, Answer>> = RefCell::new(HashMap::new());
}

fn namespace() -> i64 {
    if let Some(ns) = NAMESPACE.get() {
        return ns;
    }
    let ns = lua::api::<_, i64>("nvim_create_namespace", "amp_openctx").unwrap_or(0);
    NAMESPACE.set(Some(ns));
    ns
}

/// The `on_win` of the namespace's decoration provider (set by
/// lua/amp/openctx.lua; `openctx_on_win` in lib.rs returns false to Neovim,
/// so no `on_line` calls, and never raises: Neovim disables a provider that
/// errors). Called as `on_win(_, win, buf, toprow, botrow)` before Neovim
/// redraws a window, it draws the window's lines that are not drawn yet.
/// It runs on every redraw of every window, so a buffer with no answer
/// costs one map lookup.
pub fn on_win(args: &mlua::MultiValue) {
    let int = |i: usize| match args.get(i) {
        Some(mlua::Value::Integer(n)) => Some(*n),
        Some(mlua::Value::Number(n)) => Some(*n as i64),
        _ => None,
    };
    let (Some(buf), Some(top), Some(bottom)) = (int(2), int(3), int(4)) else { return };
    let buf = buf as i32;
    if !ANSWERS.with(|a| a.try_borrow().is_ok_and(|a| a.contains_key(&buf))) {
        return;
    }
    if let Err(e) = draw_lines(buf, top.max(0) as usize, bottom.max(0) as usize) {
        crate::core::log::warn(format!("drawing annotations failed: {e}"));
    }
}

/// Draws the answer's undrawn lines in `top..=bottom`, if the buffer is
/// still at the answer's changedtick.
fn draw_lines(buf: i32, top: usize, bottom: usize) -> mlua::Result<()> {
    let Some(tick) = ANSWERS.with(|a| a.borrow().get(&buf).map(|a| a.tick)) else { return Ok(()) };
    if lua::api::<_, u32>("nvim_buf_get_changedtick", buf)? != tick {
        return Ok(());
    }
    let lines = ANSWERS.with(|a| a.borrow_mut().get_mut(&buf).map(|a| a.take_undrawn(top, bottom)).unwrap_or_default());
    if lines.is_empty() {
        return Ok(());
    }
    lua::helper("draw_annotations", (buf, namespace(), lines_text(&lines)))
}

/// The lines to draw as one text for `draw_annotations` in helpers/annotations.lua:
/// per line, "<row> <number of titles>\n" then each title followed by
/// "\n" (titles have no newline: nvim/openctx.rs replaces them with spaces).
/// One Lua string, not tables: mlua makes every value it creates in a
/// protected call that leaves garbage, which was half the cost of drawing.
fn lines_text(lines: &[LineTitles]) -> String {
    let titles_len: usize = lines.iter().flat_map(|l| &l.titles).map(|t| t.len() + 1).sum();
    let mut text = String::with_capacity(titles_len + 16 * lines.len());
    for l in lines {
        let _ = writeln!(text, "{} {}", l.line, l.titles.len()); // never fails on a String
        for title in &l.titles {
            text.push_str(title);
            text.push('\n');
        }
    }
    text
}

fn clear(buf: i32) {
    let _ = lua::api::<_, ()>("nvim_buf_clear_namespace", (buf, namespace(), 0, -1));
}

/// The buffer's text if it is a file no bigger than `max_bytes`.
pub fn read_document(bufnr: i32, max_bytes: usize) -> Result<Option<Document>, String> {
    let values: mlua::MultiValue = lua::helper("document", (bufnr, max_bytes)).map_err(|e| api_err("document", e))?;
    let mut v = values.into_iter();
    match (v.next(), v.next(), v.next(), v.next()) {
        (
            Some(mlua::Value::String(name)),
            Some(mlua::Value::String(text)),
            Some(tick),
            Some(mlua::Value::Integer(buf)),
        ) => {
            let generation = match tick {
                mlua::Value::Integer(t) => t as u32,
                mlua::Value::Number(t) => t as u32,
                _ => 0,
            };
            let buf = buf as i32;
            LATEST.with(|l| l.borrow_mut().insert(buf, generation));
            Ok(Some(Document { bufnr: buf, generation, path: path_from_lua(&name), text: text.to_string_lossy() }))
        }
        // Too big: whatever was drawn or listed before no longer applies,
        // and a request still in flight for the smaller text must not draw.
        (Some(mlua::Value::Nil), Some(mlua::Value::Integer(buf)), _, _) => {
            forget_buffer(buf as i32);
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// Takes an answer unless a newer request for the buffer was made since:
/// lists it in the buffer variable, removes what the previous answer drew
/// and has the windows showing the buffer draw their lines in their next
/// redraw (see `on_win`). `lines` (titles by line) and `listed` (the
/// annotations, for list, hover and open, as JSON text) are built off the
/// main thread.
pub fn render(bufnr: i32, generation: u32, lines: Vec<LineTitles>, listed: String) {
    let newest = LATEST.with(|l| l.borrow().get(&bufnr).copied());
    let tick: Option<u32> = lua::api("nvim_buf_get_changedtick", bufnr).ok();
    if newest != Some(generation) || tick != Some(generation) {
        return; // stale: a newer answer is on its way
    }
    let run = || -> Result<(), String> {
        bulk::set_buffer_var(bufnr, ANNOTATIONS_VAR, &listed)?;
        clear(bufnr);
        if HIDDEN.get() {
            ANSWERS.with(|a| a.borrow_mut().remove(&bufnr));
            return Ok(());
        }
        let line_count: usize =
            lua::api("nvim_buf_line_count", bufnr).map_err(|e| api_err("nvim_buf_line_count", e))?;
        ANSWERS.with(|a| a.borrow_mut().insert(bufnr, Answer::new(generation, lines, line_count)));
        redraw_windows_of(bufnr).map_err(|e| api_err("nvim__redraw", e))
    };
    if let Err(e) = run() {
        crate::core::log::warn(format!("drawing annotations failed: {e}"));
    }
}

/// Marks the windows showing `buf` (in the current tab page; others are
/// redrawn whole when shown) for the next redraw, as `vim.lsp.inlay_hint`
/// does: "valid", only what changed is drawn again, but `on_win` runs; not
/// "flush", Neovim redraws once it has run the pending jobs (several
/// providers' answers make one redraw). Nothing for a buffer no window shows.
fn redraw_windows_of(buf: i32) -> mlua::Result<()> {
    let lua = lua::lua()?;
    let opts = lua.create_table_with_capacity(0, 3)?;
    opts.raw_set("buf", buf)?;
    opts.raw_set("valid", true)?;
    opts.raw_set("flush", false)?;
    lua::api("nvim__redraw", opts)
}

/// Forgets a buffer's annotations (it is unloaded, wiped out, or too big
/// now): its answer, its newest request (an answer still on its way is
/// dropped), what is drawn (Neovim keeps the extmarks of an unloaded
/// buffer) and listed.
pub fn forget_buffer(buf: i32) {
    LATEST.with(|l| l.borrow_mut().remove(&buf));
    ANSWERS.with(|a| a.borrow_mut().remove(&buf));
    clear(buf);
    let _ = lua::helper::<_, ()>("del_var", (buf, ANNOTATIONS_VAR));
}

/// Forgets every buffer (the service stops).
pub fn forget_all() {
    LATEST.with(|l| l.borrow_mut().clear());
    ANSWERS.with(|a| a.borrow_mut().clear());
}

/// The buffers this module keeps state for, ascending (for tests: a buffer
/// unloaded or wiped out must not be among them).
pub fn tracked_buffers() -> Vec<i32> {
    let mut bufs: Vec<i32> = LATEST.with(|l| l.borrow().keys().copied().collect());
    bufs.extend(ANSWERS.with(|a| a.borrow().keys().copied().collect::<Vec<_>>()));
    bufs.sort_unstable();
    bufs.dedup();
    bufs
}

/// Shows or hides every annotation (`:Amp annotations toggle`). Shown
/// again, they come with the next answers (the toggle asks again).
pub fn set_visible(visible: bool) {
    HIDDEN.set(!visible);
    if !visible {
        ANSWERS.with(|a| a.borrow_mut().clear());
        let bufs: Vec<i32> = lua::api("nvim_list_bufs", ()).unwrap_or_default();
        for buf in bufs {
            clear(buf);
        }
    }
}

thread_local! {
    /// The Lua function that takes OpenCtx answers (`openctx_set_resolver`).
    static RESOLVER: std::cell::RefCell<Option<mlua::Function>> = const { std::cell::RefCell::new(None) };
}

/// Sets the Lua function `resolve_request` hands answers to.
pub fn set_resolver(resolve: mlua::Function) {
    RESOLVER.with(|r| *r.borrow_mut() = Some(resolve));
}

/// Hands the answer to request `id` to the resolver the Lua shell set.
pub fn resolve_request(id: i64, result: &Value) {
    let run = || -> mlua::Result<()> {
        let Some(resolve) = RESOLVER.with(|r| r.borrow().clone()) else {
            return Err(mlua::Error::runtime("no resolver was set (openctx_set_resolver)"));
        };
        resolve.call((id, lua::to_lua(result)?))
    };
    if let Err(e) = run() {
        crate::core::log::warn(format!("openctx: delivering result {id} failed: {e}"));
    }
}

/// Tells the user about a failing provider (once per run of failures): the
/// first line of the error, cut short, with the whole of it in the log. A
/// message wider than the screen stops Neovim at a hit-enter prompt, where
/// no agent request is answered.
pub fn report_failure(provider: &str, message: &str) {
    const SHOWN_CHARS: usize = 60;
    crate::core::log::warn(format!("OpenCtx provider {provider}: {message}"));
    let first_line = message.lines().next().unwrap_or_default();
    let shown = match first_line.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}… (:Amp log)", &first_line[..cut]),
        None if first_line.len() < message.trim_end().len() => format!("{first_line} (:Amp log)"),
        None => first_line.to_string(),
    };
    events::notify(&format!("amp: OpenCtx provider {provider}: {shown}"), "WARN");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(line: usize, titles: &[&str]) -> LineTitles {
        LineTitles { line, titles: titles.iter().map(|t| t.to_string()).collect() }
    }

    #[test]
    fn lines_are_sorted_and_lines_past_the_end_go_on_the_last_line() {
        let a = Answer::new(7, vec![line(5, &["e"]), line(1, &["b"]), line(9, &["x", "y"]), line(4, &["d"])], 6);
        assert_eq!(a.tick, 7);
        assert_eq!(a.lines, vec![line(1, &["b"]), line(4, &["d"]), line(5, &["e", "x", "y"])]);
        let a = Answer::new(1, vec![line(3, &["p"]), line(8, &["q"])], 5);
        assert_eq!(a.lines, vec![line(3, &["p"]), line(4, &["q"])]);
    }

    #[test]
    fn lines_without_titles_are_dropped() {
        let a = Answer::new(1, vec![line(0, &[]), line(2, &["t"])], 10);
        assert_eq!(a.lines, vec![line(2, &["t"])]);
    }

    #[test]
    fn lines_to_draw_are_one_text() {
        let text = lines_text(&[line(3, &["a · b", ""]), line(10, &["é→😀"])]);
        assert_eq!(text, "3 2\na · b\n\n10 1\né→😀\n");
        assert_eq!(lines_text(&[]), "");
    }

    #[test]
    fn each_line_is_taken_once_within_the_range() {
        let mut a = Answer::new(1, (0..100).step_by(10).map(|n| line(n, &["t"])).collect(), 100);
        assert_eq!(a.take_undrawn(15, 40), vec![line(20, &["t"]), line(30, &["t"]), line(40, &["t"])]);
        assert_eq!(a.take_undrawn(15, 40), vec![]);
        // Overlapping range (another window, or scrolling): only the new ones.
        assert_eq!(a.take_undrawn(0, 25), vec![line(0, &["t"]), line(10, &["t"])]);
        assert_eq!(a.take_undrawn(95, 200), vec![]);
        assert_eq!(a.take_undrawn(41, 90).len(), 5);
        assert!(a.lines.iter().all(|l| l.titles.is_empty()));
    }
}
