//! Compressed captures: gzip and zstd, recognised by their magic bytes.
//!
//! tcpdump's rotation (`-C`/`-G` with `-z gzip`) leaves `.pcap.gz` files, and
//! tshark reads gzip and zstd captures as they are; so do we, from files and
//! from standard input alike, whatever the file is called. The stream is
//! decompressed as it is read (memory stays bounded by the decoders' windows),
//! and an error in the compressed data names its byte offset in the
//! compressed input, which is what `gzip -t` or `zstd -t` would point at.
//!
//! Gzip: RFC 1952, several members in a row (`cat a.gz b.gz`, pigz) read as
//! one stream, as gzip -d does. Zstd: RFC 8878 frames, several in a row, and
//! skippable frames ignored, as zstd -d does.

use std::fmt;
use std::io::{self, BufReader, Read};

/// Compressed input is read from its source in blocks of this size.
const READ_BLOCK: usize = 256 << 10;

/// How the input is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "uncompressed",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        })
    }
}

/// A fault in the compressed data (not in reading it), carried inside the
/// `io::Error` the decompressing reader returns.
#[derive(Debug)]
pub struct DecompressError {
    pub compression: Compression,
    /// Where in the compressed input the fault lies: the decoder had taken
    /// the bytes before `compressed_offset` and was working on the ones up
    /// to `compressed_end` when it found the fault.
    pub compressed_offset: u64,
    pub compressed_end: u64,
    /// The compressed stream stopped in the middle (rather than being wrong).
    pub truncated: bool,
    pub detail: String,
}

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.truncated {
            write!(
                f,
                "the {} stream ends early, after {} compressed bytes ({})",
                self.compression, self.compressed_offset, self.detail
            )
        } else {
            write!(
                f,
                "the {} stream is corrupt at compressed ",
                self.compression
            )?;
            if self.compressed_end > self.compressed_offset {
                write!(
                    f,
                    "bytes {}..{}",
                    self.compressed_offset, self.compressed_end
                )?;
            } else {
                write!(f, "byte {}", self.compressed_offset)?;
            }
            write!(f, " ({})", self.detail)
        }
    }
}

impl std::error::Error for DecompressError {}

/// Looks at the first bytes of `src` and returns a reader of the
/// decompressed capture, and which compression it found. Uncompressed input
/// is passed through untouched (no extra copy).
pub fn decompressed<R: Read + Send + 'static>(
    mut src: R,
) -> io::Result<(Box<dyn Read + Send>, Compression)> {
    let mut head = [0u8; 4];
    let mut have = 0;
    while have < head.len() {
        match src.read(&mut head[have..]) {
            Ok(0) => break,
            Ok(k) => have += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let compression = match head[..have] {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd] => Compression::Zstd,
        [0x04, 0x22, 0x4d, 0x18] => return Err(unread("lz4", "lz4 -dc")),
        [0xfd, 0x37, 0x7a, 0x58] => return Err(unread("xz", "xz -dc")),
        [0x42, 0x5a, 0x68, _] => return Err(unread("bzip2", "bzip2 -dc")),
        _ => Compression::None,
    };
    let whole: Source = Box::new(io::Cursor::new(head).take(have as u64).chain(src));
    if compression == Compression::None {
        return Ok((whole, compression));
    }
    let counted = BufReader::with_capacity(
        READ_BLOCK,
        Counted {
            inner: whole,
            consumed: 0,
            failed: false,
            ended: false,
        },
    );
    let decoder = match compression {
        Compression::Gzip => Decoder::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(counted))),
        _ => Decoder::Zstd(zstd::stream::read::Decoder::with_buffer(counted)?),
    };
    Ok((
        Box::new(Decompressing {
            decoder,
            compression,
        }),
        compression,
    ))
}

type Source = Box<dyn Read + Send>;

/// A compression recognised but not read: say how to read it.
fn unread(what: &str, tool: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "compressed with {what}: only gzip and zstd are read; decompress it first \
             (`{tool} FILE | tcpdoctor analyze -`)"
        ),
    )
}

/// The compressed source, counting what it hands out.
struct Counted {
    inner: Source,
    consumed: u64,
    /// The source itself failed: the error is not the data's fault.
    failed: bool,
    ended: bool,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(k) => {
                self.ended |= k == 0 && !buf.is_empty();
                self.consumed += k as u64;
                Ok(k)
            }
            Err(e) => {
                self.failed |= e.kind() != io::ErrorKind::Interrupted;
                Err(e)
            }
        }
    }
}

enum Decoder {
    Gzip(Box<flate2::bufread::MultiGzDecoder<BufReader<Counted>>>),
    Zstd(zstd::stream::read::Decoder<'static, BufReader<Counted>>),
}

struct Decompressing {
    decoder: Decoder,
    compression: Compression,
}

impl Decompressing {
    fn source(&self) -> &BufReader<Counted> {
        match &self.decoder {
            Decoder::Gzip(d) => d.get_ref(),
            Decoder::Zstd(d) => d.get_ref(),
        }
    }
}

impl Read for Decompressing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let result = match &mut self.decoder {
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
        };
        result.map_err(|e| {
            let source = self.source();
            let counted = source.get_ref();
            if e.kind() == io::ErrorKind::Interrupted || counted.failed {
                return e;
            }
            // What the decoder took: read from the source, less what still
            // waits in the buffer.
            let compressed_offset = counted.consumed - source.buffer().len() as u64;
            // The decoders say "unexpected end of file" (gzip) or "incomplete
            // frame" (zstd) for a stream cut short; the source having ended
            // with nothing left over is what tells a cut from damage.
            let truncated = e.kind() == io::ErrorKind::UnexpectedEof
                || (counted.ended && source.buffer().is_empty());
            io::Error::new(
                io::ErrorKind::InvalidData,
                DecompressError {
                    compression: self.compression,
                    compressed_offset,
                    compressed_end: counted.consumed,
                    truncated,
                    detail: e.to_string(),
                },
            )
        })
    }
}
