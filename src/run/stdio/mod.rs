//! Standard input and output of the tries (docs/output.md#input-and-output): stdin replayed to
//! every try, stdout buffered until a try succeeds, and output watched for the patterns of
//! `--retry-if-output` and `--stop-if-output`. Every descriptor here is driven by the runner's one
//! poll, so a slow reader or writer never stops `retry` from seeing a timeout or a signal.
//!
//! This module is what the runner calls: the plumbing of the run (`RunIo`) and of each try
//! (`TryIo`), which passes each event on to the input side (`input`), the output side
//! (`output`, with each stream and its matchers in `stream`, and the tail `--junit` keeps in
//! `tail`), or the terminal (`pty`).

mod fds;
mod input;
mod output;
mod pty;
mod stream;
mod tail;

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use anyhow::Context as _;
use nix::libc;
use nix::sys::stat::fstat;
use nix::unistd::isatty;

use crate::config::Config;
use crate::policy::OutputMatch;
use crate::policy::Signal;
use crate::policy::pushback::date_line;
use crate::run::child::{ChildFd, ChildStdio};
use crate::run::clock::Moment;
use crate::run::descriptor::{pipe, set_nonblocking};
use crate::run::dispositions::Dispositions;
use crate::run::playback;
use crate::run::process::Inherited;
use crate::run::signals::Signals;
use crate::run::stderr::Stderr;

pub use self::fds::Token;
use self::fds::{BUFFER_PIPE, set_pipe_size};
use self::input::Feeder;
use self::output::Outputs;
pub use self::output::TryIo;
use self::pty::pseudo_terminal;
pub(crate) use self::pty::window_size;
pub use self::stream::OutputError;
use self::stream::{Dest, Patterns, Stream, real_stream};
use self::tail::Tail;

/// True when two descriptors refer to the same file (as after `2>&1`).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    match (fstat(a), fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => false,
    }
}

/// The plumbing of the whole run.
#[derive(Debug)]
pub struct RunIo {
    /// Standard input, and its recording.
    input: Feeder,
    patterns: Patterns,
    /// Which of a try's streams pass through retry.
    layout: Layout,
    /// retry's own standard output and error, where the tries' output goes.
    output: Outputs,
    /// Standard output, or error, is a terminal.
    stdout_tty: bool,
    stderr_tty: bool,
    /// A problem worth a line in the log, not yet logged.
    warning: Option<String>,
    /// `--junit`: the last bytes of each try's output are kept for its report.
    keep_tail: bool,
    /// `--output-on-failure` with standard output and error one file: a try's standard output
    /// is withheld with the rest of the run's output as it comes, in order with its standard error.
    withhold_stdout_in_order: bool,
    /// Under `--output-on-failure`, what the successful try's background processes may still
    /// write: handed off once what is withheld has been passed on.
    late: Option<TryIo>,
    /// `retry`'s own standard error: where its line stands, and what the run withholds.
    stderr: Stderr,
}

/// Which of a try's output streams pass through retry, chosen once for the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Nothing buffers or watches the output: the try writes to retry's own stdout and stderr.
    Inherit,
    /// `--buffer-stdout`: standard output is buffered, and standard error passes through retry,
    /// which plays a failed try's standard output back there and writes its own lines there:
    /// it then knows when the try left a line unfinished, whatever file standard error is.
    Buffer,
    /// Watched, and standard output and error go to the same place (`2>&1`, one terminal):
    /// one stream for both keeps their order exactly as the command wrote it.
    Shared,
    /// Watched, each stream on its own.
    Separate,
    /// Relayed, not watched, and standard output goes elsewhere: only standard error passes
    /// through `retry`, which writes its own lines there.
    Stderr,
    /// `--output-on-failure`: standard output buffered until the try ends, as `Buffer`, and standard
    /// error withheld with the rest of the run's output until the run ends.
    WithholdAll,
}

impl Layout {
    /// `same_place` (stdout and stderr are the same file) is looked at only when it matters:
    /// each look is a system call at start-up.
    fn new(
        buffer_stdout: bool,
        watching: bool,
        relay: bool,
        same_place: impl FnOnce() -> bool,
    ) -> Layout {
        match (buffer_stdout, watching, relay) {
            (true, _, _) => Layout::Buffer,
            (false, false, false) => Layout::Inherit,
            (false, _, _) if same_place() => Layout::Shared,
            (false, true, _) => Layout::Separate,
            (false, false, true) => Layout::Stderr,
        }
    }
}

impl RunIo {
    /// `relay`: pass the try's standard error (and its standard output, when the two are one
    /// file) through `retry` even when nothing watches them, so that `retry` sees a line the
    /// try left unfinished and starts its own lines on a line of their own (under CI). What
    /// passes through goes to `stderr`'s standard error and output.
    pub fn new(config: &Config, relay: bool, stderr: &Stderr) -> anyhow::Result<RunIo> {
        let input = Feeder::new(config.stdin)?;
        let classifier = &config.policy.classifier;
        let patterns = Patterns {
            retry_if: classifier.retry_if_output.clone(),
            stop_if: classifier.stop_if_output.clone(),
            until: classifier.until_output.clone(),
            delay_from: config.delay_from_output.clone(),
            date_line: config.delay_from_output.as_ref().map(|_| date_line()),
        };
        let mut shared = None;
        let mut same_place =
            || *shared.get_or_insert_with(|| same_file(io::stdout().as_fd(), io::stderr().as_fd()));
        // The report shows what each try wrote, and a failure's ping the end of it: its output
        // passes through retry.
        let keep_tail = config.junit.is_some() || config.outside.ping.is_some();
        let layout = match config.output_on_failure {
            true => Layout::WithholdAll,
            false => Layout::new(
                config.buffer_stdout,
                patterns.any() || keep_tail,
                relay,
                &mut same_place,
            ),
        };
        if layout != Layout::Inherit {
            stderr.set_shared(same_place());
        }
        let in_order = layout == Layout::WithholdAll && same_place();
        if layout == Layout::WithholdAll {
            stderr.begin_withholding(in_order);
        }
        Ok(RunIo {
            input,
            patterns,
            layout,
            output: Outputs::new(stderr),
            stdout_tty: isatty(io::stdout()).unwrap_or(false),
            stderr_tty: isatty(io::stderr()).unwrap_or(false),
            warning: None,
            keep_tail,
            withhold_stdout_in_order: in_order,
            late: None,
            stderr: stderr.clone(),
        })
    }

    /// The signal dispositions a forwarder of late output starts with (those of a command:
    /// retry's own handlers must not run in it).
    pub fn set_dispositions(&mut self, dispositions: Dispositions) {
        self.output.forwarder_dispositions = dispositions;
    }

    /// `retry`'s own standard error, which the hooks write to as well.
    pub fn stderr(&self) -> &Stderr {
        &self.stderr
    }

    /// False once standard input could not be recorded whole: no further try may run.
    pub fn can_replay(&self) -> bool {
        self.input.can_replay()
    }

    /// A warning for the log, once.
    pub fn take_warning(&mut self) -> Option<String> {
        self.warning.take().or_else(|| self.stderr.take_warning())
    }

    /// Sets up one try: the child's standard streams, and retry's ends of them.
    pub fn start_try(&mut self) -> anyhow::Result<(ChildStdio, TryIo)> {
        let mut io = TryIo {
            tail: self.keep_tail.then(Tail::default),
            withhold_stdout: self.withhold_stdout_in_order,
            ..TryIo::default()
        };
        let stdin = self.input.child_stdin(&mut io.feed, &mut self.warning)?;
        let (stdout, stderr) = self.child_output(&mut io)?;
        Ok((
            ChildStdio {
                stdin,
                stdout,
                stderr,
            },
            io,
        ))
    }

    /// The try's standard output and error, as `layout` has them.
    fn child_output(&self, io: &mut TryIo) -> anyhow::Result<(ChildFd, ChildFd)> {
        Ok(match self.layout {
            Layout::Inherit => (ChildFd::Inherit, ChildFd::Inherit),
            Layout::Buffer => (
                ChildFd::Fd(self.open_stream(io, Dest::Buffer, self.stdout_tty)?),
                ChildFd::Fd(self.open_stream(io, Dest::Stderr, self.stderr_tty)?),
            ),
            Layout::Shared => {
                let both = self.open_stream(io, Dest::Stdout, self.stdout_tty)?;
                let again = both.try_clone().context("cannot share the output pipe")?;
                (ChildFd::Fd(both), ChildFd::Fd(again))
            }
            Layout::Stderr => (
                ChildFd::Inherit,
                ChildFd::Fd(self.open_stream(io, Dest::Stderr, self.stderr_tty)?),
            ),
            Layout::Separate => (
                ChildFd::Fd(self.open_stream(io, Dest::Stdout, self.stdout_tty)?),
                ChildFd::Fd(self.open_stream(io, Dest::Stderr, self.stderr_tty)?),
            ),
            Layout::WithholdAll => (
                ChildFd::Fd(self.open_stream(io, Dest::Buffer, self.stdout_tty)?),
                ChildFd::Fd(self.open_stream(io, Dest::Record, self.stderr_tty)?),
            ),
        })
    }

    /// One stream passed through retry, to `dest`: a pipe, or a pseudo-terminal when `tty`
    /// (its destination is a terminal), so that the try still sees one
    /// (docs/classification.md#classification-by-output). Returns the try's end.
    fn open_stream(&self, io: &mut TryIo, dest: Dest, tty: bool) -> anyhow::Result<OwnedFd> {
        let (r, w) = if tty {
            pseudo_terminal(real_stream(dest).as_fd())
                .context("cannot create a pseudo-terminal for output")?
        } else {
            let (r, w) = pipe().context("cannot create a pipe for output")?;
            if matches!(dest, Dest::Buffer | Dest::Record) {
                // Buffered output is taken as fast as it comes: a larger pipe means fewer
                // wake-ups per byte (1 GiB buffered: 1.2 times as fast, BENCHMARKS.md).
                set_pipe_size(&r, BUFFER_PIPE);
            }
            (r, w)
        };
        set_nonblocking(&r)?;
        io.streams
            .push(Stream::new(r, dest, self.patterns.matchers(), tty));
        Ok(w)
    }

    /// The descriptors to poll for this try, with what each is for.
    pub fn interest(&self, io: &mut TryIo, fds: &mut Vec<libc::pollfd>, tokens: &mut Vec<Token>) {
        let mut add = |fd: RawFd, events: libc::c_short, token: Token| {
            fds.push(libc::pollfd {
                fd,
                events,
                revents: 0,
            });
            tokens.push(token);
        };
        if let Some((fd, events, token)) = self.input.interest(&mut io.feed) {
            add(fd, events, token);
        }
        if io.failed.is_some() {
            return;
        }
        for (i, s) in io.streams.iter().enumerate() {
            if let Some(dest) = s.outgoing() {
                add(
                    self.output.outlet(dest).poll_fd(),
                    libc::POLLOUT,
                    Token::Write(i),
                );
            } else if let Some(fd) = &s.fd {
                add(fd.as_raw_fd(), libc::POLLIN, Token::Read(i));
            }
        }
    }

    /// Acts on the descriptors that poll reported ready.
    pub fn on_ready(&mut self, io: &mut TryIo, fds: &[libc::pollfd], tokens: &[Token]) {
        for (pfd, token) in fds.iter().zip(tokens) {
            if pfd.revents == 0 {
                continue;
            }
            match *token {
                Token::FeedWrite => self.input.feed(&mut io.feed, pfd.revents),
                Token::StdinRead => self.input.stdin_readable(&mut io.feed, &mut self.warning),
                Token::StdinReady => Feeder::stdin_ready(&mut io.feed),
                Token::Read(i) => {
                    self.output.read_stream(io, i, &mut self.warning);
                }
                Token::Write(i) => self.output.flush_stream(io, i),
            }
        }
    }

    /// When to look next whether the try waits for input: only while it is fed on request,
    /// has been given everything recorded, and standard input has something for it.
    pub fn next_scan(&self, io: &TryIo) -> Option<Moment> {
        self.input.next_scan(&io.feed)
    }

    /// Looks whether some process of the try waits for input on its pipe, when it is time
    /// (`next_scan`): a request is granted one read of what it asked for (at most `CHUNK`, and
    /// `CHUNK` when poll, select or epoll does not say), so that a reader of a few bytes at a
    /// time gets exactly those; a second block read in a row starts streaming. `inherited` are
    /// the processes below `retry` that are not the try's.
    pub fn scan(&mut self, io: &mut TryIo, inherited: &Inherited) {
        self.input.scan(&mut io.feed, inherited, &mut self.warning);
    }

    /// After the try: take what its streams still hold without waiting for an end that a
    /// leftover process may never give, finish matching, and end its input. What is taken is
    /// written out by `drain`.
    pub fn finish_try(&mut self, io: &mut TryIo) -> OutputMatch {
        io.feed = None;
        self.output.finish(io, &mut self.warning)
    }

    /// Whether the try has printed the match of `--until-output` yet, in what its pipes hold now
    /// too: a try that exited 0 without it is not ready, and what it left running is stopped as
    /// a failed try's leftovers are.
    pub fn ready_so_far(&mut self, io: &mut TryIo) -> bool {
        self.output.ready_so_far(io, &mut self.warning)
    }

    /// After a successful try: if a process the try left running (nothing is killed after a
    /// success) still holds one of its output pipes, a small forwarder process takes the pipes
    /// over and passes what comes on until every writer is done, so that late output is not
    /// lost; `retry` itself exits at once. Buffered output goes to stdout, as the success's did.
    /// Under `--output-on-failure`, once what the run withholds has been passed on (`end_run`).
    pub fn hand_off(&mut self, io: &mut TryIo) {
        if self.layout != Layout::WithholdAll {
            return self.output.hand_off(io);
        }
        self.late = Some(TryIo {
            late: std::mem::take(&mut io.late),
            broken: io.broken,
            failed: io.failed.take(),
            ..TryIo::default()
        });
    }

    /// The real terminal changed size: the try's pseudo-terminals follow it at once. True when
    /// one of them changed size: then the try is to be told, with SIGWINCH.
    pub fn follow_window_sizes(&self, io: &TryIo) -> bool {
        self.output.follow_window_sizes(io)
    }

    /// True while some output of the try still waits to be written.
    pub fn has_output(&self, io: &TryIo) -> bool {
        self.output.has_output(io)
    }

    /// Sends buffered standard output on its way: to stdout for the successful try, to stderr
    /// otherwise. `drain` writes it. Under `--output-on-failure`, a failed try's goes into what
    /// the run withholds instead, and so does a successful one's when `--flaky fail` will fail the
    /// run all the same (`fails_anyway`, as the runner says), to be passed on in its place
    /// (docs/output.md#output-on-failure).
    pub fn deliver(&mut self, io: &mut TryIo, success: bool, fails_anyway: bool) {
        if self.layout == Layout::WithholdAll {
            if !success || fails_anyway {
                return self.output.withhold_for_the_run(io, success);
            }
            self.output.note_success(io);
        }
        self.output.deliver(io, success);
    }

    /// The run has ended with `status`: what `--output-on-failure` withheld is passed on, or
    /// dropped (docs/output.md#output-on-failure), and then the late output of a successful try
    /// handed off. A stopping signal that cuts the playback short is what the run exits by.
    pub fn end_run(&mut self, play_all: bool, signals: &mut Signals) -> Option<Signal> {
        if self.layout != Layout::WithholdAll {
            return None;
        }
        if let Some(signal) = playback::end(&self.stderr, play_all, signals) {
            return Some(signal);
        }
        if let Some(mut late) = self.late.take() {
            self.output.hand_off(&mut late);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_looks_at_the_place_only_when_it_matters() {
        let never = || -> bool { panic!("same_place looked at") };
        assert_eq!(Layout::new(false, false, false, never), Layout::Inherit);
        // Buffered standard output: standard error passes through retry, on one file with standard
        // output or not, so that retry knows where its line stands.
        assert_eq!(Layout::new(true, false, false, never), Layout::Buffer);
        assert_eq!(Layout::new(true, true, false, never), Layout::Buffer);
        assert_eq!(Layout::new(false, true, false, || true), Layout::Shared);
        assert_eq!(Layout::new(false, true, false, || false), Layout::Separate);
    }

    #[test]
    fn under_ci_the_streams_retry_writes_beside_pass_through_it() {
        let never = || -> bool { panic!("same_place looked at") };
        assert_eq!(Layout::new(true, false, true, never), Layout::Buffer);
        assert_eq!(Layout::new(false, false, true, || true), Layout::Shared);
        assert_eq!(Layout::new(false, false, true, || false), Layout::Stderr);
        assert_eq!(Layout::new(false, true, true, || false), Layout::Separate);
    }
}
