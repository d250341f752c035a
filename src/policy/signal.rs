//! Signals as values: a number with a conventional name, parsed the way `kill(1)` and
//! `timeout(1)` accept them.
//!
//! Real-time signals are named as bash's `kill -l` names them: upwards from RTMIN (`RTMIN`,
//! `RTMIN+1`, …) to the middle of their range, downwards from RTMAX above it (…, `RTMAX-1`,
//! `RTMAX`). On Linux with glibc that is 34 `RTMIN` to 49 `RTMIN+15`, then 50 `RTMAX-14` to 64
//! `RTMAX`. Either form parses for any real-time signal (`RTMIN+16` is 50 too). The numbers
//! below RTMIN that the C library keeps for itself (32 and 33 with glibc) have no name: they
//! show as their number, and parse from it or from `SIG32`.

use std::fmt;
use std::str::FromStr;

/// A signal number on this platform, such as 15 for SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signal(i32);

/// Why a signal name or number was not accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignalError {
    UnknownName(String),
    UnknownNumber(String),
    OutOfRange(String),
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalError::UnknownName(name) => write!(f, "unknown signal name '{name}'"),
            SignalError::UnknownNumber(number) => write!(
                f,
                "no signal has the number {number} (signals are 1 to {})",
                max_signal()
            ),
            SignalError::OutOfRange(name) => write!(
                f,
                "no real-time signal '{name}' here: {}",
                real_time_range()
            ),
        }
    }
}

impl std::error::Error for SignalError {}

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
    pub const TTIN: Signal = Signal(nix::libc::SIGTTIN);
    pub const TTOU: Signal = Signal(nix::libc::SIGTTOU);
    pub const WINCH: Signal = Signal(nix::libc::SIGWINCH);

    /// The signal with this number, if the platform has one.
    pub fn from_number(n: i32) -> Option<Signal> {
        (1..=max_signal()).contains(&n).then_some(Signal(n))
    }

    /// Every signal of the platform, 1 to SIGRTMAX.
    pub fn all() -> impl Iterator<Item = Signal> {
        (1..=max_signal()).map(Signal)
    }

    /// Parses a signal name in any case, with or without `SIG`: `TERM`, `SIGTERM`, `sigterm`,
    /// the real-time `RTMIN`, `RTMIN+3`, `RTMAX-1`, `RTMAX`, and `SIG` with a number (`SIG32`).
    /// A bare number is not a name.
    pub fn from_name(name: &str) -> Result<Signal, SignalError> {
        let upper = name.trim().to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if bare.starts_with("RTMIN") || bare.starts_with("RTMAX") {
            return real_time(bare)
                .ok_or_else(|| SignalError::UnknownName(name.trim().into()))?
                .ok_or_else(|| SignalError::OutOfRange(name.trim().into()));
        }
        if bare.len() < upper.len() && is_number(bare) {
            return bare
                .parse()
                .ok()
                .and_then(Signal::from_number)
                .ok_or_else(|| SignalError::UnknownNumber(bare.into()));
        }
        nix::sys::signal::Signal::from_str(&format!("SIG{bare}"))
            .map(|s| Signal(s as i32))
            .map_err(|_| SignalError::UnknownName(name.trim().into()))
    }

    pub fn number(self) -> i32 {
        self.0
    }

    /// The name without the `SIG` prefix (`TERM`, `RTMIN+2`), or the number for signals without
    /// a name.
    pub fn name(self) -> String {
        if let Ok(s) = nix::sys::signal::Signal::try_from(self.0) {
            return s.as_str().trim_start_matches("SIG").to_string();
        }
        match rt_bounds() {
            Some((min, max)) if (min..=max).contains(&self.0) => {
                let (up, down) = (self.0 - min, max - self.0);
                match (up, down) {
                    (0, _) => "RTMIN".into(),
                    (_, 0) => "RTMAX".into(),
                    // As bash: the lower half counts up from RTMIN, the middle one included.
                    _ if up <= down => format!("RTMIN+{up}"),
                    _ => format!("RTMAX-{down}"),
                }
            }
            _ => self.0.to_string(),
        }
    }
}

impl fmt::Display for Signal {
    /// `SIGTERM`, `SIGRTMIN+2`, or `signal 32` for a signal without a name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name();
        if is_number(&name) {
            write!(f, "signal {name}")
        } else {
            write!(f, "SIG{name}")
        }
    }
}

impl FromStr for Signal {
    type Err = String;

    /// A name as `from_name` takes it, or a number.
    fn from_str(s: &str) -> Result<Signal, String> {
        let s = s.trim();
        if is_number(s) {
            return s
                .parse::<i32>()
                .ok()
                .and_then(Signal::from_number)
                .ok_or_else(|| SignalError::UnknownNumber(s.into()).to_string());
        }
        Signal::from_name(s).map_err(|e| e.to_string())
    }
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A real-time name without `SIG`, in upper case: `None` if it is not of the form `RTMIN`,
/// `RTMIN+N`, `RTMAX`, `RTMAX-N`; `Some(None)` if it is, but names no signal here.
fn real_time(bare: &str) -> Option<Option<Signal>> {
    let (from_min, offset) = if let Some(rest) = bare.strip_prefix("RTMIN") {
        (true, rest.strip_prefix('+'))
    } else {
        (false, bare.strip_prefix("RTMAX")?.strip_prefix('-'))
    };
    let offset = match offset {
        None if bare.len() == "RTMIN".len() => 0,
        Some(n) if is_number(n) => n.parse::<i32>().unwrap_or(i32::MAX),
        _ => return None,
    };
    let Some((min, max)) = rt_bounds() else {
        return Some(None);
    };
    let n = if from_min {
        min.saturating_add(offset)
    } else {
        max.saturating_sub(offset)
    };
    Some((min..=max).contains(&n).then_some(Signal(n)))
}

/// The range of real-time signals, for messages.
fn real_time_range() -> String {
    match rt_bounds() {
        Some((min, max)) => format!(
            "they are RTMIN ({min}) to RTMAX ({max}), so RTMIN+N and RTMAX-N take N from 0 to {}",
            max - min
        ),
        None => "this platform has none".into(),
    }
}

/// SIGRTMIN and SIGRTMAX as the C library sets them, which may differ from the kernel's.
#[cfg(target_os = "linux")]
fn rt_bounds() -> Option<(i32, i32)> {
    Some((nix::libc::SIGRTMIN(), nix::libc::SIGRTMAX()))
}

#[cfg(not(target_os = "linux"))]
fn rt_bounds() -> Option<(i32, i32)> {
    None
}

fn max_signal() -> i32 {
    rt_bounds().map_or(31, |(_, max)| max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_or_without_sig_in_any_case() {
        for s in ["TERM", "SIGTERM", "sigterm", "term", "15", " SigTerm "] {
            assert_eq!(s.parse::<Signal>(), Ok(Signal::TERM), "{s}");
        }
        assert_eq!("kill".parse::<Signal>(), Ok(Signal::KILL));
    }

    #[test]
    fn unknown_names_and_numbers_are_rejected() {
        for bad in [
            "SIGFOO",
            "0",
            "999",
            "",
            "-9",
            "SIG",
            "SIGSIGTERM",
            "SIG0",
            "TERM+1",
        ] {
            assert!(bad.parse::<Signal>().is_err(), "{bad}");
        }
        let max = max_signal();
        assert!((max + 1).to_string().parse::<Signal>().is_err());
        assert!(max.to_string().parse::<Signal>().is_ok());
    }

    #[test]
    fn display_uses_the_conventional_name() {
        assert_eq!(Signal::TERM.to_string(), "SIGTERM");
        assert_eq!(Signal::TERM.name(), "TERM");
        assert_eq!(Signal::PIPE.name(), "PIPE");
    }

    #[test]
    fn every_signal_parses_back_from_its_name() {
        for s in Signal::all() {
            let name = s.name();
            assert_eq!(name.parse::<Signal>(), Ok(s), "{name}");
            assert_eq!(Signal::from_str(&name), Ok(s), "{name}");
            // As a name with SIG, in any case: the form a LIST takes.
            for form in [format!("SIG{name}"), format!("sig{name}").to_lowercase()] {
                assert_eq!(Signal::from_name(&form), Ok(s), "{form}");
            }
            assert_eq!(s.number().to_string().parse::<Signal>(), Ok(s));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn real_time_signals_parse_from_rtmin_and_rtmax() {
        let (min, max) = (nix::libc::SIGRTMIN(), nix::libc::SIGRTMAX());
        for (text, n) in [
            ("RTMIN", min),
            ("SIGRTMIN", min),
            ("rtmin+2", min + 2),
            ("SigRtMin+0", min),
            ("RTMAX", max),
            ("sigrtmax-1", max - 1),
            ("RTMAX-0", max),
            (&format!("RTMIN+{}", max - min), max),
            (&format!("RTMAX-{}", max - min), min),
        ] {
            assert_eq!(text.parse::<Signal>().map(Signal::number), Ok(n), "{text}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn out_of_range_real_time_signals_are_rejected_clearly() {
        let (min, max) = (nix::libc::SIGRTMIN(), nix::libc::SIGRTMAX());
        for bad in [
            "RTMIN+99".to_string(),
            format!("RTMIN+{}", max - min + 1),
            format!("SIGRTMAX-{}", max - min + 1),
            "RTMIN+99999999999999999999".into(),
        ] {
            let err = bad.parse::<Signal>().unwrap_err();
            assert!(
                err.contains(&format!("'{bad}'")) && err.contains("RTMIN") && err.contains("RTMAX"),
                "{bad}: {err}"
            );
        }
        for bad in [
            "RTMIN-1", "RTMAX+1", "RTMIN+", "RTMIN+x", "RTMIN+-1", "RTMID",
        ] {
            assert!(bad.parse::<Signal>().is_err(), "{bad}");
        }
    }

    /// bash's `kill -l` on Linux with glibc, which keeps 32 and 33 for its threads.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn real_time_signals_are_named_as_bash_names_them() {
        let name = |n| Signal::from_number(n).unwrap().name();
        assert_eq!(name(31), "SYS");
        assert_eq!(name(32), "32");
        assert_eq!(name(33), "33");
        assert_eq!(name(34), "RTMIN");
        assert_eq!(name(35), "RTMIN+1");
        assert_eq!(name(36), "RTMIN+2");
        assert_eq!(name(49), "RTMIN+15");
        assert_eq!(name(50), "RTMAX-14");
        assert_eq!(name(63), "RTMAX-1");
        assert_eq!(name(64), "RTMAX");
        let display = |n| Signal::from_number(n).unwrap().to_string();
        assert_eq!(display(36), "SIGRTMIN+2");
        assert_eq!(display(64), "SIGRTMAX");
        assert_eq!(display(32), "signal 32");
    }
}
