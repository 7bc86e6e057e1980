//! The payloads in VS Code's shapes that several attach protocols carry
//! (Claude Code's `selection_changed` and `getDiagnostics`, Copilot CLI's
//! `selection_changed`, `get_selection` and `get_diagnostics`): positions
//! are 0-based lines and UTF-16 characters (VS Code's `Position`), files
//! are paths with their `file://` URIs. Plain data, no I/O.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::core::editor::RawDiagnostic;
use crate::core::published::SelectionSnapshot;
use crate::core::selection::RawSelection;
use crate::core::uri::path_to_file_uri;

/// How a client reads the line numbers of these shapes: from 0 as VS Code
/// counts them (Claude Code, Copilot CLI); OpenCode 1.18, a client of
/// Claude's protocol, takes the same fields as 1-based (it shows
/// `#start-end` and reads the mentioned file from `lineStart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lines {
    #[default]
    FromZero,
    FromOne,
}

impl Lines {
    /// The wire number of 0-based line `line`.
    pub fn of(self, line: usize) -> usize {
        match self {
            Lines::FromZero => line,
            Lines::FromOne => line + 1,
        }
    }
}

/// A 0-based line and UTF-16 character.
pub fn position(line: usize, character: usize) -> Value {
    json!({ "line": line, "character": character })
}

/// The selection as `selection_changed` carries it: `{text, filePath,
/// fileUrl, selection: {start, end, isEmpty}}`; the cursor is an empty
/// selection with empty text; a blockwise selection's rows are joined
/// with line breaks.
pub fn selection(sel: &RawSelection) -> Value {
    selection_for(sel, Lines::FromZero)
}

/// [`selection`] with its lines counted as `lines` says.
pub fn selection_for(sel: &RawSelection, lines: Lines) -> Value {
    let first = sel.regions.first();
    let last = sel.regions.last();
    let (start, end) = match (first, last) {
        (Some(f), Some(l)) => {
            let (s, _) = f.utf16_range();
            let (_, e) = l.utf16_range();
            (position(lines.of(f.start_line), s), position(lines.of(l.end_line), e))
        }
        _ => (position(0, 0), position(0, 0)),
    };
    let text = if sel.cursor_only {
        String::new()
    } else {
        sel.regions.iter().map(|r| r.content(false)).collect::<Vec<_>>().join("\n")
    };
    json!({
        "text": text,
        "filePath": sel.path.to_string_lossy(),
        "fileUrl": path_to_file_uri(&sel.path),
        "selection": { "start": start, "end": end, "isEmpty": text.is_empty() },
    })
}

/// The `selection_changed` notification of a published selection, encoded
/// once per snapshot and way of counting lines for every client that sends
/// it (Claude Code and Copilot CLI share the 0-based one).
pub fn selection_changed(snapshot: &SelectionSnapshot, lines: Lines) -> Arc<str> {
    let key = match lines {
        Lines::FromZero => "vscode/selection_changed",
        Lines::FromOne => "vscode/selection_changed/from-1",
    };
    snapshot.encoded(key, |raw| crate::mcp::notification("selection_changed", &selection_for(raw, lines)))
}

/// Diagnostic severity names as VS Code spells them.
pub fn severity_name(severity: u8) -> &'static str {
    match severity {
        1 => "Error",
        2 => "Warning",
        3 => "Information",
        _ => "Hint",
    }
}

/// Diagnostics grouped per file, in the order the files first appear:
/// `[{uri, diagnostics: [{message, severity, range, source}]}]`.
pub fn diagnostics(found: Vec<RawDiagnostic>) -> Value {
    let mut files: Vec<(PathBuf, Vec<Value>)> = Vec::new();
    for d in found {
        let (start, end) = (d.utf16_start(), d.utf16_end());
        let item = json!({
            "message": d.message,
            "severity": severity_name(d.severity),
            "range": { "start": position(start.0, start.1), "end": position(end.0, end.1) },
            "source": d.source,
        });
        match files.iter_mut().find(|(p, _)| *p == d.path) {
            Some((_, list)) => list.push(item),
            None => files.push((d.path, vec![item])),
        }
    }
    let list: Vec<Value> = files
        .into_iter()
        .map(|(path, diagnostics)| json!({ "uri": path_to_file_uri(&path), "diagnostics": diagnostics }))
        .collect();
    Value::Array(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::selection::RawRegion;

    fn region(sl: usize, sc: usize, el: usize, ec: usize, lines: &[&str]) -> RawRegion {
        RawRegion::of(sl, sc, el, ec, lines)
    }

    #[test]
    fn visual_selection_is_0_based_lines_and_utf16_characters() {
        // "é→😀x": byte 9 is UTF-16 character 4.
        let sel = RawSelection {
            path: "/w/a b.rs".into(),
            cursor_only: false,
            regions: vec![region(1, 9, 2, 1, &["é→😀x", "yz"])],
        };
        let v = selection(&sel);
        assert_eq!(v["text"], "x\ny");
        assert_eq!(v["filePath"], "/w/a b.rs");
        assert_eq!(v["fileUrl"], "file:///w/a%20b.rs");
        assert_eq!(
            v["selection"],
            json!({"start": {"line": 1, "character": 4}, "end": {"line": 2, "character": 1}, "isEmpty": false})
        );
        // OpenCode counts the same lines from 1; the rest is the same.
        let one = selection_for(&sel, Lines::FromOne);
        assert_eq!(
            one["selection"],
            json!({"start": {"line": 2, "character": 4}, "end": {"line": 3, "character": 1}, "isEmpty": false})
        );
        assert_eq!((&one["text"], &one["filePath"]), (&v["text"], &v["filePath"]));
    }

    #[test]
    fn the_cursor_is_an_empty_selection_and_blocks_join_rows() {
        let sel = RawSelection::cursor("/a".into(), 3, 2, b"abcd".to_vec());
        let v = selection(&sel);
        assert_eq!(v["text"], "");
        assert_eq!(v["selection"]["isEmpty"], true);
        assert_eq!(v["selection"]["start"], json!({"line": 3, "character": 2}));
        let block = RawSelection {
            path: "/a".into(),
            cursor_only: false,
            regions: vec![region(0, 1, 0, 3, &["abcd"]), region(1, 1, 1, 3, &["efgh"])],
        };
        let v = selection(&block);
        assert_eq!(v["text"], "bc\nfg");
        assert_eq!(v["selection"]["end"], json!({"line": 1, "character": 3}));
    }

    #[test]
    fn selection_changed_is_encoded_once_per_way_of_counting_lines() {
        let sel = RawSelection { path: "/a".into(), cursor_only: false, regions: vec![region(2, 0, 2, 1, &["x"])] };
        let snapshot = SelectionSnapshot::new(sel);
        let zero = selection_changed(&snapshot, Lines::FromZero);
        let one = selection_changed(&snapshot, Lines::FromOne);
        // The same text object each time: encoded once, shared by every client.
        assert!(Arc::ptr_eq(&zero, &selection_changed(&snapshot, Lines::FromZero)));
        assert!(Arc::ptr_eq(&one, &selection_changed(&snapshot, Lines::FromOne)));
        let line = |text: &str| {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(v["method"], "selection_changed");
            v["params"]["selection"]["start"]["line"].as_u64().unwrap()
        };
        assert_eq!((line(&zero), line(&one)), (2, 3));
    }

    #[test]
    fn diagnostics_are_grouped_per_file_in_utf16_units() {
        let raw = |path: &str, col: usize, end_col: usize, severity: u8| RawDiagnostic {
            path: path.into(),
            lnum: 0,
            col,
            end_lnum: 0,
            end_col,
            severity,
            message: format!("m{severity}"),
            source: (severity == 1).then(|| "rustc".into()),
            line: "fn é() {}".into(),
            end_line: "fn é() {}".into(),
            line_offset: 0,
            end_line_offset: 0,
        };
        let v = diagnostics(vec![raw("/w/a.rs", 3, 5, 1), raw("/w/b.rs", 0, 1, 2), raw("/w/a.rs", 0, 0, 4)]);
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[0]["uri"], "file:///w/a.rs");
        assert_eq!(
            v[0]["diagnostics"][0],
            json!({"message": "m1", "severity": "Error", "source": "rustc",
                   "range": {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}}})
        );
        assert_eq!(v[0]["diagnostics"][1]["severity"], "Hint");
        assert_eq!(v[1]["diagnostics"][0]["severity"], "Warning");
        assert_eq!([1, 2, 3, 4].map(severity_name), ["Error", "Warning", "Information", "Hint"]);
    }
}
