//! Writing captures: classic pcap (what tcpdump writes) and a minimal pcapng,
//! used by the lab and by tests that build captures in memory.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tcpdoctor_wire::{LinkType, Timestamp};

/// Writes a pcap file with nanosecond timestamps in little-endian order.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, link: LinkType, snaplen: u32) -> io::Result<Self> {
        out.write_all(&0xA1B2_3C4Du32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&[0; 8])?;
        out.write_all(&snaplen.to_le_bytes())?;
        out.write_all(&link.to_raw().to_le_bytes())?;
        Ok(PcapWriter { out })
    }

    pub fn write_packet(&mut self, ts: Timestamp, data: &[u8], orig_len: u32) -> io::Result<()> {
        let ns = ts.nanos();
        let sec = ns.div_euclid(1_000_000_000) as u32;
        let frac = ns.rem_euclid(1_000_000_000) as u32;
        self.out.write_all(&sec.to_le_bytes())?;
        self.out.write_all(&frac.to_le_bytes())?;
        self.out.write_all(&(data.len() as u32).to_le_bytes())?;
        self.out.write_all(&orig_len.to_le_bytes())?;
        self.out.write_all(data)
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Writes a little-endian pcapng section; each interface gets its own
/// timestamp resolution (`tsresol`, as in the `if_tsresol` option byte).
pub struct PcapNgWriter<W: Write> {
    out: W,
    resolutions: Vec<u8>,
}

impl<W: Write> PcapNgWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        // SHB: type, length 28, byte-order magic, version 1.0, section length -1.
        out.write_all(&0x0A0D_0D0Au32.to_le_bytes())?;
        out.write_all(&28u32.to_le_bytes())?;
        out.write_all(&0x1A2B_3C4Du32.to_le_bytes())?;
        out.write_all(&1u16.to_le_bytes())?;
        out.write_all(&0u16.to_le_bytes())?;
        out.write_all(&(-1i64).to_le_bytes())?;
        out.write_all(&28u32.to_le_bytes())?;
        Ok(PcapNgWriter {
            out,
            resolutions: Vec::new(),
        })
    }

    /// Adds an interface; returns its id.
    pub fn add_interface(&mut self, link: LinkType, snaplen: u32, tsresol: u8) -> io::Result<u32> {
        // IDB with one option (if_tsresol) and opt_endofopt.
        let len: u32 = 20 + 8 + 4;
        self.out.write_all(&1u32.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&(link.to_raw() as u16).to_le_bytes())?;
        self.out.write_all(&0u16.to_le_bytes())?;
        self.out.write_all(&snaplen.to_le_bytes())?;
        self.out.write_all(&9u16.to_le_bytes())?;
        self.out.write_all(&1u16.to_le_bytes())?;
        self.out.write_all(&[tsresol, 0, 0, 0])?;
        self.out.write_all(&[0, 0, 0, 0])?;
        self.out.write_all(&len.to_le_bytes())?;
        self.resolutions.push(tsresol);
        Ok((self.resolutions.len() - 1) as u32)
    }

    /// Writes an enhanced packet block; `units` is the timestamp in the interface's resolution.
    pub fn write_packet(
        &mut self,
        iface: u32,
        units: u64,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        self.write_packet_with_comment(iface, units, data, orig_len, None)
    }

    /// [`PcapNgWriter::write_packet`] with an `opt_comment` (UTF-8; Wireshark
    /// shows it as `frame.comment`). Options are padded to 32 bits and end
    /// with `opt_endofopt`. A comment longer than 65,535 bytes is cut at a
    /// character boundary.
    pub fn write_packet_with_comment(
        &mut self,
        iface: u32,
        units: u64,
        data: &[u8],
        orig_len: u32,
        comment: Option<&str>,
    ) -> io::Result<()> {
        let padded = (data.len() + 3) & !3;
        let comment = comment.map(|c| {
            let mut end = c.len().min(usize::from(u16::MAX));
            while !c.is_char_boundary(end) {
                end -= 1;
            }
            &c.as_bytes()[..end]
        });
        // opt_comment (code 1, length, value padded) then opt_endofopt.
        let options = comment.map_or(0, |c| 4 + ((c.len() + 3) & !3) + 4);
        let len = (32 + padded + options) as u32;
        self.out.write_all(&6u32.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(&iface.to_le_bytes())?;
        self.out.write_all(&((units >> 32) as u32).to_le_bytes())?;
        self.out.write_all(&(units as u32).to_le_bytes())?;
        self.out.write_all(&(data.len() as u32).to_le_bytes())?;
        self.out.write_all(&orig_len.to_le_bytes())?;
        self.out.write_all(data)?;
        self.out.write_all(&[0u8; 3][..padded - data.len()])?;
        if let Some(c) = comment {
            self.out.write_all(&1u16.to_le_bytes())?;
            self.out.write_all(&(c.len() as u16).to_le_bytes())?;
            self.out.write_all(c)?;
            self.out
                .write_all(&[0u8; 3][..((c.len() + 3) & !3) - c.len()])?;
            self.out.write_all(&[0u8; 4])?;
        }
        self.out.write_all(&len.to_le_bytes())
    }

    /// Writes a block of a type this reader must skip.
    pub fn write_unknown_block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        let padded = (body.len() + 3) & !3;
        let len = (12 + padded) as u32;
        self.out.write_all(&block_type.to_le_bytes())?;
        self.out.write_all(&len.to_le_bytes())?;
        self.out.write_all(body)?;
        self.out.write_all(&vec![0u8; padded - body.len()])?;
        self.out.write_all(&len.to_le_bytes())
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// An output file written under a temporary name in its own directory
/// (`.NAME.tmp.PID`) and renamed to its name by [`Staged::commit`], once
/// complete and synced: a reader never finds a half-written file under the
/// final name, and a file already there stays as it was until then. Dropped
/// without a commit (an error, a full disk), the temporary file is removed.
/// Write errors name the final path (`out.html: No space left on device`)
/// and keep their [`io::ErrorKind`].
pub struct Staged {
    path: PathBuf,
    tmp: PathBuf,
    file: File,
    committed: bool,
}

impl Staged {
    /// Creates the temporary file next to `path`.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Staged> {
        let path = path.as_ref().to_path_buf();
        let name = path
            .file_name()
            .ok_or_else(|| named(&path, io::Error::other("not a file name")))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        let file = File::create(&tmp).map_err(|e| named(&path, e))?;
        Ok(Staged {
            path,
            tmp,
            file,
            committed: false,
        })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file's path (where the bytes are until the commit).
    pub fn temporary_path(&self) -> &Path {
        &self.tmp
    }

    /// A writer into the temporary file (unbuffered: wrap it in a
    /// `BufWriter`, and flush that before the commit).
    pub fn writer(&self) -> io::Result<StagedWriter> {
        Ok(StagedWriter {
            file: self.file.try_clone().map_err(|e| named(&self.path, e))?,
            path: self.path.clone(),
        })
    }

    /// Syncs the temporary file to disk (a full disk can show only here)
    /// and renames it to the final path.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all().map_err(|e| named(&self.path, e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| named(&self.path, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes into a [`Staged`] file; errors name the final path.
pub struct StagedWriter {
    file: File,
    path: PathBuf,
}

impl Write for StagedWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf).map_err(|e| named(&self.path, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush().map_err(|e| named(&self.path, e))
    }
}

/// `e` with the path in front of its message, its kind kept.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
