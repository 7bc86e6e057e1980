//! Reading `vim.diagnostic` for `getDiagnostics`. Positions leave here as
//! Neovim's byte columns together with the lines they index; the tokio side
//! converts them to UTF-16 and builds the JSON.

use std::path::PathBuf;

use mlua::{Table, Value};

use super::{api_err, lua, lua_paths, path_from_lua};
use crate::core::editor::RawDiagnostic;

pub fn collect(under: Option<Vec<PathBuf>>) -> Result<Vec<RawDiagnostic>, String> {
    let prefixes = match &under {
        Some(paths) => Some(lua_paths(paths).map_err(|e| api_err("paths", e))?),
        None => None,
    };
    let list: Table = lua::helper("diagnostics", prefixes).map_err(|e| api_err("vim.diagnostic.get", e))?;
    let mut out = Vec::new();
    for entry in list.sequence_values::<Table>() {
        let d = entry.map_err(|e| api_err("diagnostic", e))?;
        let int = |key: &str| d.raw_get::<Option<i64>>(key).ok().flatten().unwrap_or(0).max(0) as usize;
        let bytes = |key: &str| match d.raw_get::<Value>(key) {
            Ok(Value::String(s)) => s.as_bytes().to_vec(),
            _ => Vec::new(),
        };
        let Ok(name) = d.raw_get::<mlua::String>("path") else { continue };
        out.push(RawDiagnostic {
            path: path_from_lua(&name),
            lnum: int("lnum"),
            col: int("col"),
            end_lnum: int("end_lnum"),
            end_col: int("end_col"),
            severity: int("severity").clamp(1, 4) as u8,
            message: String::from_utf8_lossy(&bytes("message")).into_owned(),
            source: match d.raw_get::<Value>("source") {
                Ok(Value::String(s)) => Some(s.to_string_lossy()),
                _ => None,
            },
            line: bytes("line"),
            end_line: bytes("end_line"),
            line_offset: int("line_offset"),
            end_line_offset: int("end_line_offset"),
        });
    }
    Ok(out)
}
