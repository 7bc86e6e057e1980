//! An in-memory [`Editor`] for unit tests of the protocols' async paths:
//! buffers are lists of lines with a changedtick, `'modified'` and a format,
//! written with the same rules `:w` follows (`filetext`). It records what it
//! was asked, and can be told to answer "the user typed" a number of times,
//! or to be gone.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::buffer::{ApplyError, BufferFormat, BufferText, WritePlan};
use super::checked_file::CheckedPath;
use super::edit_plan::EditPlan;
use super::editor::{
    Editor, EditorError, FileChange, OpenBuffer, Pending, RawDiagnostic, Sliced, TextToSelect, WriteRequest,
};
use super::filetext::{self, FileFormat, LineEnd};
use super::review::{Decision, Owner, Proposal, ReviewEnd};
use super::sync::LockExt;
use super::uri::LineSelection;

#[derive(Debug, Clone)]
pub struct FakeBuffer {
    pub bufnr: i32,
    pub path: PathBuf,
    /// No lines: an empty buffer (what `:edit` of an empty file shows).
    pub lines: Vec<String>,
    pub tick: u32,
    pub modified: bool,
    pub format: BufferFormat,
    /// The lines before the last edit's first slice, for `undo_applied`.
    undo: Option<Vec<String>>,
    /// Undo steps made: an edit's first slice starts one, the others join it.
    pub undo_steps: usize,
}

/// What the fake was asked, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    LoadedText,
    TextForEdit,
    ApplySlice,
    Undo,
    Replace,
    WriteApplied,
    MarkReloaded,
    FileChanged(PathBuf, FileChange),
    Diagnostics(Option<Vec<PathBuf>>),
    OpenFile(PathBuf, Option<LineSelection>),
    OpenUrl(String),
    Event(&'static str, Value),
    /// A review: its name, the proposed text.
    Propose(String, String),
    CloseReview(String, ReviewEnd),
    ReviewText(String),
    /// Every review of the owner with this session closed.
    CloseReviews(u64, ReviewEnd),
    OpenBuffers,
    BufferModified(PathBuf),
    SaveBuffer(PathBuf),
    SelectText(TextToSelect),
}

/// A review shown and not decided: its text and the decision's sender.
type HeldReview = (String, tokio::sync::oneshot::Sender<Decision>);

#[derive(Default)]
struct State {
    buffers: Vec<FakeBuffer>,
    calls: Vec<Call>,
    /// An edit's first slice answers `Changed` this many more times (and
    /// bumps the changedtick, as the user's typing would).
    typing: usize,
    /// Ops one slice applies (all when `None`).
    slice_ops: Option<usize>,
    /// Slices run.
    slices: usize,
    /// Lines the user inserts (at these indices) right before the next
    /// slices that continue an edit, one batch each.
    between_slices: std::collections::VecDeque<Vec<(usize, String)>>,
    gone: bool,
    diagnostics: Vec<RawDiagnostic>,
    /// What the user decides in the next reviews (none: rejected).
    decisions: Vec<Decision>,
    /// With `hold_reviews`: the reviews shown and not decided yet, by
    /// owner's session and name (their text, and the decision's sender:
    /// `close_review` rejects).
    held: Option<HashMap<(u64, String), HeldReview>>,
}

#[derive(Default)]
pub struct FakeEditor {
    state: Mutex<State>,
    /// Whether `replace_applied` is offered (Neovim: the C fast path).
    pub records: bool,
}

pub fn unix_format() -> BufferFormat {
    BufferFormat {
        line_end: LineEnd::Unix,
        eol: true,
        fixeol: true,
        readonly: false,
        is_file: true,
        conflict: false,
        encoding: "utf-8",
        bomb: false,
        binary: false,
    }
}

impl FakeEditor {
    pub fn new(records: bool) -> Self {
        Self { state: Mutex::default(), records }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    /// A loaded buffer for `path` with these lines.
    pub fn open(&self, path: &Path, lines: &[&str], modified: bool, format: BufferFormat) {
        let mut state = self.state();
        let bufnr = state.buffers.len() as i32 + 1;
        state.buffers.push(FakeBuffer {
            bufnr,
            path: path.to_path_buf(),
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            tick: 1,
            modified,
            format,
            undo: None,
            undo_steps: 0,
        });
    }

    /// The buffer's text as `loaded_text` answers it.
    pub fn snapshot(&self, path: &Path) -> BufferText {
        text_of(self.state().buffers.iter().find(|b| b.path == path).expect("an open buffer"))
    }

    /// From now on one slice applies at most `ops` ops.
    pub fn slice_ops(&self, ops: usize) {
        self.state().slice_ops = Some(ops);
    }

    /// Slices run so far.
    pub fn slices(&self) -> usize {
        self.state().slices
    }

    pub fn undo_steps(&self, path: &Path) -> usize {
        self.buffer(path).map_or(0, |b| b.undo_steps)
    }

    /// The user inserts `lines` (index, text) right before the next slice
    /// that continues an edit; each call queues one more such batch.
    pub fn type_between_slices(&self, lines: Vec<(usize, String)>) {
        self.state().between_slices.push_back(lines);
    }

    pub fn buffer(&self, path: &Path) -> Option<FakeBuffer> {
        self.state().buffers.iter().find(|b| b.path == path).cloned()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    pub fn type_meanwhile(&self, times: usize) {
        self.state().typing = times;
    }

    pub fn go_away(&self) {
        self.state().gone = true;
    }

    /// From now on reviews stay open until `close_review` (rejected), as the
    /// editor's do until the user decides.
    pub fn hold_reviews(&self) {
        self.state().held = Some(HashMap::new());
    }

    /// The user's decisions in the next reviews, in order.
    pub fn decide(&self, decisions: Vec<Decision>) {
        self.state().decisions = decisions;
    }

    pub fn set_diagnostics(&self, list: Vec<RawDiagnostic>) {
        self.state().diagnostics = list;
    }

    fn answer<T: Send + 'static>(&self, call: Call, f: impl FnOnce(&mut State) -> T) -> Pending<'_, T> {
        self.answer_or_refuse(call, |s| Ok(f(s)))
    }

    /// [`Self::answer`] for a call the editor may refuse.
    fn answer_or_refuse<T: Send + 'static>(
        &self,
        call: Call,
        f: impl FnOnce(&mut State) -> Result<T, String>,
    ) -> Pending<'_, T> {
        let mut state = self.state();
        state.calls.push(call);
        let out = if state.gone { Err(EditorError::Closed) } else { f(&mut state).map_err(EditorError::Refused) };
        Box::pin(async move { out })
    }
}

fn text_of(b: &FakeBuffer) -> BufferText {
    BufferText {
        bufnr: b.bufnr,
        changedtick: b.tick,
        modified: b.modified,
        joined: b.lines.join("\n").into_bytes(),
        line_count: b.lines.len(),
        format: b.format,
    }
}

fn find<'a>(state: &'a mut State, paths: &[PathBuf]) -> Option<&'a mut FakeBuffer> {
    state.buffers.iter_mut().find(|b| paths.contains(&b.path))
}

fn by_number(state: &mut State, bufnr: i32) -> Option<&mut FakeBuffer> {
    state.buffers.iter_mut().find(|b| b.bufnr == bufnr)
}

fn apply_slice_to(
    state: &mut State,
    plan: &EditPlan,
    from: usize,
    tick: u32,
    whole: bool,
) -> Result<Sliced, ApplyError> {
    if from == 0 && state.typing > 0 {
        state.typing -= 1;
        if let Some(b) = by_number(state, plan.bufnr) {
            b.tick += 1;
        }
        return Err(ApplyError::Changed);
    }
    if from > 0 && !state.between_slices.is_empty() {
        let typed = state.between_slices.pop_front().unwrap_or_default();
        if let Some(b) = by_number(state, plan.bufnr) {
            for (at, line) in typed {
                b.lines.insert(at, line);
            }
            b.tick += 1;
            b.undo_steps += 1;
        }
    }
    let per_slice = if whole { usize::MAX } else { state.slice_ops.unwrap_or(usize::MAX) };
    state.slices += 1;
    let b = by_number(state, plan.bufnr).filter(|b| b.tick == tick).ok_or(ApplyError::Changed)?;
    if from == 0 {
        b.undo = Some(b.lines.clone());
        b.undo_steps += 1;
    }
    let end = plan.ops().len().min(from.saturating_add(per_slice));
    for op in &plan.ops()[from..end] {
        let old_end = op.old_end.min(b.lines.len());
        b.lines.splice(op.start.min(old_end)..old_end, plan.lines(op).map(str::to_owned));
    }
    if end == plan.ops().len() {
        if let Some(eol) = plan.final_eol {
            b.format.eol = eol;
            if !eol {
                b.format.fixeol = false;
            }
        }
    }
    b.tick += 1;
    b.modified = true;
    Ok(Sliced { tick: b.tick, next: end })
}

/// The bytes `:w` writes from the buffer.
fn written(b: &FakeBuffer) -> Vec<u8> {
    let text = filetext::written_text(
        b.lines.join("\n").into_bytes(),
        b.lines.is_empty(),
        b.format.line_end,
        b.format.eol || b.format.fixeol,
    );
    filetext::encode(text, b.format.encoding, b.format.bomb).expect("an encoding the fake writes")
}

impl Editor for FakeEditor {
    fn loaded_text(&self, paths: Vec<PathBuf>) -> Pending<'_, Option<BufferText>> {
        self.answer_or_refuse(Call::LoadedText, |s| Ok(find(s, &paths).map(|b| text_of(b))))
    }

    fn text_for_edit(&self, paths: Vec<PathBuf>, file: CheckedPath) -> Pending<'_, BufferText> {
        self.answer_or_refuse(Call::TextForEdit, |s| {
            if let Some(b) = find(s, &paths) {
                return Ok(text_of(b));
            }
            // Loaded for the edit, as `:edit` reads it.
            file.still_same().map_err(|e| e.to_string())?;
            let bytes = std::fs::read(&paths[0]).map_err(|e| e.to_string())?;
            let disk = filetext::decode(&bytes, &filetext::ReadOptions::default()).map_err(|e| e.0)?;
            let format = BufferFormat {
                line_end: disk.line_end,
                eol: disk.eol,
                bomb: disk.bomb,
                encoding: disk.encoding,
                ..unix_format()
            };
            let lines = disk.lines().into_iter().map(str::to_owned).collect();
            let bufnr = s.buffers.len() as i32 + 1;
            s.buffers.push(FakeBuffer {
                bufnr,
                path: paths[0].clone(),
                lines,
                tick: 1,
                modified: false,
                format,
                undo: None,
                undo_steps: 0,
            });
            Ok(text_of(s.buffers.last().expect("just pushed")))
        })
    }

    fn apply_slice(
        &self,
        plan: Arc<EditPlan>,
        from: usize,
        tick: u32,
        whole: bool,
    ) -> Pending<'_, Result<Sliced, ApplyError>> {
        self.answer(Call::ApplySlice, |s| apply_slice_to(s, &plan, from, tick, whole))
    }

    fn undo_applied(&self, bufnr: i32, tick: u32) -> Pending<'_, bool> {
        self.answer(Call::Undo, |s| match by_number(s, bufnr).filter(|b| b.tick == tick) {
            Some(b) => b.undo.take().map(|lines| b.lines = lines).is_some(),
            None => false,
        })
    }

    fn records_writes(&self) -> bool {
        self.records
    }

    fn replace_applied(
        &self,
        bufnr: i32,
        _tick: u32,
        _write: WriteRequest,
        tmp: PathBuf,
        target: PathBuf,
    ) -> Pending<'_, Result<(), ApplyError>> {
        self.answer(Call::Replace, |s| {
            let b = by_number(s, bufnr).ok_or(ApplyError::Changed)?;
            std::fs::rename(&tmp, &target).map_err(|e| ApplyError::Failed(e.to_string()))?;
            b.modified = false;
            Ok(())
        })
    }

    fn write_applied(
        &self,
        bufnr: i32,
        _tick: u32,
        _write: WriteRequest,
        _plan: WritePlan,
        _undo: bool,
    ) -> Pending<'_, Result<(), ApplyError>> {
        self.answer(Call::WriteApplied, |s| {
            let b = by_number(s, bufnr).ok_or(ApplyError::Changed)?;
            std::fs::write(&b.path, written(b)).map_err(|e| ApplyError::Failed(e.to_string()))?;
            b.modified = false;
            Ok(())
        })
    }

    fn mark_reloaded(
        &self,
        bufnr: i32,
        _tick: u32,
        format: FileFormat,
        modified: bool,
    ) -> Pending<'_, Result<(), ApplyError>> {
        self.answer(Call::MarkReloaded, |s| {
            let b = by_number(s, bufnr).ok_or(ApplyError::Changed)?;
            b.format = BufferFormat {
                line_end: format.line_end,
                eol: format.eol,
                bomb: format.bomb,
                encoding: format.encoding,
                ..b.format
            };
            b.modified = modified;
            Ok(())
        })
    }

    fn file_changed(&self, path: PathBuf, change: FileChange) -> Pending<'_, ()> {
        self.answer(Call::FileChanged(path, change), |_| ())
    }

    fn diagnostics(&self, under: Option<Vec<PathBuf>>) -> Pending<'_, Vec<RawDiagnostic>> {
        self.answer_or_refuse(Call::Diagnostics(under.clone()), |s| {
            Ok(s.diagnostics
                .iter()
                .filter(|d| under.as_ref().is_none_or(|u| u.iter().any(|p| d.path.starts_with(p))))
                .cloned()
                .collect())
        })
    }

    fn open_file(&self, path: CheckedPath, selection: Option<LineSelection>) -> Pending<'_, ()> {
        self.answer_or_refuse(Call::OpenFile(path.into_path(), selection), |_| Ok(()))
    }

    fn open_url(&self, url: String) -> Pending<'_, ()> {
        self.answer_or_refuse(Call::OpenUrl(url), |_| Ok(()))
    }

    fn event(&self, name: &'static str, data: Value) {
        self.state().calls.push(Call::Event(name, data));
    }

    fn propose(&self, proposal: Proposal) -> Pending<'_, Decision> {
        let (name, text) = (proposal.name.clone(), proposal.proposed.clone());
        let mut state = self.state();
        let gone = state.gone;
        if let (Some(held), false) = (state.held.as_mut(), gone) {
            let (tx, rx) = tokio::sync::oneshot::channel();
            // Replaced: the earlier one of the same owner and name is rejected.
            if let Some((_, old)) = held.insert((proposal.owner.session, name.clone()), (text.clone(), tx)) {
                let _ = old.send(Decision::Rejected);
            }
            state.calls.push(Call::Propose(name, text));
            return Box::pin(async move { Ok(rx.await.unwrap_or(Decision::Rejected)) });
        }
        drop(state);
        self.answer(Call::Propose(name, text), |s| {
            if s.decisions.is_empty() {
                Decision::Rejected
            } else {
                s.decisions.remove(0)
            }
        })
    }

    fn close_review(&self, owner: Owner, name: String, why: ReviewEnd) -> Pending<'_, bool> {
        self.answer(Call::CloseReview(name.clone(), why), move |s| {
            let held = s.held.as_mut().and_then(|h| h.remove(&(owner.session, name)));
            match held {
                Some((_, tx)) => {
                    let _ = tx.send(Decision::Rejected);
                    true
                }
                None => false,
            }
        })
    }

    fn review_text(&self, owner: Owner, name: String) -> Pending<'_, Option<String>> {
        self.answer(Call::ReviewText(name.clone()), move |s| {
            s.held.as_ref().and_then(|h| h.get(&(owner.session, name))).map(|(text, _)| text.clone())
        })
    }

    fn close_reviews(&self, owner: Owner, why: ReviewEnd) -> Pending<'_, usize> {
        self.answer_or_refuse(Call::CloseReviews(owner.session, why), move |s| {
            let Some(held) = s.held.as_mut() else { return Ok(0) };
            let mine: Vec<_> = held.keys().filter(|(session, _)| *session == owner.session).cloned().collect();
            for key in &mine {
                if let Some((_, tx)) = held.remove(key) {
                    let _ = tx.send(Decision::Rejected);
                }
            }
            Ok(mine.len())
        })
    }

    /// The first buffer is the current one.
    fn open_buffers(&self) -> Pending<'_, Vec<OpenBuffer>> {
        self.answer_or_refuse(Call::OpenBuffers, |s| {
            Ok(s.buffers
                .iter()
                .enumerate()
                .map(|(i, b)| OpenBuffer {
                    path: b.path.clone(),
                    active: i == 0,
                    dirty: b.modified,
                    filetype: String::new(),
                })
                .collect())
        })
    }

    fn buffer_modified(&self, path: PathBuf) -> Pending<'_, Option<bool>> {
        self.answer_or_refuse(Call::BufferModified(path.clone()), move |s| {
            Ok(s.buffers.iter().find(|b| b.path == path).map(|b| b.modified))
        })
    }

    fn save_buffer(&self, path: PathBuf) -> Pending<'_, Option<()>> {
        self.answer_or_refuse(Call::SaveBuffer(path.clone()), move |s| {
            Ok(s.buffers.iter_mut().find(|b| b.path == path).map(|b| b.modified = false))
        })
    }

    fn select_text(&self, select: TextToSelect) -> Pending<'_, bool> {
        self.answer_or_refuse(Call::SelectText(select), |_| Ok(true))
    }
}
