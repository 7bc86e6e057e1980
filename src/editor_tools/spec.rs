//! What each tool is, for the agent's model: its name, a description that
//! says what it does and in what units, and its arguments as JSON Schema.
//! Plain data: each transport encodes it its own way (MCP's `tools/list`).
//!
//! Units everywhere: lines and columns are 1-based; columns count UTF-16
//! code units, as LSP and every editor protocol do (one per character for
//! most text); a range's end is the position just after its last character.

use serde_json::{json, Value};

pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// Properties of the argument object, and which are required.
    pub properties: fn() -> Value,
    pub required: &'static [&'static str],
    /// Reads only: changes nothing in the editor or on disk.
    pub read_only: bool,
}

impl Tool {
    /// The argument object's JSON Schema.
    pub fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": (self.properties)(),
            "required": self.required,
            "additionalProperties": false,
        })
    }
}

fn none() -> Value {
    json!({})
}

fn path(what: &str) -> Value {
    json!({ "type": "string", "description": what })
}

fn line(what: &str) -> Value {
    json!({ "type": "integer", "minimum": 1, "description": what })
}

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "get_selection",
        title: "Selection in Neovim",
        description: "The text the user selected in Neovim (or the cursor position when nothing is selected): the file, the text, and its range (1-based lines and columns, end exclusive). With latest=true: the last selection made, even if the cursor has moved since (e.g. to the agent's terminal).",
        properties: || json!({ "latest": { "type": "boolean", "description": "the last non-empty selection instead of the current one" } }),
        required: &[],
        read_only: true,
    },
    Tool {
        name: "get_open_files",
        title: "Open files in Neovim",
        description: "The files open in the user's Neovim: path, whether it is the current one, shown in a window, or has unsaved changes, and its filetype.",
        properties: none,
        required: &[],
        read_only: true,
    },
    Tool {
        name: "get_workspace_folders",
        title: "Workspace folders",
        description: "The folders of the user's Neovim workspace (its working directory). Every path argument must be inside one; relative paths are relative to the first.",
        properties: none,
        required: &[],
        read_only: true,
    },
    Tool {
        name: "read_file",
        title: "Read a file as Neovim holds it",
        description: "The text of a file as the user's Neovim holds it, unsaved changes included (the file on disk when no buffer has it).",
        properties: || json!({ "path": path("the file: absolute, or relative to the workspace") }),
        required: &["path"],
        read_only: true,
    },
    Tool {
        name: "get_diagnostics",
        title: "Diagnostics",
        description: "The diagnostics (errors, warnings, hints from LSP servers and linters) Neovim has, of one file or of every open file: severity, message, source and range (1-based lines and columns).",
        properties: || json!({ "path": path("a file or a folder; omit it for every file") }),
        required: &[],
        read_only: true,
    },
    Tool {
        name: "open_file",
        title: "Open a file in Neovim",
        description: "Shows a file in the user's Neovim, at a line (and column), or selects a range. The user sees it at once: use it to point at something, not to read (read_file does that).",
        properties: || json!({
            "path": path("the file (or folder): absolute, or relative to the workspace"),
            "line": line("the line to show (1-based)"),
            "column": line("the column on that line (1-based)"),
            "endLine": line("selects from line to endLine"),
            "endColumn": line("the column on endLine"),
        }),
        required: &["path"],
        read_only: false,
    },
    Tool {
        name: "propose_edit",
        title: "Propose an edit for the user's review",
        description: "Proposes a new text for a file: the user reviews it in Neovim hunk by hunk, may change it, and accepts (:w) or rejects (:q). The call waits for that decision. When accepted, the file is written as Neovim's :w writes it (its encoding, line endings and BOM kept) and the answer carries the final text, which includes the user's own changes. Give either newText (the whole new text) or patch (a unified diff of this file, as diff -u or git diff write it). A path where no file exists yet proposes a new file (made with its missing directories once accepted).",
        properties: || json!({
            "path": path("the file to edit or make: absolute, or relative to the workspace"),
            "newText": { "type": "string", "description": "the whole new text of the file" },
            "patch": { "type": "string", "description": "a unified diff of this one file (hunks starting with @@)" },
            "description": { "type": "string", "description": "what the edit does, in a few words, shown to the user" },
        }),
        required: &["path"],
        read_only: false,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_naming_its_required_arguments() {
        for tool in TOOLS {
            let schema = tool.input_schema();
            assert_eq!(schema["type"], "object", "{}", tool.name);
            for r in tool.required {
                assert!(schema["properties"].get(*r).is_some(), "{}: {r}", tool.name);
            }
            assert!(!tool.description.contains('\n'), "{}", tool.name);
        }
        let names: Vec<_> = TOOLS.iter().map(|t| t.name).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names, unique);
    }
}
