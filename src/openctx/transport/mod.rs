//! How the OpenCtx client reaches providers: HTTP endpoints ([`http`]), JS
//! modules run by one long-lived Node process ([`node`]) and MCP servers spoken
//! to over stdio ([`mcp`]).
//!
//! Every transport is cheap to clone (an `Arc` inside), `Send + Sync`, and
//! cancel-safe: the caller applies its own deadline with `tokio::time::timeout`,
//! and a call future dropped at any point leaves the transport usable. The
//! child-process transports never write to the child from the caller's future:
//! a writer task owns the child's stdin, so a dropped call cannot leave half a
//! line behind; its pending slot is removed by a drop guard and a late answer is
//! ignored.
//!
//! Shared by them: how a call fails and how an answer is read ([`error`]), the
//! child process that speaks newline-delimited JSON with numeric ids
//! ([`child`], used by the Node host and MCP), and its length-capped line
//! reader ([`lines`]).

mod child;
mod error;
pub mod http;
mod lines;
pub mod mcp;
pub mod node;

pub(crate) use child::{ChildConn, ChildSpec, RequestError};
pub use error::ProviderError;
pub(crate) use error::{error_chain, outcome_of};

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::{Path, PathBuf};

    /// The repository root, also when these files are `#[path]`-included by
    /// another crate (then `file!()` is absolute).
    pub(crate) fn repo_root() -> PathBuf {
        let file = Path::new(file!());
        if file.is_absolute() {
            file.ancestors().nth(4).expect("src/openctx/transport/mod.rs").to_path_buf()
        } else {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        }
    }

    /// SIGKILL to one process (a child the test's transport spawned).
    pub(crate) fn kill9(pid: u32) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}
