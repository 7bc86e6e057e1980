//! A file an agent proposes that does not exist yet, written once the user
//! accepts it, as Neovim's `:w ++p` writes a new buffer: its lines joined
//! by the end of line of the first of 'fileformats' (the 'fileformat' a
//! new buffer gets), one after the last line ('fixendofline'), nothing at
//! all for an empty text; missing directories made first (mode 0755, as
//! `++p` makes them); the file 0666 less the umask, fsynced ('fsync').
//! Never over a file that appeared in the meantime (`O_EXCL`).

use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::filetext::{self, LineEnd};

/// Why a new file was not written (nothing of it is left behind).
#[derive(Debug, thiserror::Error)]
pub enum NewFileError {
    #[error("cannot make the directory {}: {source}", dir.display())]
    Directory { dir: PathBuf, source: io::Error },
    #[error("{} was made by someone else during the review: nothing was written; read it", path.display())]
    MadeMeanwhile { path: PathBuf },
    #[error("cannot create {}: {source}", path.display())]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error("the write of {} did not finish: {why}", path.display())]
    Unfinished { path: PathBuf, why: String },
}

/// The bytes `:w` writes for a new buffer holding `text` (lines split at
/// "\n"; a "\r" inside a line is the line's own, as Neovim keeps it).
pub fn bytes_of(text: &str, eol: LineEnd) -> Vec<u8> {
    if text.is_empty() {
        return Vec::new();
    }
    let end = eol.as_str().as_bytes();
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut out = Vec::with_capacity(text.len() + text.len() / 16 + 2);
    for (i, line) in body.split('\n').enumerate() {
        if i > 0 {
            out.extend_from_slice(end);
        }
        out.extend_from_slice(line.as_bytes());
    }
    out.extend_from_slice(end);
    out
}

/// Creates `path` with `text` as `:w ++p` would write it now (the current
/// 'fileformats'); the number of bytes written. Off the main thread.
pub async fn create(path: &Path, text: &str) -> Result<u64, NewFileError> {
    let eol = filetext::read_options().fileformats.first().copied().unwrap_or(LineEnd::Unix);
    let bytes = bytes_of(text, eol);
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || write_new(&owned, &bytes))
        .await
        .map_err(|e| NewFileError::Unfinished { path: path.to_path_buf(), why: e.to_string() })?
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<u64, NewFileError> {
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|source| NewFileError::Directory { dir: dir.to_path_buf(), source })?;
    }
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o666).open(path).map_err(
        |source| match source.kind() {
            io::ErrorKind::AlreadyExists => NewFileError::MadeMeanwhile { path: path.to_path_buf() },
            _ => NewFileError::Create { path: path.to_path_buf(), source },
        },
    )?;
    if let Err(source) = file.write_all(bytes).and_then(|()| file.sync_all()) {
        // Not a half-written file left behind as if it were the text.
        let _ = std::fs::remove_file(path);
        return Err(NewFileError::Write { path: path.to_path_buf(), source });
    }
    Ok(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_are_those_w_writes_for_a_new_buffer() {
        assert_eq!(bytes_of("", LineEnd::Unix), b"");
        assert_eq!(bytes_of("a", LineEnd::Unix), b"a\n", "'fixendofline'");
        assert_eq!(bytes_of("a\nb\n", LineEnd::Unix), b"a\nb\n");
        assert_eq!(bytes_of("a\n\n", LineEnd::Unix), b"a\n\n", "an empty last line is a line");
        assert_eq!(bytes_of("\n", LineEnd::Unix), b"\n");
        assert_eq!(bytes_of("a\nb", LineEnd::Dos), b"a\r\nb\r\n");
        assert_eq!(bytes_of("a\r\nb\n", LineEnd::Unix), b"a\r\nb\n", "a \\r in a line is kept");
        assert_eq!(bytes_of("a\nb\n", LineEnd::Mac), b"a\rb\r");
        assert_eq!(bytes_of("é\n", LineEnd::Unix), "é\n".as_bytes());
    }

    #[test]
    fn directories_are_made_and_an_existing_file_is_never_replaced() {
        let dir = crate::testutil::TempDir::new("new-file");
        let file = dir.0.join("a/b/new.txt");
        assert_eq!(write_new(&file, b"x\n").unwrap(), 2);
        assert_eq!(std::fs::read(&file).unwrap(), b"x\n");
        let err = write_new(&file, b"y\n").unwrap_err().to_string();
        assert!(
            err.ends_with("new.txt was made by someone else during the review: nothing was written; read it"),
            "{err}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"x\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        // SAFETY: umask read and put back at once (tests in this process do
        // not create files with it changed in between: it is set to itself).
        let umask = unsafe {
            let old = libc::umask(0o022);
            libc::umask(old);
            old
        };
        assert_eq!(mode, 0o666 & !(umask as u32));
    }
}
