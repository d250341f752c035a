//! Bytes held for later: in memory up to a limit, then in an anonymous temporary file, so that
//! holding a large stream never takes more than the limit in memory.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
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
}

/// Creates a temporary file that no other process can reach: it is removed at once and lives
/// only as long as the handle.
fn anonymous_file() -> io::Result<File> {
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

    pub fn with_limit(limit: usize) -> Spool {
        Spool {
            memory: Vec::new(),
            file: None,
            file_len: 0,
            tail: Vec::new(),
            failure: None,
            limit,
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

    /// True once part of the spool lives in a temporary file.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
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

    /// Writes the whole spool to `out`.
    pub fn copy_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut pos = 0;
        let mut buf = vec![0u8; 256 * 1024];
        while pos < self.len() {
            let n = self.read_at(pos, &mut buf)?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])?;
            pos += n as u64;
        }
        Ok(())
    }

    /// Empties the spool (and drops its file).
    pub fn clear(&mut self) {
        self.memory = Vec::new();
        self.file = None;
        self.file_len = 0;
        self.tail = Vec::new();
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

    #[test]
    fn spills_past_the_limit_and_reads_back_every_byte() {
        let mut spool = Spool::with_limit(10);
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for chunk in data.chunks(7) {
            spool.append(chunk).unwrap();
        }
        assert!(spool.spilled());
        assert_eq!(spool.len(), 1000);
        let mut back = Vec::new();
        let mut pos = 0;
        let mut buf = [0u8; 33];
        loop {
            let n = spool.read_at(pos, &mut buf).unwrap();
            if n == 0 {
                break;
            }
            back.extend_from_slice(&buf[..n]);
            pos += n as u64;
        }
        assert_eq!(back, data);
        let mut out = Vec::new();
        spool.copy_to(&mut out).unwrap();
        assert_eq!(out, data);
        spool.clear();
        assert!(spool.is_empty() && !spool.spilled());
    }

    #[test]
    fn keeps_every_byte_in_memory_when_the_file_fails() {
        let mut spool = Spool::with_limit(4);
        spool.append(b"abcd").unwrap();
        // A file that cannot be written, as on a full disk.
        spool.file = Some(File::open("/dev/null").unwrap());
        assert!(spool.append(b"ghij").is_err());
        spool.append(b"kl").unwrap();
        let mut out = Vec::new();
        spool.copy_to(&mut out).unwrap();
        assert_eq!(out, b"abcdghijkl");
        assert_eq!(spool.len(), 10);
    }

    #[test]
    fn stays_in_memory_under_the_limit() {
        let mut spool = Spool::with_limit(100);
        spool.append(b"hello").unwrap();
        assert!(!spool.spilled());
        let mut buf = [0u8; 10];
        assert_eq!(spool.read_at(2, &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"llo");
        assert_eq!(spool.read_at(5, &mut buf).unwrap(), 0);
    }
}
