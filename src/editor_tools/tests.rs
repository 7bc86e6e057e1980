//! The tools over an in-memory editor (`core::fake_editor`) and real files
//! in a temporary workspace: what the agent is told, what reaches the
//! editor and the disk.

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::core::editor::RawDiagnostic;
use crate::core::fake_editor::{unix_format, Call, FakeEditor};
use crate::core::review::Decision;
use crate::core::selection::{RawRegion, RawSelection};
use crate::serve::options::ServerOptions;
use crate::testutil::TempDir;

struct Setup {
    hub: Hub,
    editor: Arc<FakeEditor>,
    dir: TempDir,
}

fn setup(tag: &str) -> Setup {
    let dir = TempDir::new(tag);
    let editor = Arc::new(FakeEditor::new(true));
    let options = ServerOptions { workspace_folders: vec![dir.0.to_string_lossy().into_owned()], ..Default::default() };
    Setup { hub: Hub::new(options, editor.clone()), editor, dir }
}

impl Setup {
    async fn call(&self, name: &str, args: Value) -> Outcome {
        let cx = Context { hub: &self.hub, owner: Owner::new("MCP"), client: "test-client" };
        let args = args.as_object().cloned().unwrap_or_default();
        call(name, &args, &cx, &mut Held::default()).await.expect("a known tool")
    }

    async fn json(&self, name: &str, args: Value) -> Value {
        match self.call(name, args).await {
            Ok(Answer::Json(v)) => v,
            other => panic!("{name}: {other:?}"),
        }
    }

    async fn refused(&self, name: &str, args: Value) -> String {
        let why = self.call(name, args).await.expect_err("refused").to_string();
        assert!(!why.contains('\n'), "one line: {why}");
        why
    }

    fn file(&self, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = self.dir.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

#[tokio::test]
async fn read_file_gives_the_buffer_with_its_unsaved_text_or_the_disk() {
    let s = setup("tools-read");
    let a = s.file("a.txt", b"on disk\n");
    let b = s.file("b.txt", b"one\r\ntwo\r\n");
    s.editor.open(&a, &["typed", "not saved"], true, unix_format());
    s.hub.state.loaded_buffers.set(vec![a.clone()]);
    assert_eq!(s.call("read_file", json!({ "path": a })).await.unwrap(), Answer::Text("typed\nnot saved\n".into()));
    // Relative to the workspace; the file's own line breaks.
    assert_eq!(s.call("read_file", json!({ "path": "b.txt" })).await.unwrap(), Answer::Text("one\r\ntwo\r\n".into()));
    let uri = crate::core::uri::path_to_file_uri(&b);
    assert_eq!(s.call("read_file", json!({ "path": uri })).await.unwrap(), Answer::Text("one\r\ntwo\r\n".into()));
}

#[tokio::test]
async fn paths_outside_the_workspace_special_files_and_bad_arguments_are_refused_in_one_line() {
    let s = setup("tools-refused");
    let outside = TempDir::new("tools-outside");
    let secret = outside.0.join("secret.txt");
    std::fs::write(&secret, b"secret\n").unwrap();
    for path in
        [secret.to_string_lossy().into_owned(), "../x".into(), "/proc/self/pagemap".into(), "/etc/passwd".into()]
    {
        let why = s.refused("read_file", json!({ "path": path })).await;
        assert!(why.contains("is outside the workspace"), "{path}: {why}");
    }
    // A link inside the workspace to a file outside it.
    std::os::unix::fs::symlink(&secret, s.dir.0.join("link")).unwrap();
    let why = s.refused("read_file", json!({ "path": "link" })).await;
    assert!(why.contains("outside the workspace") && why.contains("secret.txt"), "{why}");
    let fifo = s.dir.0.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for tool in ["read_file", "open_file", "propose_edit"] {
        let why = s.refused(tool, json!({ "path": "pipe", "newText": "x" })).await;
        assert!(why.contains("FIFO"), "{tool}: {why}");
    }
    let huge = "a/".repeat(1 << 20);
    assert!(s.refused("read_file", json!({ "path": huge })).await.contains("longer than any file's"));
    assert!(s.refused("read_file", json!({})).await.contains("path is required"));
    assert!(s.refused("read_file", json!({ "path": 3 })).await.contains("path must be a string"));
    assert!(s.refused("open_file", json!({ "path": ".", "line": 0 })).await.contains("positive integer"));
    assert!(s.refused("open_file", json!({ "path": ".", "column": 2 })).await.contains("line is required"));
    assert!(s.editor.calls().iter().all(|c| !matches!(c, Call::OpenFile(..) | Call::Propose(..))));
    let cx = Context { hub: &s.hub, owner: Owner::new("MCP"), client: "" };
    assert!(call("no_such_tool", &Map::new(), &cx, &mut Held::default()).await.is_none());
}

#[tokio::test]
async fn the_selection_is_1_based_in_utf16_columns_and_the_latest_range_is_kept() {
    let s = setup("tools-selection");
    assert!(matches!(s.call("get_selection", json!({})).await, Ok(Answer::Text(t)) if t.contains("no selection")));
    let range = RawSelection {
        path: "/w/a.rs".into(),
        cursor_only: false,
        // "é😀x": byte 6 (before x) is UTF-16 column 3, so 4 1-based.
        regions: vec![RawRegion::of(1, 0, 2, 6, &["first", "é😀x"])],
    };
    s.hub.state.publish_selection(range);
    let got = s.json("get_selection", json!({})).await;
    assert_eq!(
        got,
        json!({ "path": "/w/a.rs", "text": "first\né😀", "start": { "line": 2, "column": 1 },
                "end": { "line": 3, "column": 4 }, "isEmpty": false })
    );
    s.hub.state.publish_cursor(b"/w/b.rs", 0, 1, b"xy");
    let cursor = s.json("get_selection", json!({})).await;
    assert_eq!((cursor["isEmpty"].clone(), cursor["start"].clone()), (json!(true), json!({ "line": 1, "column": 2 })));
    assert_eq!(s.json("get_selection", json!({ "latest": true })).await["text"], "first\né😀");
}

#[tokio::test]
async fn open_files_folders_and_diagnostics() {
    let s = setup("tools-state");
    let a = s.file("a.rs", b"fn x() {}\n");
    s.editor.open(&a, &["fn x() {}"], true, unix_format());
    s.hub.state.publish_visible_files(vec![a.clone()]);
    let files = s.json("get_open_files", json!({})).await;
    assert_eq!(files["files"][0]["path"], a.to_string_lossy().as_ref());
    assert_eq!(
        (files["files"][0]["modified"].clone(), files["files"][0]["visible"].clone()),
        (json!(true), json!(true))
    );
    let folders = s.json("get_workspace_folders", json!({})).await;
    assert_eq!(folders, json!({ "folders": [s.dir.0.to_string_lossy()] }));
    s.editor.set_diagnostics(vec![RawDiagnostic {
        path: a.clone(),
        lnum: 0,
        col: 3,
        end_lnum: 0,
        end_col: 4,
        severity: 1,
        message: "bad".into(),
        source: Some("rustc".into()),
        line: b"fn x() {}".to_vec(),
        end_line: b"fn x() {}".to_vec(),
        line_offset: 0,
        end_line_offset: 0,
    }]);
    let d = s.json("get_diagnostics", json!({ "path": "a.rs" })).await;
    assert_eq!(
        d["files"][0]["diagnostics"][0],
        json!({ "severity": "error", "message": "bad", "source": "rustc",
                "start": { "line": 1, "column": 4 }, "end": { "line": 1, "column": 5 } })
    );
    assert!(s.editor.calls().iter().any(|c| matches!(c, Call::Diagnostics(Some(p)) if p[0] == a)));
}

#[tokio::test]
async fn open_file_shows_the_file_at_the_line_as_amps_open_uri_does() {
    let s = setup("tools-open");
    let a = s.file("a.rs", b"one\ntwo\n");
    let told = s.call("open_file", json!({ "path": "a.rs", "line": 2, "column": 3 })).await.unwrap();
    assert_eq!(told, Answer::Text(format!("Opened {} in Neovim at line 2.", a.display())));
    let sel = crate::core::uri::LineSelection { start_line: 2, start_col: Some(3), end_line: None, end_col: None };
    assert!(s.editor.calls().contains(&Call::OpenFile(a.clone(), Some(sel))));
    let missing = s.refused("open_file", json!({ "path": "none.rs" })).await;
    assert!(missing.contains("file not found"), "{missing}");
}

#[tokio::test]
async fn an_accepted_edit_is_written_with_the_users_changes_and_the_files_format() {
    let s = setup("tools-edit");
    let f = s.file("a.txt", b"one\r\ntwo\r\n");
    // The model writes "\n"; the user changes the proposal before :w.
    s.editor.decide(vec![Decision::Accepted("one\r\nTWO\r\nmine\r\n".into())]);
    let got = s.json("propose_edit", json!({ "path": "a.txt", "newText": "one\nTWO\n", "description": "caps" })).await;
    assert_eq!(got["decision"], "accepted");
    assert_eq!((got["changedByUser"].clone(), got["written"].clone()), (json!(true), json!(true)));
    assert_eq!(got["text"], "one\r\nTWO\r\nmine\r\n");
    assert_eq!(std::fs::read(&f).unwrap(), b"one\r\nTWO\r\nmine\r\n");
    let proposed = s.editor.calls().into_iter().find_map(|c| match c {
        Call::Propose(name, text) => Some((name, text)),
        _ => None,
    });
    let (name, text) = proposed.unwrap();
    assert_eq!(text, "one\r\nTWO\r\n", "shown with the file's line breaks");
    assert!(name.starts_with("a.txt (test-client edit ") && name.ends_with(": caps)"), "{name}");
}

#[tokio::test]
async fn a_rejected_edit_or_a_patch_that_does_not_apply_changes_nothing() {
    let s = setup("tools-reject");
    let f = s.file("a.txt", b"a\nb\nc\n");
    s.editor.decide(vec![Decision::Rejected, Decision::Accepted("a\nB\nc\n".into())]);
    let got = s.json("propose_edit", json!({ "path": "a.txt", "newText": "x\n" })).await;
    assert_eq!(got["decision"], "rejected");
    assert_eq!(std::fs::read(&f).unwrap(), b"a\nb\nc\n");
    let why = s.refused("propose_edit", json!({ "path": "a.txt", "patch": "@@ -1 +1 @@\n-zzz\n+y\n" })).await;
    assert!(why.starts_with("cannot apply the patch to ") && why.contains("does not match"), "{why}");
    assert!(s.refused("propose_edit", json!({ "path": "a.txt" })).await.contains("give newText"));
    assert!(s
        .refused("propose_edit", json!({ "path": "a.txt", "newText": "", "patch": "" }))
        .await
        .contains("not both"));
    let same = s.json("propose_edit", json!({ "path": "a.txt", "newText": "a\nb\nc\n" })).await;
    assert_eq!(same["decision"], "unchanged");
    // A patch, accepted as proposed.
    let got = s.json("propose_edit", json!({ "path": "a.txt", "patch": "@@ -2 +2 @@\n-b\n+B\n" })).await;
    assert_eq!((got["decision"].clone(), got["changedByUser"].clone()), (json!("accepted"), json!(false)));
    assert_eq!(std::fs::read(&f).unwrap(), b"a\nB\nc\n");
    assert_eq!(s.editor.calls().iter().filter(|c| matches!(c, Call::Propose(..))).count(), 2);
}

#[tokio::test]
async fn a_review_nobody_decides_is_closed_at_the_timeout_and_nothing_is_written() {
    let mut s = setup("tools-timeout");
    let f = s.file("a.txt", b"a\n");
    s.hub = Hub::new(
        ServerOptions {
            workspace_folders: vec![s.dir.0.to_string_lossy().into_owned()],
            review_timeout_ms: 50,
            ..Default::default()
        },
        s.editor.clone(),
    );
    s.editor.hold_reviews();
    let why = s.refused("propose_edit", json!({ "path": "a.txt", "newText": "b\n" })).await;
    assert!(why.contains("did not review the edit") && why.contains("review.timeout_ms"), "{why}");
    assert!(s
        .editor
        .calls()
        .iter()
        .any(|c| matches!(c, Call::CloseReview(_, crate::core::review::ReviewEnd::TimedOut))));
    assert_eq!(std::fs::read(&f).unwrap(), b"a\n");
}
