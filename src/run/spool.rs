//! Bytes held for later: in memory up to a limit, then in an anonymous temporary file, so that
//! holding a large stream never takes more than the limit in memory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

/// How much a spool keeps in memory before it spills to a temporary file.
pub const MEMORY_LIMIT: usize = 64 * 1024 * 1024;

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

/// Creates a temporary file that no other process can reach: it is removed at once and lives
/// only as long as the handle.
pub(super) fn anonymous_file() -> io::Result<File> {
    let dir: PathBuf = std::env::temp_dir();
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
    fn with_limit(limit: usize) -> Spool {
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

    /// Bytes held in memory.
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

    /// The part of the spool from `pos` that is held in memory before the temporary file, for a
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
    fn stays_in_memory_under_the_limit() {
        let mut spool = Spool::with_limit(100);
        spool.append(b"hello").unwrap();
        assert!(!spilled(&spool));
        let mut buf = [0u8; 10];
        assert_eq!(spool.read_at(2, &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"llo");
        assert_eq!(spool.read_at(5, &mut buf).unwrap(), 0);
    }

}
