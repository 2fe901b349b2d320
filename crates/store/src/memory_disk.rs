//! The disk image of a store kept in memory (`up` without `--state-dir`, tests, the
//! simulator's restarts), in chunks of [`CHUNK`] bytes.
//!
//! redb's own `InMemoryBackend` is one `Vec<u8>`: each growth of the file reallocates
//! it, at least doubling its capacity and copying it, so a file of 50 MB may hold 100 MB
//! and briefly 150 MB while it grows (`up` of 1,000 clusters peaked 100 MB higher in
//! its store's commits than the file it kept). Chunks grow by one chunk at a time and
//! are never copied.

use std::io;
use std::sync::{Arc, RwLock};

/// Bytes per chunk: small beside a fleet's file, large beside redb's pages (4 KiB).
const CHUNK: usize = 1 << 20;

#[derive(Debug, Default)]
struct Image {
    len: u64,
    chunks: Vec<Box<[u8]>>,
}

impl Image {
    /// Calls `f` with each (chunk index, range within that chunk, range within the
    /// caller's buffer) that `offset..offset + n` covers, after checking it lies within
    /// the image.
    fn spans(
        &self,
        offset: u64,
        n: usize,
        mut f: impl FnMut(usize, std::ops::Range<usize>, std::ops::Range<usize>),
    ) -> io::Result<()> {
        let end = offset
            .checked_add(n as u64)
            .filter(|end| *end <= self.len)
            .ok_or_else(out_of_range)?;
        let mut at = offset;
        let mut done = 0;
        while at < end {
            let chunk = usize::try_from(at / CHUNK as u64).map_err(|_| out_of_range())?;
            let within = (at % CHUNK as u64) as usize;
            let take = (CHUNK - within).min((end - at) as usize);
            f(chunk, within..within + take, done..done + take);
            at += take as u64;
            done += take;
        }
        Ok(())
    }
}

fn out_of_range() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "offset out of the memory disk's range",
    )
}

/// An in-memory disk image for [`crate::Store::on_memory_disk`]. Clones share the image.
#[derive(Clone, Debug, Default)]
pub struct MemoryDisk(Arc<RwLock<Image>>);

impl MemoryDisk {
    pub fn new() -> Self {
        MemoryDisk::default()
    }

    fn lock(&self) -> std::sync::RwLockReadGuard<'_, Image> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_mut(&self) -> std::sync::RwLockWriteGuard<'_, Image> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A separate image with the bytes this one holds now: what a backup or a snapshot
    /// of the disk taken at this instant would restore.
    pub fn image(&self) -> Result<MemoryDisk, io::Error> {
        let image = self.lock();
        Ok(MemoryDisk(Arc::new(RwLock::new(Image {
            len: image.len,
            chunks: image.chunks.clone(),
        }))))
    }
}

impl redb::StorageBackend for MemoryDisk {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.lock().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let image = self.lock();
        image.spans(offset, out.len(), |c, within, buf| {
            out[buf].copy_from_slice(&image.chunks[c][within]);
        })
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut image = self.lock_mut();
        let chunks = usize::try_from(len.div_ceil(CHUNK as u64)).map_err(|_| out_of_range())?;
        if len < image.len {
            // What lies past the new end reads as zeros if the image grows again.
            let tail = (len % CHUNK as u64) as usize;
            image.chunks.truncate(chunks);
            if tail > 0
                && let Some(last) = image.chunks.last_mut()
            {
                last[tail..].fill(0);
            }
        }
        while image.chunks.len() < chunks {
            image.chunks.push(vec![0u8; CHUNK].into_boxed_slice());
        }
        image.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut image = self.lock_mut();
        let mut spans = Vec::new();
        image.spans(offset, data.len(), |c, within, buf| {
            spans.push((c, within, buf));
        })?;
        for (c, within, buf) in spans {
            image.chunks[c][within].copy_from_slice(&data[buf]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::StorageBackend;

    #[test]
    fn bytes_written_across_chunks_read_back_and_a_shrunk_tail_reads_as_zeros() {
        let disk = MemoryDisk::new();
        disk.set_len(3 * CHUNK as u64).expect("grow");
        let data: Vec<u8> = (0..CHUNK + 100).map(|i| (i % 251) as u8).collect();
        let at = CHUNK as u64 - 50;
        disk.write(at, &data).expect("write");
        let mut back = vec![0u8; data.len()];
        disk.read(at, &mut back).expect("read");
        assert_eq!(back, data);

        disk.set_len(CHUNK as u64 - 10).expect("shrink");
        disk.set_len(2 * CHUNK as u64).expect("grow again");
        let mut tail = vec![1u8; 60];
        disk.read(CHUNK as u64 - 50, &mut tail).expect("read");
        assert_eq!(&tail[..40], &data[..40], "kept below the cut");
        assert!(tail[40..].iter().all(|b| *b == 0), "zeros past it");
    }

    #[test]
    fn reads_and_writes_past_the_end_are_refused() {
        let disk = MemoryDisk::new();
        disk.set_len(100).expect("grow");
        let mut out = [0u8; 10];
        assert!(disk.read(95, &mut out).is_err());
        assert!(disk.write(95, &[1; 10]).is_err());
        assert!(disk.read(u64::MAX - 2, &mut out).is_err());
        assert!(disk.write(90, &[1; 10]).is_ok());
    }

    #[test]
    fn a_snapshot_keeps_the_bytes_of_its_instant() {
        let disk = MemoryDisk::new();
        disk.set_len(10).expect("grow");
        disk.write(0, b"0123456789").expect("write");
        let snap = disk.image().expect("image");
        disk.write(0, b"abcdefghij").expect("write");
        let mut out = [0u8; 10];
        snap.read(0, &mut out).expect("read");
        assert_eq!(&out, b"0123456789");
        assert_eq!(snap.len().expect("len"), 10);
    }
}
