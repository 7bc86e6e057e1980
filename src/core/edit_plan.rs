//! An edit as the editor applies it, a few lines at a time: bounded
//! replacements, bottom-up, whose new lines are spans of one shared text
//! (no `String` per line: 30 million empty lines would be 720 MB of
//! `String`s before any of them reached the buffer).

use std::ops::Range;
use std::sync::Arc;

use super::buffer::FinalEol;
use super::edit::Hunk;

/// Lines one replacement removes or inserts at most: what one
/// `nvim_buf_set_lines` call copies (and saves for undo), so one slice of
/// the main thread's time is never one huge call.
pub const OP_LINES: usize = 1024;

/// One replacement: lines `start..old_end` of the buffer become the plan's
/// lines `lines` (see [`EditPlan::lines`]). Coordinates are the buffer's
/// when the replacement runs, which, bottom-up, are the old text's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub start: usize,
    pub old_end: usize,
    lines: Range<usize>,
}

impl Op {
    /// How many lines it inserts.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// An agent's change to one buffer: [`Op`]s in the order they run (last
/// hunk first, so each leaves the lines above it where they were), then the
/// final end-of-line. Shared (`Arc`) between the slices of the main
/// thread's time that apply it.
#[derive(Debug)]
pub struct EditPlan {
    pub bufnr: i32,
    text: Arc<String>,
    /// Where each line the ops insert is in `text`, in op order.
    spans: Vec<Range<usize>>,
    ops: Vec<Op>,
    pub final_eol: FinalEol,
}

impl EditPlan {
    /// The plan of `hunks` (ascending, made by diffing into `new_lines`,
    /// which are slices of `text`). Only the lines the hunks insert are
    /// kept, as spans.
    pub fn new(bufnr: i32, text: Arc<String>, new_lines: &[&str], hunks: &[Hunk], final_eol: FinalEol) -> EditPlan {
        let base = text.as_ptr() as usize;
        let span = |line: &str| {
            let at = line.as_ptr() as usize - base;
            debug_assert!(at + line.len() <= text.len(), "a line that is not part of the text");
            at..at + line.len()
        };
        let mut plan = EditPlan { bufnr, text: text.clone(), spans: Vec::new(), ops: Vec::new(), final_eol };
        for hunk in hunks.iter().rev() {
            plan.push_hunk(hunk.start, hunk.old_end, new_lines[hunk.new.clone()].iter().map(|l| span(l)));
        }
        plan
    }

    /// The plan of `replacements` (ascending, disjoint: lines of the buffer
    /// and what they become), whose lines are copied into a text of its own.
    pub fn from_replacements(bufnr: i32, replacements: &[(Range<usize>, Vec<&str>)], final_eol: FinalEol) -> EditPlan {
        let size = replacements.iter().flat_map(|(_, lines)| lines.iter()).map(|l| l.len()).sum();
        let mut text = String::with_capacity(size);
        let mut spans = Vec::new();
        for (_, lines) in replacements {
            for line in lines {
                spans.push(text.len()..text.len() + line.len());
                text.push_str(line);
            }
        }
        let mut plan = EditPlan { bufnr, text: Arc::new(text), spans: Vec::new(), ops: Vec::new(), final_eol };
        let mut next = spans.len();
        for (range, lines) in replacements.iter().rev() {
            next -= lines.len();
            plan.push_hunk(range.start, range.end, spans[next..next + lines.len()].iter().cloned());
        }
        plan
    }

    /// Splits one hunk into replacements of at most [`OP_LINES`] lines on
    /// either side, last piece first.
    fn push_hunk(&mut self, start: usize, old_end: usize, lines: impl ExactSizeIterator<Item = Range<usize>>) {
        let lines: Vec<Range<usize>> = lines.collect();
        let (old_len, new_len) = (old_end - start, lines.len());
        let pieces = old_len.max(new_len).div_ceil(OP_LINES).max(1);
        for i in (0..pieces).rev() {
            let old = (start + (i * OP_LINES).min(old_len))..(start + ((i + 1) * OP_LINES).min(old_len));
            let new = (i * OP_LINES).min(new_len)..((i + 1) * OP_LINES).min(new_len);
            let at = self.spans.len();
            self.spans.extend_from_slice(&lines[new]);
            self.ops.push(Op { start: old.start, old_end: old.end, lines: at..self.spans.len() });
        }
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The lines `op` inserts.
    pub fn lines<'a>(&'a self, op: &Op) -> impl ExactSizeIterator<Item = &'a str> + 'a {
        self.spans[op.lines.clone()].iter().map(|r| &self.text[r.clone()])
    }

    /// Nothing to change: no replacement and the final end-of-line as it is.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.final_eol.is_none()
    }

    /// Every line the plan inserts (for checks such as Latin-1's).
    pub fn all_lines(&self) -> impl Iterator<Item = &str> {
        self.spans.iter().map(|r| &self.text[r.clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::edit::line_hunks;

    /// Runs the plan on `old` as the editor does: each op in turn.
    pub fn run(old: &[&str], plan: &EditPlan) -> Vec<String> {
        let mut out: Vec<String> = old.iter().map(|s| s.to_string()).collect();
        for op in plan.ops() {
            out.splice(op.start..op.old_end, plan.lines(op).map(str::to_owned));
        }
        out
    }

    fn plan_of(old: &[&str], text: &str) -> EditPlan {
        let text = Arc::new(text.to_owned());
        let new: Vec<&str> = text.split('\n').collect();
        let hunks = line_hunks(old, &new);
        EditPlan::new(1, text.clone(), &new, &hunks, None)
    }

    #[test]
    fn ops_run_bottom_up_rebuild_the_text_and_stay_within_op_lines() {
        let old: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
        let old: Vec<&str> = old.iter().map(String::as_str).collect();
        // A big insertion, a big deletion, a replacement of different sizes.
        let mut new: Vec<String> = old.iter().map(|s| s.to_string()).collect();
        new.splice(4000..4990, ["short".to_string()]);
        new.splice(100..101, (0..3000).map(|i| format!("new {i}")));
        new[10] = "changed".into();
        let text = new.join("\n");
        let plan = plan_of(&old, &text);
        assert!(plan.ops().iter().all(|op| op.old_end - op.start <= OP_LINES && op.len() <= OP_LINES));
        assert!(plan.ops().windows(2).all(|w| w[0].start >= w[1].start), "bottom-up");
        assert_eq!(run(&old, &plan), new);
        // 1 line changed; 1 line becomes 3000 (3 pieces); 990 lines become 1.
        assert_eq!(plan.ops().len(), 1 + 3 + 1);
        // Only the inserted lines are kept.
        assert_eq!(plan.all_lines().count(), 1 + 3000 + 1);
    }

    #[test]
    fn a_hunk_of_op_lines_is_one_op_and_one_line_more_is_two() {
        let at: Vec<String> = (0..OP_LINES).map(|i| format!("{i}")).collect();
        let plan = plan_of(&["x"], &at.join("\n"));
        assert_eq!(plan.ops().len(), 1);
        let past: Vec<String> = (0..=OP_LINES).map(|i| format!("{i}")).collect();
        let plan = plan_of(&["x"], &past.join("\n"));
        assert_eq!(plan.ops().iter().map(Op::len).collect::<Vec<_>>(), [1, OP_LINES], "last piece first");
        assert_eq!(run(&["x"], &plan), past);
    }

    #[test]
    fn a_plan_of_given_lines_owns_them() {
        let old = ["a", "b", "c"];
        let plan = EditPlan::from_replacements(1, &[(0..0, vec!["x"]), (1..3, vec!["B", "C", "D"])], Some(true));
        assert_eq!(run(&old, &plan), ["x", "a", "B", "C", "D"]);
        assert_eq!(plan.final_eol, Some(true));
        assert!(!plan.is_empty());
        assert!(EditPlan::from_replacements(1, &[], None).is_empty());
    }
}
