//! The pairing code on its way from the user to the connection waiting for
//! it. The gateway shows a six-digit code in the Copilot session; the user
//! types it into Neovim (`:Amp tap pair`, `vim.ui.input`): the code travels
//! through the user, never through the socket. The running tap client
//! installs its `Pairing`; the Lua command hands the code to [`submit`].

use crate::core::sync::LockExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

pub struct Pairing {
    /// The connection waits for a code (it received `auth.pairing`).
    pub waiting: AtomicBool,
    codes: mpsc::UnboundedSender<String>,
}

impl Pairing {
    pub fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<String>) {
        let (codes, rx) = mpsc::unbounded_channel();
        (Arc::new(Self { waiting: AtomicBool::new(false), codes }), rx)
    }
}

static CURRENT: Mutex<Option<Arc<Pairing>>> = Mutex::new(None);

fn current() -> std::sync::MutexGuard<'static, Option<Arc<Pairing>>> {
    CURRENT.locked()
}

/// The running tap client's (one per session).
pub fn install(pairing: Arc<Pairing>) {
    *current() = Some(pairing);
}

pub fn clear() {
    *current() = None;
}

/// Why `:Amp tap pair` did not pass the code on (the user is told).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    #[error("a pairing code is the 6 digits the Copilot session shows")]
    NotSixDigits,
    #[error("the tap gateway is not enabled (agents.tap) or the server is not running")]
    NotRunning,
    #[error("no pairing is waiting for a code (see :Amp tap)")]
    NotWaiting,
    #[error("the tap client stopped")]
    Stopped,
}

/// A pairing code as the user typed it: six digits (spaces around them allowed).
pub fn check_code(typed: &str) -> Result<String, PairingError> {
    let code = typed.trim();
    if code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()) {
        Ok(code.to_owned())
    } else {
        Err(PairingError::NotSixDigits)
    }
}

/// `:Amp tap pair`: the code to the connection waiting for it.
pub fn submit(typed: &str) -> Result<(), PairingError> {
    let code = check_code(typed)?;
    let pairing = current().clone().ok_or(PairingError::NotRunning)?;
    if !pairing.waiting.swap(false, Ordering::SeqCst) {
        return Err(PairingError::NotWaiting);
    }
    pairing.codes.send(code).map_err(|_| PairingError::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_six_digits_and_go_only_to_a_waiting_connection() {
        assert_eq!(check_code(" 012345\n"), Ok("012345".into()));
        for bad in ["12345", "1234567", "12345a", "", "١٢٣٤٥٦"] {
            assert_eq!(check_code(bad), Err(PairingError::NotSixDigits), "{bad}");
        }
        let (pairing, mut rx) = Pairing::new();
        install(pairing.clone());
        assert_eq!(submit("123456"), Err(PairingError::NotWaiting));
        assert_eq!(PairingError::NotWaiting.to_string(), "no pairing is waiting for a code (see :Amp tap)");
        pairing.waiting.store(true, Ordering::SeqCst);
        assert!(submit("12").is_err());
        assert!(pairing.waiting.load(Ordering::SeqCst), "a bad code keeps the wait");
        submit("123456").unwrap();
        assert_eq!(rx.try_recv().unwrap(), "123456");
        assert!(submit("123456").is_err(), "one code per pairing");
        clear();
        assert_eq!(submit("123456"), Err(PairingError::NotRunning));
    }
}
