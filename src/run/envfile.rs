//! The environment of a try, and the file through which `--on-retry` adds to it
//! (docs/log.md#variables-for-the-next-tries): `RETRY_ENV_FILE`, made fresh, empty and private
//! for each call of the hook, read (at most [`MAX_BYTES`] and [`MAX_LINES`]) and removed as soon
//! as the hook ends. Its `NAME=VALUE` lines (GitHub's `GITHUB_ENV` form, `NAME<<DELIMITER` for a
//! value of several lines too) set variables for every later try and hook. What is refused is
//! said by its line number and its name, never by its value, which may be a secret.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag};
use nix::sys::stat::{self, Mode};
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::report::event::{EnvFileNote, EnvLineProblem};
use crate::store::file::store_dir;
use crate::store::open::{euid, open_way};

/// A variable that a try is given over `retry`'s own environment: `retry`'s (`RETRY_ATTEMPT`
/// and the others) have names known in advance, those that hooks set names of their own.
pub type EnvVar = (Cow<'static, str>, String);

/// How much of the file is read after each hook: more is ignored, with a warning.
pub const MAX_BYTES: usize = 64 * 1024;
pub const MAX_LINES: usize = 1000;

/// How many variables the hooks of one run may set in all (a name set again counts once), so
/// that a run's environment stays bounded however many tries it has.
pub const MAX_VARS: usize = 1000;

/// The names that hooks may not set: `retry`'s own.
const RESERVED: &str = "RETRY_";

/// A fresh `RETRY_ENV_FILE` for one call of the hook, removed when it is dropped.
pub struct EnvFile {
    /// The directory that holds it, opened: the file is read and removed in it by its name,
    /// never by a path that could lead elsewhere since.
    dir: File,
    name: String,
    /// Its path, for the hook.
    path: String,
}

impl EnvFile {
    /// Makes a fresh, empty file (0600 whatever the umask, never one that was there) in the
    /// directory that the user's quota stores are kept in (`$XDG_RUNTIME_DIR/retry`, else
    /// `$TMPDIR/retry-UID` or `/tmp/retry-UID`): one of the user's own, closed to others, on a
    /// way that no other user can change (docs/files.md#the-hooks-variables-file).
    pub fn create() -> io::Result<EnvFile> {
        let dir_path = store_dir(|name| std::env::var_os(name), euid());
        let dir = open_way(&dir_path, true)?;
        check_private(&dir, &dir_path)?;
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let private = Mode::S_IRUSR | Mode::S_IWUSR;
        for _ in 0..16 {
            let name = format!("env-{}-{:016x}", std::process::id(), rand::random::<u64>());
            let Some(path) = dir_path.join(&name).to_str().map(String::from) else {
                return Err(io::Error::other("its directory's path is not UTF-8"));
            };
            match fcntl::openat(&dir, name.as_str(), flags, private) {
                Ok(fd) => {
                    let file = EnvFile { dir, name, path };
                    // The umask may have taken the owner's bits away; on an error the file
                    // goes with `file`.
                    stat::fchmod(&fd, private)?;
                    return Ok(file);
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::other("no free name for it"))
    }

    /// Its path, as the hook is told it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the hook left in the file, at most one byte more than [`MAX_BYTES`] (so that
    /// [`hand_on`] sees that there was more), and the file removed: a file that is gone holds
    /// nothing; one that is no longer a regular file (the hook put a link, a FIFO, a directory
    /// in its place) is not read.
    pub fn take(self) -> io::Result<Vec<u8>> {
        let read = self.read();
        drop(self);
        read
    }

    fn read(&self) -> io::Result<Vec<u8>> {
        let name = self.name.as_str();
        // Looked at before it is opened: opening a device may act on it.
        match stat::fstatat(&self.dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if is_regular(st.st_mode) => {}
            Ok(_) => return Err(io::Error::other("it is no longer a regular file")),
            Err(Errno::ENOENT) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        }
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let file = File::from(fcntl::openat(&self.dir, name, flags, Mode::empty())?);
        if !is_regular(stat::fstat(&file)?.st_mode) {
            return Err(io::Error::other("it is no longer a regular file"));
        }
        let mut bytes = Vec::new();
        file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

impl Drop for EnvFile {
    fn drop(&mut self) {
        let _ = unlinkat(&self.dir, self.name.as_str(), UnlinkatFlags::NoRemoveDir);
    }
}

fn is_regular(mode: u32) -> bool {
    mode & nix::libc::S_IFMT == nix::libc::S_IFREG
}

/// Refuses the directory `dir` (opened from `path`) unless it is the user's own and closed to
/// others.
fn check_private(dir: &impl AsFd, path: &std::path::Path) -> io::Result<()> {
    let st = stat::fstat(dir)?;
    let mode = st.st_mode & 0o7777;
    if st.st_uid == euid() && mode & 0o077 == 0 {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "'{}' belongs to uid {} and has mode {mode:04o}: it must be the user's own and closed \
         to others",
        crate::report::printable(&path.display().to_string()),
        st.st_uid
    )))
}

/// Sets in `env` (a try's environment over `retry`'s own) the variables that `text`, what a
/// hook left in its `RETRY_ENV_FILE`, assigns: a name already there takes the new value, a new
/// name is added, up to [`MAX_VARS`] in all. What it holds and does not set is in the notes,
/// in the order of its lines.
pub fn hand_on(env: &mut Vec<EnvVar>, text: &[u8]) -> Vec<EnvFileNote> {
    let (assignments, mut notes) = parse(text);
    let mut set = env.iter().filter(|(k, _)| !k.starts_with(RESERVED)).count();
    for a in assignments {
        if let Some(var) = env.iter_mut().find(|(k, _)| *k == a.name) {
            var.1 = a.value;
        } else if set < MAX_VARS {
            env.push((Cow::Owned(a.name), a.value));
            set += 1;
        } else {
            let why = EnvLineProblem::TooMany { max: MAX_VARS };
            notes.push(note(a.line, Some(a.name), why));
        }
    }
    notes.sort_by_key(|n| match n {
        EnvFileNote::Line { line, .. } => *line,
        _ => usize::MAX,
    });
    notes
}

/// A variable that a line sets, `line` its number (from 1).
#[derive(Debug, PartialEq, Eq)]
struct Assignment {
    line: usize,
    name: String,
    value: String,
}

fn note(line: usize, name: Option<String>, why: EnvLineProblem) -> EnvFileNote {
    EnvFileNote::Line { line, name, why }
}

/// The variables that `text` assigns, in order, and what it holds that sets nothing.
fn parse(text: &[u8]) -> (Vec<Assignment>, Vec<EnvFileNote>) {
    let (lines, whole) = lines_read(text);
    let (mut set, mut notes) = (Vec::new(), Vec::new());
    let mut next = 0;
    while next < lines.len() {
        let line = next + 1;
        let text = lines[next];
        next += 1;
        if text.iter().all(|b| matches!(b, b' ' | b'\t')) {
            continue;
        }
        let checked = match form(text) {
            Form::Plain(name, value) => checked(line, name, Cow::Borrowed(value)),
            Form::Heredoc(name, delimiter) => {
                // The lines of the value are the value's, whatever they look like, up to the
                // one that ends it: also when the heredoc is refused, none of them is read as
                // an assignment.
                let end = lines[next..].iter().position(|l| *l == delimiter);
                let value = end.map(|end| lines[next..next + end].join(&b'\n'));
                next = end.map_or(lines.len(), |end| next + end + 1);
                match value {
                    _ if !valid_name(name) => Err(note(line, None, EnvLineProblem::BadName)),
                    Some(value) => checked(line, name, Cow::Owned(value)),
                    None => {
                        let name = String::from_utf8_lossy(name).into_owned();
                        Err(note(line, Some(name), EnvLineProblem::Unended))
                    }
                }
            }
            Form::Not => Err(note(line, None, EnvLineProblem::NotAssignment)),
        };
        match checked {
            Ok(a) => set.push(a),
            Err(n) => notes.push(n),
        }
    }
    if !whole {
        notes.push(EnvFileNote::TooLarge {
            read: lines.len(),
            max_bytes: MAX_BYTES,
            max_lines: MAX_LINES,
        });
    }
    (set, notes)
}

/// The lines of `text` that are read, each without its line break and a `\r` before it, and
/// whether that is all of them: at most [`MAX_LINES`], ended within the first [`MAX_BYTES`]
/// (the line that the bound cuts is left out whole: its value would be cut short). A last line
/// without a line break is a line when the whole file is read.
fn lines_read(text: &[u8]) -> (Vec<&[u8]>, bool) {
    let mut whole = text.len() <= MAX_BYTES;
    let text = match whole {
        true => text,
        false => {
            let kept = &text[..MAX_BYTES];
            &kept[..kept
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |at| at + 1)]
        }
    };
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if text.is_empty() || text.ends_with(b"\n") {
        lines.pop();
    }
    if lines.len() > MAX_LINES {
        lines.truncate(MAX_LINES);
        whole = false;
    }
    let lines = lines
        .into_iter()
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect();
    (lines, whole)
}

/// The two forms of a line: `NAME=VALUE`, and `NAME<<DELIMITER` (the value on the lines after
/// it, up to a line `DELIMITER`); the first of `=` and `<<` decides, as in GitHub's runner.
enum Form<'a> {
    Plain(&'a [u8], &'a [u8]),
    Heredoc(&'a [u8], &'a [u8]),
    Not,
}

fn form(line: &[u8]) -> Form<'_> {
    let equals = line.iter().position(|&b| b == b'=');
    let heredoc = line.windows(2).position(|w| w == b"<<");
    match (equals, heredoc) {
        (Some(e), h) if h.is_none_or(|h| e < h) => Form::Plain(&line[..e], &line[e + 1..]),
        (_, Some(h)) if h + 2 < line.len() => Form::Heredoc(&line[..h], &line[h + 2..]),
        _ => Form::Not,
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn valid_name(name: &[u8]) -> bool {
    match name.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_alphabetic() || *first == b'_')
                && rest.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
        }
        None => false,
    }
}

/// Line `line`'s assignment of `value` to `name`, if a variable can take it.
fn checked(line: usize, name: &[u8], value: Cow<'_, [u8]>) -> Result<Assignment, EnvFileNote> {
    if !valid_name(name) {
        return Err(note(line, None, EnvLineProblem::BadName));
    }
    // Only ASCII letters, digits and _: text.
    let name = String::from_utf8_lossy(name).into_owned();
    if name.starts_with(RESERVED) {
        return Err(note(line, Some(name), EnvLineProblem::Reserved));
    }
    match String::from_utf8(value.into_owned()) {
        Ok(value) if !value.contains('\0') => Ok(Assignment { line, name, value }),
        _ => Err(note(line, Some(name), EnvLineProblem::NotText)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(text: &str) -> (Vec<(String, String)>, Vec<EnvFileNote>) {
        let (set, notes) = parse(text.as_bytes());
        let set = set.into_iter().map(|a| (a.name, a.value)).collect();
        (set, notes)
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_string(), value.to_string())
    }

    #[test]
    fn name_value_lines_set_variables_and_blank_lines_are_passed_over() {
        let (vars, notes) = set("TOKEN=fresh\r\n\n  \nMIRROR=https://m/x?a=b\nEMPTY=\n_LAST9=end");
        assert_eq!(
            vars,
            [
                pair("TOKEN", "fresh"),
                pair("MIRROR", "https://m/x?a=b"),
                pair("EMPTY", ""),
                pair("_LAST9", "end"),
            ]
        );
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_line_that_is_no_assignment_is_refused_by_its_number_without_its_text() {
        let (vars, notes) = set("hunter2\nexport A=1\n9X=2\n=3\nRETRY_ATTEMPT=4\nOK=5\n");
        assert_eq!(vars, [pair("OK", "5")]);
        assert_eq!(
            notes,
            [
                note(1, None, EnvLineProblem::NotAssignment),
                note(2, None, EnvLineProblem::BadName),
                note(3, None, EnvLineProblem::BadName),
                note(4, None, EnvLineProblem::BadName),
                note(5, Some("RETRY_ATTEMPT".into()), EnvLineProblem::Reserved),
            ]
        );
    }

    #[test]
    fn a_heredoc_sets_a_value_of_several_lines_up_to_its_delimiter() {
        let (vars, notes) = set("KEY<<EOF\r\n-----BEGIN\r\nA=b\n-----END\nEOF\r\nNEXT=1\n");
        assert_eq!(
            vars,
            [pair("KEY", "-----BEGIN\nA=b\n-----END"), pair("NEXT", "1")]
        );
        assert!(notes.is_empty(), "{notes:?}");
        // The first of = and << decides.
        let (vars, _) = set("A=x<<y\n");
        assert_eq!(vars, [pair("A", "x<<y")]);
    }

    #[test]
    fn a_refused_heredoc_is_skipped_to_its_delimiter_and_its_lines_set_nothing() {
        let (vars, notes) = set("MY-CONF<<EOF\nMODE=prod\nEOF\nNEXT=1\n");
        assert_eq!(vars, [pair("NEXT", "1")]);
        assert_eq!(notes, [note(1, None, EnvLineProblem::BadName)]);
        let (vars, notes) = set("RETRY_X<<EOF\nMODE=prod\nEOF\n");
        assert!(vars.is_empty(), "{vars:?}");
        assert_eq!(notes.len(), 1, "{notes:?}");
    }

    #[test]
    fn a_heredoc_without_its_delimiter_sets_nothing_and_its_lines_are_not_read_as_assignments() {
        let (vars, notes) = set("OK=1\nKEY<<EOF\nSECRET=s3cr3t\n");
        assert_eq!(vars, [pair("OK", "1")]);
        assert_eq!(
            notes,
            [note(2, Some("KEY".into()), EnvLineProblem::Unended)]
        );
        let (vars, notes) = set("KEY<<\nA=1\n");
        assert_eq!(vars, [pair("A", "1")]);
        assert_eq!(notes, [note(1, None, EnvLineProblem::NotAssignment)]);
    }

    #[test]
    fn a_value_that_no_variable_can_hold_is_refused_with_its_name() {
        let (vars, notes) = parse(b"A=x\0y\nB=\xff\nC=ok\n");
        assert_eq!(vars.len(), 1);
        assert_eq!(
            notes,
            [
                note(1, Some("A".into()), EnvLineProblem::NotText),
                note(2, Some("B".into()), EnvLineProblem::NotText),
            ]
        );
    }

    #[test]
    fn only_the_lines_within_the_bounds_are_read_and_the_cut_line_is_left_out() {
        let mut text = "A=1\n".repeat(10).into_bytes();
        text.extend(std::iter::repeat_n(b'x', MAX_BYTES));
        let (lines, whole) = lines_read(&text);
        assert_eq!((lines.len(), whole), (10, false));
        let (_, notes) = parse(&text);
        assert_eq!(
            notes.last(),
            Some(&EnvFileNote::TooLarge {
                read: 10,
                max_bytes: MAX_BYTES,
                max_lines: MAX_LINES
            })
        );
        let many = "A=1\n".repeat(MAX_LINES + 1);
        assert_eq!(lines_read(many.as_bytes()).0.len(), MAX_LINES);
        assert!(!lines_read(many.as_bytes()).1);
        let exact = "A=1\n".repeat(MAX_LINES);
        assert_eq!(
            lines_read(exact.as_bytes()),
            (vec![&b"A=1"[..]; MAX_LINES], true)
        );
    }

    #[test]
    fn a_later_line_wins_and_the_hooks_set_at_most_max_vars_names() {
        let mut env: Vec<EnvVar> = vec![("RETRY_ATTEMPT".into(), "1".into())];
        assert!(hand_on(&mut env, b"T=old\nT=fresh\n").is_empty());
        assert!(hand_on(&mut env, b"T=newer\n").is_empty());
        assert_eq!(env[1], ("T".into(), "newer".to_string()));
        let many: String = (0..MAX_VARS).map(|n| format!("V{n}=x\n")).collect();
        let notes = hand_on(&mut env, many.as_bytes());
        assert_eq!(env.len(), 1 + MAX_VARS);
        assert_eq!(
            notes,
            [note(
                MAX_VARS,
                Some(format!("V{}", MAX_VARS - 1)),
                EnvLineProblem::TooMany { max: MAX_VARS }
            )]
        );
        // A name already set still takes a new value.
        assert!(hand_on(&mut env, b"T=newest\n").is_empty());
        assert_eq!(env[1].1, "newest");
    }
}
