//! What Rust's runtime start-up would have done before `main` and `retry` still needs, for the
//! binary that starts at C's `main` (see `src/main.rs`).

/// Opens `/dev/null` on any of descriptors 0, 1 and 2 that is closed, so that no file `retry`
/// opens later takes the place of a standard stream; then ignores SIGPIPE, so that a write to a
/// closed pipe is an `EPIPE` error `retry` handles rather than its death. Call it first.
pub fn as_rust_would() {
    let mut fds = [0, 1, 2].map(|fd| nix::libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of three pollfd structures that outlives the call, and a
    // timeout of 0 only reports; poll reads no descriptor's data.
    let polled = unsafe { nix::libc::poll(fds.as_mut_ptr(), 3, 0) };
    for pollfd in fds {
        let closed = if polled >= 0 {
            pollfd.revents & nix::libc::POLLNVAL != 0
        } else {
            // poll failed (out of memory, say): ask each descriptor for its flags instead.
            // SAFETY: F_GETFD takes no argument and only reports on the descriptor.
            unsafe { nix::libc::fcntl(pollfd.fd, nix::libc::F_GETFD) == -1 }
        };
        if closed {
            // SAFETY: a NUL-terminated path and plain flags; the descriptor opened is meant to
            // stay open for the life of the process, so it is not owned by anything that would
            // close it.
            let fd = unsafe { nix::libc::open(c"/dev/null".as_ptr(), nix::libc::O_RDWR) };
            if fd != pollfd.fd {
                // The lowest free descriptor was not this one: nothing sane to run on.
                std::process::abort();
            }
        }
    }
    // SAFETY: SIG_IGN installs no handler, so no code of ours can run on the signal.
    unsafe { nix::libc::signal(nix::libc::SIGPIPE, nix::libc::SIG_IGN) };
}
