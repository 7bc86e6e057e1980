//! What the agent sees of the editor: the selection and the visible files,
//! as raw editor facts (byte columns, lines) turned into notification
//! payloads in UTF-16 positions, for both dialects. Plain Rust, unit-tested.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use super::protocol::{encode_notification, Dialect};
use crate::core::published::{SelectionSnapshot, VisibleFilesSnapshot};
pub use crate::core::selection::{RawRegion, RawSelection};
use crate::core::text::byte_to_utf16_col;
use crate::core::uri::path_to_file_uri;

impl RawRegion {
    pub fn content(&self, cursor_only: bool) -> String {
        if cursor_only {
            return String::from_utf8_lossy(self.lines.first().map(Vec::as_slice).unwrap_or_default()).into_owned();
        }
        let last = self.lines.len().saturating_sub(1);
        let mut out = Vec::new();
        for (i, line) in self.lines.iter().enumerate() {
            let from = if i == 0 { self.start_col.min(line.len()) } else { 0 };
            let to = if i == last { self.end_col.min(line.len()) } else { line.len() };
            if i > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(&line[from.min(to)..to]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Start and end columns in UTF-16 code units (their lines are `lines`' first and last).
    pub fn utf16_range(&self) -> (usize, usize) {
        let first = self.lines.first().map(Vec::as_slice).unwrap_or_default();
        let last = self.lines.last().map(Vec::as_slice).unwrap_or_default();
        (byte_to_utf16_col(first, self.start_col), byte_to_utf16_col(last, self.end_col))
    }
}

/// `selectionDidChange` (Amp CLI) payload.
pub fn selection_payload(sel: &RawSelection) -> Value {
    let selections: Vec<Value> = sel
        .regions
        .iter()
        .map(|r| {
            let (start, end) = r.utf16_range();
            json!({
                "range": {
                    "startLine": r.start_line,
                    "startCharacter": start,
                    "endLine": r.end_line,
                    "endCharacter": end,
                },
                "content": r.content(sel.cursor_only),
            })
        })
        .collect();
    json!({ "uri": path_to_file_uri(&sel.path), "selections": selections })
}

/// `selectionChanged` (quick reference) payload: the first region only.
pub fn selection_changed_payload(sel: &RawSelection) -> Value {
    let (start_line, start, end_line, end) = match sel.regions.first() {
        Some(r) => {
            let (s, e) = r.utf16_range();
            (r.start_line, s, sel.regions.last().map_or(r.end_line, |l| l.end_line), e)
        }
        None => (0, 0, 0, 0),
    };
    json!({
        "path": sel.path.to_string_lossy(),
        "start": { "line": start_line, "col": start },
        "end": { "line": end_line, "col": end },
    })
}

pub fn visible_files_payload(files: &[PathBuf]) -> Value {
    json!({ "uris": files.iter().map(|p| path_to_file_uri(p)).collect::<Vec<_>>() })
}

pub fn visible_files_changed_payload(files: &[PathBuf]) -> Value {
    json!({ "files": files.iter().map(|p| p.to_string_lossy()).collect::<Vec<_>>() })
}

/// The selection notification for a client of `dialect`, encoded once per
/// snapshot and dialect (50 clients cost one encoding each way).
pub fn selection_frame(snapshot: &SelectionSnapshot, dialect: Dialect) -> Arc<str> {
    match dialect {
        Dialect::Flat => snapshot
            .encoded("amp/flat", |raw| encode_notification("selectionDidChange", dialect, &selection_payload(raw))),
        Dialect::Wrapped => snapshot.encoded("amp/wrapped", |raw| {
            encode_notification("selectionChanged", dialect, &selection_changed_payload(raw))
        }),
    }
}

/// The visible-files notification for a client of `dialect` (see [`selection_frame`]).
pub fn visible_files_frame(snapshot: &VisibleFilesSnapshot, dialect: Dialect) -> Arc<str> {
    match dialect {
        Dialect::Flat => snapshot.encoded("amp/flat", |raw| {
            encode_notification("visibleFilesDidChange", dialect, &visible_files_payload(raw))
        }),
        Dialect::Wrapped => snapshot.encoded("amp/wrapped", |raw| {
            encode_notification("visibleFilesChanged", dialect, &visible_files_changed_payload(raw))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::selection::RawRegion;

    fn region(sl: usize, sc: usize, el: usize, ec: usize, lines: &[&str]) -> RawRegion {
        RawRegion::of(sl, sc, el, ec, lines)
    }

    #[test]
    fn cursor_sends_its_line_and_utf16_column() {
        // "é→😀x": x is at byte 9, UTF-16 column 4.
        let sel =
            RawSelection {
                path: "/w/a b.rs".into(), cursor_only: true, regions: vec![region(2, 9, 2, 9, &["é→😀x"])]
            };
        let p = selection_payload(&sel);
        assert_eq!(p["uri"], "file:///w/a%20b.rs");
        assert_eq!(p["selections"][0]["range"], json!({"startLine":2,"startCharacter":4,"endLine":2,"endCharacter":4}));
        assert_eq!(p["selections"][0]["content"], "é→😀x");
    }

    #[test]
    fn cursor_selections_compare_without_being_built() {
        let sel = RawSelection::cursor("/w/a".into(), 3, 2, b"abc".to_vec());
        assert_eq!(
            sel,
            RawSelection { path: "/w/a".into(), cursor_only: true, regions: vec![region(3, 2, 3, 2, &["abc"])] }
        );
        assert!(sel.is_cursor(b"/w/a", 3, 2, b"abc"));
        assert!(!sel.is_cursor(b"/w/b", 3, 2, b"abc"));
        assert!(!sel.is_cursor(b"/w/a", 4, 2, b"abc"));
        assert!(!sel.is_cursor(b"/w/a", 3, 1, b"abc"));
        assert!(!sel.is_cursor(b"/w/a", 3, 2, b"abd"));
        let visual = RawSelection { cursor_only: false, ..sel };
        assert!(!visual.is_cursor(b"/w/a", 3, 2, b"abc"));
    }

    #[test]
    fn charwise_selection_across_lines() {
        let sel =
            RawSelection {
                path: "/a".into(), cursor_only: false, regions: vec![region(0, 2, 1, 0, &["é b", "→c"])]
            };
        let p = selection_payload(&sel);
        assert_eq!(p["selections"][0]["content"], " b\n");
        assert_eq!(p["selections"][0]["range"]["startCharacter"], 1);
        assert_eq!(p["selections"][0]["range"]["endCharacter"], 0);
        let sel =
            RawSelection { path: "/a".into(), cursor_only: false, regions: vec![region(0, 0, 1, 4, &["ab", "→c"])] };
        assert_eq!(selection_payload(&sel)["selections"][0]["content"], "ab\n→c");
        assert_eq!(selection_payload(&sel)["selections"][0]["range"]["endCharacter"], 2);
    }

    #[test]
    fn quick_reference_forms() {
        let sel = RawSelection {
            path: "/a".into(),
            cursor_only: false,
            regions: vec![region(0, 1, 0, 3, &["abcd"]), region(1, 1, 1, 3, &["efgh"])],
        };
        assert_eq!(
            selection_changed_payload(&sel),
            json!({"path":"/a","start":{"line":0,"col":1},"end":{"line":1,"col":3}})
        );
        assert_eq!(visible_files_changed_payload(&["/a".into()]), json!({"files":["/a"]}));
        assert_eq!(visible_files_payload(&["/a#b".into()]), json!({"uris":["file:///a%23b"]}));
    }

    #[test]
    fn frames_are_encoded_once_per_dialect() {
        let p = VisibleFilesSnapshot::new(vec!["/x".into()]);
        let a = visible_files_frame(&p, Dialect::Flat);
        assert!(Arc::ptr_eq(&a, &visible_files_frame(&p, Dialect::Flat)));
        assert!(visible_files_frame(&p, Dialect::Wrapped).contains("visibleFilesChanged"));
        assert!(a.contains("visibleFilesDidChange"));
    }
}
