//! Paths agents name: absolute (or relative to the first workspace
//! folder, or `file://` URIs), lexically normalised, and inside the
//! workspace: the file they reach, symbolic links followed, must be under
//! one of the workspace folders (their real paths). Everything else is
//! refused in one line before any file is opened.

use std::path::{Component, Path, PathBuf};

use super::error::PathError;

/// A longer path is refused (Linux's `PATH_MAX`): no file has one.
pub const MAX_PATH_BYTES: usize = 4096;

/// The absolute, normalised path agents mean by `raw`, if it is inside the
/// workspace (`folders`).
pub async fn resolve(raw: &str, folders: &[String]) -> Result<PathBuf, PathError> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong { len: raw.len() });
    }
    if raw.contains('\0') {
        return Err(PathError::Nul);
    }
    let path = if raw.starts_with("file://") {
        crate::core::uri::file_uri_to_path(raw).map_err(|source| PathError::Uri { shown: shown_str(raw), source })?
    } else {
        PathBuf::from(raw)
    };
    let base = folders.first().map_or_else(|| PathBuf::from("/"), PathBuf::from);
    let path = normalise(&if path.is_absolute() { path } else { base.join(path) });
    inside_workspace(&path, folders).await?;
    Ok(path)
}

/// `path` without `.` and `..` components (`..` removes the one before).
pub fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Refuses `path` unless the file it reaches (links followed; for a file
/// not made yet, its nearest existing directory's) is under a folder.
pub async fn inside_workspace(path: &Path, folders: &[String]) -> Result<(), PathError> {
    let real = real_path(path).await;
    for folder in folders {
        let folder = Path::new(folder);
        let real_folder = tokio::fs::canonicalize(folder).await.unwrap_or_else(|_| normalise(folder));
        if real.starts_with(&real_folder) {
            return Ok(());
        }
    }
    let reached = (real != path).then(|| shown(&real));
    Err(PathError::Outside { shown: shown(path), reached, folders: folders.to_vec() })
}

/// The real path of `path`, or of its nearest existing ancestor with the
/// rest appended.
async fn real_path(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = tokio::fs::canonicalize(&at).await {
            return rest.iter().rev().fold(real, |p: PathBuf, name| p.join(name));
        }
        match (at.file_name().map(|n| n.to_os_string()), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A path in a message: at most 200 bytes of it.
pub fn shown(path: &Path) -> String {
    shown_str(&path.to_string_lossy())
}

fn shown_str(text: &str) -> String {
    if text.len() > 200 {
        format!("{}…", crate::core::text::cut(text, 200))
    } else {
        text.to_owned()
    }
}
