//! Applying an [`EditPlan`] without holding the editor's main thread: one
//! slice of its time after another (`Editor::apply_slice`), so keys typed
//! meanwhile are handled in between, while the whole edit stays one undo
//! step.
//!
//! Between two slices someone may change the buffer (the user typing in
//! it, a plugin). The edit then goes on from the buffer as it is: the rest
//! of it is merged onto their change (`core::rebase`; where both touch the
//! same lines the edit wins, and what it replaced is in the undo history).
//! After [`APPLY_ROUNDS`] such interruptions the rest is applied in one go.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use super::buffer::{ApplyError, BufferText, NotUtf8};
use super::edit::line_hunks;
use super::edit_gate::{too_many_lines, TooManyLines};
use super::edit_plan::EditPlan;
use super::editor::{Editor, EditorError};
use super::rebase::rebase_edit;

/// How often an edit is merged onto someone else's change before the rest
/// of it is applied in one slice.
pub const APPLY_ROUNDS: usize = 3;

/// An applied edit: the buffer's changedtick after it, and whether someone
/// else changed the buffer while it was applied (then the buffer holds
/// their change too, and is not the edit's text alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    pub tick: u32,
    pub interrupted: bool,
}

/// Applies `plan`, made from `before` (the snapshot of the buffer whose
/// names are `paths`). `Err(Changed)`: the buffer changed before anything
/// was applied (recompute the edit from a new snapshot).
pub async fn apply(
    editor: &dyn Editor,
    paths: &[PathBuf],
    before: &BufferText,
    plan: EditPlan,
) -> Result<Result<Applied, ApplyError>, EditorError> {
    let mut plan = Arc::new(plan);
    let mut base: Cow<'_, BufferText> = Cow::Borrowed(before);
    let (mut tick, mut next, mut rounds) = (before.changedtick, 0, 0);
    loop {
        let whole = rounds >= APPLY_ROUNDS;
        match editor.apply_slice(plan.clone(), next, tick, whole).await? {
            Ok(sliced) => {
                (tick, next) = (sliced.tick, sliced.next);
                if next >= plan.ops().len() {
                    return Ok(Ok(Applied { tick, interrupted: rounds > 0 }));
                }
            }
            Err(ApplyError::Changed) if rounds == 0 && next == 0 => return Ok(Err(ApplyError::Changed)),
            Err(ApplyError::Changed) => {
                rounds += 1;
                let now = match editor.loaded_text(paths.to_vec()).await {
                    Ok(Some(now)) => now,
                    Ok(None) => return Ok(Err(ApplyError::Failed("the buffer was closed during the edit".into()))),
                    Err(e) => return Ok(Err(ApplyError::Failed(e.refusal()?))),
                };
                let rebased = match rebase_plan(&base, &plan, next, &now) {
                    Ok(rebased) => rebased,
                    Err(why) => return Ok(Err(ApplyError::Failed(why.to_string()))),
                };
                (tick, next) = (now.changedtick, 0);
                plan = Arc::new(rebased);
                base = Cow::Owned(now);
            }
            Err(failed) => return Ok(Err(failed)),
        }
    }
}

/// Why the rest of an edit cannot be carried over to the buffer the user
/// changed meanwhile.
#[derive(Debug, thiserror::Error)]
enum NotRebased {
    #[error("the buffer changed during the edit and now holds part of it: {0}")]
    TooManyLines(#[from] TooManyLines),
    #[error("the buffer changed during the edit: {0}")]
    NotUtf8(#[from] NotUtf8),
}

/// The rest of `plan` (its ops from `next` on, over `base`) as a plan over
/// the buffer `now`.
fn rebase_plan(base: &BufferText, plan: &EditPlan, next: usize, now: &BufferText) -> Result<EditPlan, NotRebased> {
    too_many_lines(std::path::Path::new("the buffer"), "it", now.line_count)?;
    let old = base.lines()?;
    let (applied, remaining) = plan.ops().split_at(next);
    // The buffer as the applied ops left it: they ran bottom-up, so in
    // reverse they go top-down, each in the old text's coordinates.
    let mut left: Vec<&str> = Vec::with_capacity(old.len());
    let mut at = 0;
    for op in applied.iter().rev() {
        left.extend_from_slice(&old[at..op.start]);
        left.extend(plan.lines(op));
        at = op.old_end;
    }
    left.extend_from_slice(&old[at..]);
    // The ops not applied yet lie above those applied: their coordinates
    // hold in `left`. Top-down, pieces of one hunk joined again.
    let mut ours: Vec<(std::ops::Range<usize>, Vec<&str>)> = Vec::new();
    for op in remaining.iter().rev() {
        match ours.last_mut() {
            Some((range, lines)) if range.end == op.start => {
                range.end = op.old_end;
                lines.extend(plan.lines(op));
            }
            _ => ours.push((op.start..op.old_end, plan.lines(op).collect())),
        }
    }
    let current = now.lines()?;
    let theirs = line_hunks(&left, &current);
    let replacements = rebase_edit(&left, &ours, &theirs);
    Ok(EditPlan::from_replacements(now.bufnr, &replacements, plan.final_eol))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::fake_editor::{unix_format, FakeEditor};
    use std::path::Path;

    fn plan_for(editor: &FakeEditor, path: &Path, text: &str) -> (BufferText, EditPlan) {
        let before = editor.snapshot(path);
        let text = Arc::new(text.to_owned());
        let new: Vec<&str> = text.split('\n').collect();
        let hunks = before.hunks_to(&new).unwrap();
        let plan = EditPlan::new(before.bufnr, text.clone(), &new, &hunks, None);
        (before, plan)
    }

    #[tokio::test]
    async fn a_big_edit_goes_in_slices_as_one_undo_step() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        let old: Vec<String> = (0..10_000).map(|i| format!("old {i}")).collect();
        editor.open(path, &old.iter().map(String::as_str).collect::<Vec<_>>(), false, unix_format());
        editor.slice_ops(2);
        let new: Vec<String> = (0..10_000).map(|i| format!("new {i}")).collect();
        let (before, plan) = plan_for(&editor, path, &new.join("\n"));
        let ops = plan.ops().len();
        let applied = apply(&editor, &[path.into()], &before, plan).await.unwrap().unwrap();
        assert!(!applied.interrupted);
        assert_eq!(editor.buffer(path).unwrap().lines, new);
        assert_eq!(editor.slices(), ops.div_ceil(2), "{ops} ops, 2 a slice");
        assert_eq!(editor.undo_steps(path), 1, "joined into one undo step");
    }

    #[tokio::test]
    async fn the_users_typing_between_slices_is_kept_and_the_edit_finished_around_it() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        let old: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
        editor.open(path, &old.iter().map(String::as_str).collect::<Vec<_>>(), false, unix_format());
        editor.slice_ops(1);
        // The agent changes a line near the top and one near the bottom; the
        // user adds a line at the very top after the first slice (which did
        // the bottom one).
        let mut new = old.clone();
        new[10] = "agent 10".into();
        new[4990] = "agent 4990".into();
        editor.type_between_slices(vec![(0, "typed".into())]);
        let (before, plan) = plan_for(&editor, path, &new.join("\n"));
        let applied = apply(&editor, &[path.into()], &before, plan).await.unwrap().unwrap();
        assert!(applied.interrupted);
        let mut want = new.clone();
        want.insert(0, "typed".into());
        assert_eq!(editor.buffer(path).unwrap().lines, want);
    }

    #[tokio::test]
    async fn after_apply_rounds_interruptions_the_rest_goes_in_one_slice() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        let old: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        editor.open(path, &old.iter().map(String::as_str).collect::<Vec<_>>(), false, unix_format());
        editor.slice_ops(1);
        // Every other line changed: 40 ops below the top ten, one per slice.
        let new: Vec<String> = old
            .iter()
            .enumerate()
            .map(|(i, l)| if i >= 20 && i % 2 == 0 { format!("agent {i}") } else { l.clone() })
            .collect();
        // The user types before every slice that continues the edit.
        for n in 0..10 {
            editor.type_between_slices(vec![(0, format!("typed {n}"))]);
        }
        let (before, plan) = plan_for(&editor, path, &new.join("\n"));
        let applied = apply(&editor, &[path.into()], &before, plan).await.unwrap().unwrap();
        assert!(applied.interrupted);
        let lines = editor.buffer(path).unwrap().lines;
        // Interrupted APPLY_ROUNDS times; then the rest in one slice (no
        // continuation left to type before).
        let typed: Vec<&String> = lines.iter().filter(|l| l.starts_with("typed")).collect();
        assert_eq!(typed.len(), APPLY_ROUNDS, "{lines:?}");
        assert_eq!(&lines[APPLY_ROUNDS..], &new[..], "the edit is complete around the typing");
    }

    #[tokio::test]
    async fn a_change_before_anything_was_applied_is_left_to_the_caller() {
        let editor = FakeEditor::new(true);
        let path = Path::new("/w/a.txt");
        editor.open(path, &["a"], false, unix_format());
        let (before, plan) = plan_for(&editor, path, "b");
        editor.type_meanwhile(1);
        let got = apply(&editor, &[path.into()], &before, plan).await.unwrap();
        assert_eq!(got, Err(ApplyError::Changed));
        assert_eq!(editor.buffer(path).unwrap().lines, ["a"]);
    }
}
