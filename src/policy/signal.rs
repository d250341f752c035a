//! Signals as values: a number with a conventional name, parsed the way `kill(1)` and
//! `timeout(1)` accept them.

use std::fmt;
use std::str::FromStr;

/// A signal number on this platform, such as 15 for SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signal(i32);

impl Signal {
    pub const INT: Signal = Signal(nix::libc::SIGINT);
    pub const TERM: Signal = Signal(nix::libc::SIGTERM);
    pub const KILL: Signal = Signal(nix::libc::SIGKILL);
    pub const PIPE: Signal = Signal(nix::libc::SIGPIPE);
    pub const HUP: Signal = Signal(nix::libc::SIGHUP);
    pub const QUIT: Signal = Signal(nix::libc::SIGQUIT);
    pub const CONT: Signal = Signal(nix::libc::SIGCONT);
    pub const USR1: Signal = Signal(nix::libc::SIGUSR1);
    pub const USR2: Signal = Signal(nix::libc::SIGUSR2);
    pub const TSTP: Signal = Signal(nix::libc::SIGTSTP);

    /// The signal with this number, if the platform has one.
    pub fn from_number(n: i32) -> Option<Signal> {
        (1..=max_signal()).contains(&n).then_some(Signal(n))
    }

    /// Parses a signal name (`TERM`, `SIGTERM`, `sigterm`). Numbers are not names.
    pub fn from_name(name: &str) -> Option<Signal> {
        let upper = name.to_ascii_uppercase();
        let full = if upper.starts_with("SIG") {
            upper
        } else {
            format!("SIG{upper}")
        };
        nix::sys::signal::Signal::from_str(&full)
            .ok()
            .map(|s| Signal(s as i32))
    }

    pub fn number(self) -> i32 {
        self.0
    }

    /// The name without the `SIG` prefix (`TERM`), or the number for signals without a name
    /// (real-time signals).
    pub fn name(self) -> String {
        match nix::sys::signal::Signal::try_from(self.0) {
            Ok(s) => s.as_str().trim_start_matches("SIG").to_string(),
            Err(_) => self.0.to_string(),
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match nix::sys::signal::Signal::try_from(self.0) {
            Ok(s) => f.write_str(s.as_str()),
            Err(_) => write!(f, "signal {}", self.0),
        }
    }
}

impl FromStr for Signal {
    type Err = String;

    /// A name with or without `SIG`, in any case, or a number.
    fn from_str(s: &str) -> Result<Signal, String> {
        let s = s.trim();
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return s
                .parse::<i32>()
                .ok()
                .and_then(Signal::from_number)
                .ok_or_else(|| format!("no signal has the number {s}"));
        }
        Signal::from_name(s).ok_or_else(|| format!("unknown signal name '{s}'"))
    }
}

#[cfg(target_os = "linux")]
fn max_signal() -> i32 {
    nix::libc::SIGRTMAX()
}

#[cfg(not(target_os = "linux"))]
fn max_signal() -> i32 {
    31
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_or_without_sig_in_any_case() {
        for s in ["TERM", "SIGTERM", "sigterm", "term", "15"] {
            assert_eq!(s.parse::<Signal>(), Ok(Signal::TERM), "{s}");
        }
        assert_eq!("kill".parse::<Signal>(), Ok(Signal::KILL));
    }

    #[test]
    fn unknown_names_and_numbers_are_rejected() {
        assert!("SIGFOO".parse::<Signal>().is_err());
        assert!("0".parse::<Signal>().is_err());
        assert!("999".parse::<Signal>().is_err());
        assert!("".parse::<Signal>().is_err());
        assert!("-9".parse::<Signal>().is_err());
    }

    #[test]
    fn display_uses_the_conventional_name() {
        assert_eq!(Signal::TERM.to_string(), "SIGTERM");
        assert_eq!(Signal::PIPE.name(), "PIPE");
    }
}
