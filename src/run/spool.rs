//! Bytes stored for later: in memory up to a limit, then in an anonymous temporary file, so that
//! storing a large stream never takes more than the limit in memory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// How much a spool keeps in memory before it spills to a temporary file: a run that records its
/// standard input and buffers a try's output at once keeps two, 64 MiB in all (BENCHMARKS.md).
pub const MEMORY_LIMIT: usize = 32 * 1024 * 1024;

/// The most copied at once from one spool into another.
const COPY_CHUNK: usize = 256 * 1024;

/// In memory up to the limit, then in a temporary file; should the file fail (a full disk),
/// in memory again after it: a spool never drops a byte.
#[derive(Debug)]
pub struct Spool {
    memory: Vec<u8>,
    file: Option<File>,
    file_len: u64,
    /// What came after the file failed.
    tail: Vec<u8>,
    /// Why the file failed, once.
    failure: Option<io::Error>,
    limit: usize,
    /// False once moving bytes into the file with splice(2) failed: plain writes from then on.
    splices: bool,
}

/// Creates a temporary file that no other process can reach, in `$TMPDIR` (or `/tmp`), that
/// lives only as long as the handle: where the system makes files without a name (Linux's
/// `O_TMPFILE`), it never has one, so that nothing is left behind whatever ends `retry`, even
/// SIGKILL; elsewhere it is removed as soon as it is made.
pub(super) fn anonymous_file() -> io::Result<File> {
    anonymous_file_in(&std::env::temp_dir())
}

/// An anonymous temporary file in `dir`: one without a name where the system and the file
/// system make such files, else one named and removed at once.
fn anonymous_file_in(dir: &Path) -> io::Result<File> {
    match unnamed_file(dir) {
        Err(e) if no_unnamed_files(&e) => named_then_removed(dir),
        made => made,
    }
}

/// A file in `dir` that has no name (`O_TMPFILE`), readable and writable by its owner only, and
/// that no name can be given later (`O_EXCL`).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn unnamed_file(dir: &Path) -> io::Result<File> {
    use nix::libc;
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE | libc::O_EXCL)
        .mode(0o600)
        .open(dir)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn unnamed_file(_dir: &Path) -> io::Result<File> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Whether a failure to make an unnamed file says that it cannot be made there (a kernel older
/// than `O_TMPFILE` opens the directory and fails with EISDIR; a file system without it says
/// EOPNOTSUPP) or that the directory is not one: the named file is tried then, and where it
/// fails too, it fails as it always has. Any other error (no room, no permission) is the same
/// for both, and stands.
fn no_unnamed_files(e: &io::Error) -> bool {
    use nix::libc;
    e.kind() == io::ErrorKind::Unsupported
        || matches!(
            e.raw_os_error(),
            Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOENT | libc::ENOTDIR)
        )
}

/// A file created in `dir` under a name no one else can have taken (0600, never an existing
/// file), and removed at once: for systems without unnamed files.
fn named_then_removed(dir: &Path) -> io::Result<File> {
    for _ in 0..16 {
        let path = dir.join(format!(".retry-spool-{:016x}", rand::random::<u64>()));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                std::fs::remove_file(&path)?;
                return Ok(file);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("cannot create a temporary file"))
}

impl Spool {
    pub fn new() -> Spool {
        Spool::with_limit(MEMORY_LIMIT)
    }

    /// A spool that keeps `limit` bytes in memory before it spills.
    pub fn with_limit(limit: usize) -> Spool {
        Spool {
            memory: Vec::new(),
            file: None,
            file_len: 0,
            tail: Vec::new(),
            failure: None,
            limit,
            splices: cfg!(any(target_os = "linux", target_os = "android")),
        }
    }

    pub fn len(&self) -> u64 {
        self.memory.len() as u64 + self.file_len + self.tail.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes in memory.
    pub fn in_memory(&self) -> usize {
        self.memory.len() + self.tail.len()
    }

    /// True once the temporary file could not be made or written.
    pub fn file_failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Appends `data`. Never loses it: if the temporary file cannot be made or written, the
    /// rest is kept in memory; the first such error is returned (once) for a warning.
    pub fn append(&mut self, data: &[u8]) -> Result<(), io::Error> {
        let room = self.limit.saturating_sub(self.memory.len());
        let (now, rest) = if self.file.is_none() && self.failure.is_none() {
            data.split_at(room.min(data.len()))
        } else {
            (&data[..0], data)
        };
        self.memory.extend_from_slice(now);
        if rest.is_empty() {
            return Ok(());
        }
        if self.failure.is_some() {
            self.tail.extend_from_slice(rest);
            return Ok(());
        }
        let written = match &self.file {
            Some(file) => file.write_all_at(rest, self.file_len),
            None => anonymous_file().and_then(|file| {
                let result = file.write_all_at(rest, 0);
                self.file = Some(file);
                result
            }),
        };
        match written {
            Ok(()) => {
                self.file_len += rest.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A partial write is overwritten by nothing: the file keeps only what counted.
                self.tail.extend_from_slice(rest);
                self.failure = Some(io::Error::new(e.kind(), e.to_string()));
                Err(e)
            }
        }
    }

    /// Appends every byte that `other` holds, in order, a chunk at a time: a spool that is
    /// copied never takes more memory than the two limits. The first error (reading `other`,
    /// or the temporary file of this spool, whose bytes are then kept in memory) is returned
    /// for a warning; a read error loses what was left to read.
    pub fn append_spool(&mut self, other: &Spool) -> Result<(), io::Error> {
        let mut first = None;
        let mut buf = vec![0u8; COPY_CHUNK.min(usize::try_from(other.len()).unwrap_or(COPY_CHUNK))];
        let mut pos = 0;
        while pos < other.len() {
            let n = match other.read_at(pos, &mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => return Err(first.unwrap_or(e)),
            };
            if let Err(e) = self.append(&buf[..n]) {
                first.get_or_insert(e);
            }
            pos += n as u64;
        }
        first.map_or(Ok(()), Err)
    }

    /// The last byte stored, if any.
    pub fn last_byte(&self) -> Option<u8> {
        let len = self.len();
        let mut last = [0u8];
        match len {
            0 => None,
            _ => matches!(self.read_at(len - 1, &mut last), Ok(1)).then_some(last[0]),
        }
    }

    /// Moves up to `max` bytes from the pipe `from` straight into the temporary file, without
    /// copying them through `retry` (Linux): `None` when the spool cannot take them that way
    /// (memory not yet full, no file, or splice not supported), and the caller reads and
    /// appends instead. `Some(Ok(0))` is the end of the pipe; `WouldBlock` that it is empty.
    pub fn splice_from(&mut self, from: BorrowedFd<'_>, max: usize) -> Option<io::Result<usize>> {
        if !self.splices || self.failure.is_some() || self.memory.len() < self.limit {
            return None;
        }
        self.splice(from, max)
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn splice(&mut self, from: BorrowedFd<'_>, max: usize) -> Option<io::Result<usize>> {
        use nix::fcntl::{SpliceFFlags, splice};
        use nix::libc;
        if self.file.is_none() {
            match anonymous_file() {
                Ok(file) => self.file = Some(file),
                // The plain path meets the same error and keeps the bytes in memory.
                Err(_) => return None,
            }
        }
        let file = self.file.as_ref()?;
        let mut at = libc::loff_t::try_from(self.file_len).ok()?;
        match splice(
            from,
            None,
            file,
            Some(&mut at),
            max,
            SpliceFFlags::SPLICE_F_NONBLOCK,
        ) {
            Ok(n) => {
                self.file_len += n as u64;
                Some(Ok(n))
            }
            Err(nix::errno::Errno::EAGAIN) => Some(Err(io::ErrorKind::WouldBlock.into())),
            Err(nix::errno::Errno::EINTR) => Some(Err(io::ErrorKind::Interrupted.into())),
            // Anything else (a file system without splice, a full disk): the plain path takes
            // over, and reports a write error if there is one.
            Err(_) => {
                self.splices = false;
                None
            }
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn splice(&mut self, _from: BorrowedFd<'_>, _max: usize) -> Option<io::Result<usize>> {
        None
    }

    /// The part of the spool from `pos` that is in memory before the temporary file, for a
    /// write that needs no copy first; `None` when `pos` is past it.
    pub fn memory_part(&self, pos: u64) -> Option<&[u8]> {
        let start = usize::try_from(pos).ok()?;
        self.memory.get(start..).filter(|part| !part.is_empty())
    }

    /// The part of the spool from `pos` that lives in the temporary file, as the file, the
    /// offset in it and the length, for a copy that does not pass through `retry`
    /// (sendfile(2)); `None` when `pos` is not in the file.
    pub fn file_part(&self, pos: u64) -> Option<(&File, u64, u64)> {
        let mem = self.memory.len() as u64;
        let file = self.file.as_ref()?;
        (pos >= mem && pos < mem + self.file_len)
            .then(|| (file, pos - mem, mem + self.file_len - pos))
    }

    /// Reads up to `buf.len()` bytes from `pos`; 0 at the end.
    pub fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mem = self.memory.len() as u64;
        if pos < mem {
            let start = pos as usize;
            let n = buf.len().min(self.memory.len() - start);
            buf[..n].copy_from_slice(&self.memory[start..start + n]);
            return Ok(n);
        }
        if pos < mem + self.file_len {
            let file = self
                .file
                .as_ref()
                .expect("file_len counts bytes in the file");
            let want = buf.len().min((mem + self.file_len - pos) as usize);
            return file.read_at(&mut buf[..want], pos - mem);
        }
        let start = (pos - mem - self.file_len) as usize;
        if start >= self.tail.len() {
            return Ok(0);
        }
        let n = buf.len().min(self.tail.len() - start);
        buf[..n].copy_from_slice(&self.tail[start..start + n]);
        Ok(n)
    }
}

impl Default for Spool {
    fn default() -> Self {
        Spool::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True once part of the spool lives in a temporary file.
    fn spilled(spool: &Spool) -> bool {
        spool.file.is_some()
    }

    /// Every byte the spool holds, read back in order as its readers read it.
    fn contents(spool: &Spool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 33];
        while let n @ 1.. = spool.read_at(out.len() as u64, &mut buf).unwrap() {
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    /// A directory of its own for one test, empty.
    fn empty_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("retry-spool-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names_in(dir: &Path) -> Vec<std::ffi::OsString> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect()
    }

    /// The spool file is the user's own: read and written by its owner only.
    fn assert_private(file: &File) {
        use std::os::unix::fs::PermissionsExt;
        let mode = file.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    #[test]
    fn spills_past_the_limit_and_reads_back_every_byte() {
        let mut spool = Spool::with_limit(10);
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for chunk in data.chunks(7) {
            spool.append(chunk).unwrap();
        }
        assert!(spilled(&spool));
        assert_eq!(spool.len(), 1000);
        assert_eq!(contents(&spool), data);
    }

    #[test]
    fn the_memory_part_ends_where_the_file_begins() {
        let mut spool = Spool::with_limit(4);
        spool.append(b"ab").unwrap();
        assert_eq!(spool.memory_part(0), Some(&b"ab"[..]));
        spool.append(b"cdefg").unwrap();
        assert!(spilled(&spool));
        assert_eq!(spool.memory_part(1), Some(&b"bcd"[..]));
        assert_eq!(spool.memory_part(4), None);
        assert_eq!(
            spool.file_part(4).map(|(_, at, len)| (at, len)),
            Some((0, 3))
        );
        assert_eq!(spool.memory_part(u64::MAX), None);
    }

    #[test]
    fn keeps_every_byte_in_memory_when_the_file_fails() {
        let mut spool = Spool::with_limit(4);
        spool.append(b"abcd").unwrap();
        // A file that cannot be written, as on a full disk.
        spool.file = Some(File::open("/dev/null").unwrap());
        assert!(spool.append(b"ghij").is_err());
        spool.append(b"kl").unwrap();
        assert_eq!(contents(&spool), b"abcdghijkl");
        assert_eq!(spool.len(), 10);
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn splices_from_a_pipe_into_the_file_once_memory_is_full() {
        use std::os::fd::AsFd;
        let (r, w) = nix::unistd::pipe().unwrap();
        let mut spool = Spool::with_limit(4);
        nix::unistd::write(&w, b"abcdefgh").unwrap();
        // Memory not full yet: the caller reads and appends.
        assert!(spool.splice_from(r.as_fd(), 100).is_none());
        spool.append(b"0123").unwrap();
        assert_eq!(spool.splice_from(r.as_fd(), 100).unwrap().unwrap(), 8);
        nix::unistd::write(&w, b"ij").unwrap();
        assert_eq!(spool.splice_from(r.as_fd(), 100).unwrap().unwrap(), 2);
        drop(w);
        assert_eq!(spool.splice_from(r.as_fd(), 100).unwrap().unwrap(), 0);
        assert_eq!(spool.len(), 14);
        let (_, offset, len) = spool.file_part(4).unwrap();
        assert_eq!((offset, len), (0, 10));
        assert_eq!(spool.file_part(9).map(|(_, o, l)| (o, l)), Some((5, 5)));
        assert!(spool.file_part(3).is_none() && spool.file_part(14).is_none());
        assert_eq!(contents(&spool), b"0123abcdefghij");
    }

    #[test]
    fn a_spool_copied_into_another_keeps_every_byte_in_order() {
        let mut from = Spool::with_limit(5);
        let data: Vec<u8> = (0..=255u8).cycle().take(COPY_CHUNK * 2 + 17).collect();
        from.append(&data).unwrap();
        assert!(spilled(&from));
        let mut to = Spool::with_limit(3);
        to.append(b"ab").unwrap();
        to.append_spool(&from).unwrap();
        assert_eq!(to.len(), data.len() as u64 + 2);
        assert_eq!(&contents(&to)[2..], &data[..]);
        assert_eq!(to.last_byte(), data.last().copied());
        assert_eq!(Spool::new().last_byte(), None);
    }

    #[test]
    fn stays_in_memory_under_the_limit() {
        let mut spool = Spool::with_limit(100);
        spool.append(b"hello").unwrap();
        assert!(!spilled(&spool));
        let mut buf = [0u8; 10];
        assert_eq!(spool.read_at(2, &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"llo");
        assert_eq!(spool.read_at(5, &mut buf).unwrap(), 0);
    }

    #[test]
    fn a_spool_file_leaves_no_name_in_its_directory() {
        let dir = empty_dir("anonymous");
        let file = anonymous_file_in(&dir).unwrap();
        assert_private(&file);
        assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
        file.write_all_at(b"kept", 0).unwrap();
        let mut back = [0u8; 4];
        file.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back, b"kept");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn where_the_file_system_makes_unnamed_files_the_spool_file_never_has_a_name() {
        let dir = empty_dir("unnamed");
        match unnamed_file(&dir) {
            Ok(file) => {
                assert_private(&file);
                // The kernel calls such a file `#INODE (deleted)`: never the name the fallback
                // gives.
                let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
                let target = std::fs::read_link(link).unwrap();
                let target = target.to_string_lossy();
                assert!(!target.contains(".retry-spool-"), "{target}");
                assert!(names_in(&dir).is_empty());
                // And no name can be given to it later.
                let at = dir.join("linked");
                let fd = std::ffi::CString::new(format!(
                    "/proc/self/fd/{}",
                    std::os::fd::AsRawFd::as_raw_fd(&file)
                ))
                .unwrap();
                let to = std::ffi::CString::new(at.to_string_lossy().as_bytes()).unwrap();
                // SAFETY: both paths are NUL-terminated strings that outlive the call.
                let linked = unsafe {
                    nix::libc::linkat(
                        nix::libc::AT_FDCWD,
                        fd.as_ptr(),
                        nix::libc::AT_FDCWD,
                        to.as_ptr(),
                        nix::libc::AT_SYMLINK_FOLLOW,
                    )
                };
                assert_ne!(linked, 0, "an O_EXCL unnamed file was given a name");
                assert!(names_in(&dir).is_empty());
            }
            // Not on this file system: the fallback's own test covers what retry does then.
            Err(e) => assert!(no_unnamed_files(&e), "{e}"),
        }
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn the_fallback_makes_a_private_file_and_removes_its_name_at_once() {
        let dir = empty_dir("named");
        let file = named_then_removed(&dir).unwrap();
        assert_private(&file);
        assert!(names_in(&dir).is_empty(), "{:?}", names_in(&dir));
        file.write_all_at(b"fallback", 0).unwrap();
        let mut back = [0u8; 8];
        file.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back, b"fallback");
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_fails_as_it_always_did() {
        let dir = std::env::temp_dir().join(format!("retry-spool-missing-{}", std::process::id()));
        let err = anonymous_file_in(&dir).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(no_unnamed_files(&err));
        assert!(!no_unnamed_files(&io::Error::from_raw_os_error(
            nix::libc::ENOSPC
        )));
    }
}
