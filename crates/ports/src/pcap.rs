//! Streaming pcap and pcapng input, classic pcap output.
//!
//! [`PcapReader`] reads one record at a time (the file is never loaded whole; use
//! [`read_all`] when a replay needs every record in memory). It understands classic pcap in
//! either byte order with microsecond (`0xa1b2c3d4`) or nanosecond (`0xa1b23c4d`) magic, and
//! pcapng with any number of sections and interfaces: every interface's link type,
//! `if_tsresol` (default 10^-6) and `if_tsoffset` are honoured, Enhanced and Simple Packet
//! Blocks are read and every other block is skipped. Parsing of the containers is done by
//! the `pcap-parser` crate; this module adds the bookkeeping (record counts, byte offsets,
//! timestamps in nanoseconds) and error messages that name the file.
//!
//! A truncated or corrupt file yields every complete record first, then one error, then
//! `None`.
//!
//! [`PcapWriter`] writes classic pcap: nanosecond magic when the precision is
//! [`Precision::Nano`], microsecond magic otherwise.

use packet::{Precision, Timestamp};
use pcap_parser::pcapng::{Block, OptionCode};
use pcap_parser::traits::PcapReaderIterator;
// The parser's own error type: named `ParserError` here so that it is never confused with
// this module's `PcapError` (which wraps it, as `Corruption::BadHeader`, when the file
// header does not parse).
use pcap_parser::PcapError as ParserError;
use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapNGReader};
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Link type of Ethernet captures (`DLT_EN10MB` / `LINKTYPE_ETHERNET`).
pub const DLT_EN10MB: u32 = 1;

/// Snapshot length written into the header of the files [`PcapWriter`] creates.
pub const WRITE_SNAPLEN: u32 = 262_144;

/// Largest record or block accepted (larger ones are reported as corrupt).
pub const MAX_RECORD_LEN: usize = 16 << 20;

/// Initial size of the reader's buffer.
const BUFFER_SIZE: usize = 1 << 16;

/// Largest captured length a classic pcap record may have, whatever the header's snaplen
/// (libpcap's `MAXIMUM_SNAPLEN`).
const LEGACY_MAX_CAPLEN: u32 = 262_144;

/// Magic numbers of the formats read.
const MAGIC_MICRO: u32 = 0xa1b2_c3d4;
const MAGIC_NANO: u32 = 0xa1b2_3c4d;
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;
const MAGIC_PCAPNG: u32 = 0x0a0d_0d0a;

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Capture time in nanoseconds since the Unix epoch.
    pub timestamp: Timestamp,
    /// Resolution the file stored the timestamp with.
    pub precision: Precision,
    /// Length of the packet on the wire (may exceed `data.len()` when the capture was cut).
    pub orig_len: u32,
    /// Captured bytes, starting at the link-layer header.
    pub data: Vec<u8>,
}

/// Why reading or writing a capture failed. Every variant names the file.
#[derive(Debug)]
pub enum PcapError {
    /// The operating system refused to open, read or write the file.
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file has no bytes at all.
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The file starts with neither a pcap nor a pcapng magic number.
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The first bytes of the file (zero-padded when shorter than four bytes).
        found: [u8; 4],
    },
    /// The file ends in the middle of its header, a record or a block.
    Truncated {
        /// The file.
        path: PathBuf,
        /// Complete packets read before the cut.
        records_read: u64,
        /// Byte offset where the incomplete record or block starts.
        offset: u64,
    },
    /// A header, record or block cannot be parsed.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Complete packets read before the corrupt part.
        records_read: u64,
        /// Byte offset of the corrupt record or block.
        offset: u64,
        /// What is wrong.
        what: Corruption,
    },
    /// The capture's link type is not Ethernet ([`PcapReader::open_ethernet`]).
    UnsupportedLinktype {
        /// The file.
        path: PathBuf,
        /// The link type found.
        linktype: u32,
    },
}

/// What is wrong in a corrupt capture (the `what` of [`PcapError::Corrupt`]).
#[derive(Debug, thiserror::Error)]
pub enum Corruption {
    /// The pcap-parser crate could not parse the file header.
    #[error("bad file header ({0:?})")]
    BadHeader(#[source] ParserError<&'static [u8]>),
    /// A classic pcap header with a version other than 2.0 to 2.4.
    #[error("unsupported pcap version {major}.{minor}")]
    PcapVersion {
        /// Major version found.
        major: u16,
        /// Minor version found.
        minor: u16,
    },
    /// A pcapng section header with a version other than 1.0 or 1.2.
    #[error("unsupported pcapng version {major}.{minor}")]
    PcapngVersion {
        /// Major version found.
        major: u16,
        /// Minor version found.
        minor: u16,
    },
    /// A classic pcap record longer than the file's snaplen allows.
    #[error("captured length {caplen} exceeds {max}")]
    Caplen {
        /// Captured length of the record.
        caplen: u32,
        /// Largest length accepted.
        max: u32,
    },
    /// A block whose header the parser does not recognize.
    #[error("block header not recognized")]
    BlockHeader,
    /// A block the parser cannot read (`kind`: what the parser stopped on).
    #[error("unparsable block ({})", .kind.description())]
    Unparsable {
        /// What the parser stopped on.
        kind: pcap_parser::nom::error::ErrorKind,
    },
    /// A record or block longer than [`MAX_RECORD_LEN`].
    #[error("record or block longer than {MAX_RECORD_LEN} bytes")]
    TooLong,
    /// An interface description with an `if_tsresol` no timestamp unit can be made of.
    #[error("interface {interface} has an invalid if_tsresol {tsresol:#04x}")]
    Tsresol {
        /// Index of the interface in its section.
        interface: usize,
        /// The option's value.
        tsresol: u8,
    },
    /// An enhanced packet block naming an interface not described before it.
    #[error("packet on interface {interface} but only {described} described")]
    UnknownInterface {
        /// Interface the packet names.
        interface: u32,
        /// Interfaces described in the section so far.
        described: usize,
    },
    /// A simple packet block before any interface description block.
    #[error("simple packet block before any interface description")]
    NoInterface,
}

impl PcapError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            PcapError::Io { path, .. }
            | PcapError::Empty { path }
            | PcapError::BadMagic { path, .. }
            | PcapError::Truncated { path, .. }
            | PcapError::Corrupt { path, .. }
            | PcapError::UnsupportedLinktype { path, .. } => path,
        }
    }

    /// A short kebab-case name of the error kind (for counters and tables).
    pub fn kind(&self) -> &'static str {
        match self {
            PcapError::Io { .. } => "io",
            PcapError::Empty { .. } => "empty",
            PcapError::BadMagic { .. } => "bad-magic",
            PcapError::Truncated { .. } => "truncated",
            PcapError::Corrupt { .. } => "corrupt",
            PcapError::UnsupportedLinktype { .. } => "unsupported-linktype",
        }
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path().display();
        match self {
            PcapError::Io { source, .. } => write!(f, "{p}: {source}"),
            PcapError::Empty { .. } => write!(f, "{p}: empty file (no pcap header)"),
            PcapError::BadMagic { found, .. } => write!(
                f,
                "{p}: not a pcap or pcapng file (magic {:02x}{:02x}{:02x}{:02x})",
                found[0], found[1], found[2], found[3]
            ),
            PcapError::Truncated {
                records_read: 0,
                offset: 0,
                ..
            } => write!(f, "{p}: truncated file header"),
            PcapError::Truncated {
                records_read,
                offset,
                ..
            } => write!(
                f,
                "{p}: truncated record at byte {offset} after {records_read} complete packet{}",
                plural(*records_read)
            ),
            PcapError::Corrupt {
                records_read: 0,
                offset: 0,
                what,
                ..
            } => write!(f, "{p}: bad file header: {what}"),
            PcapError::Corrupt {
                records_read,
                offset,
                what,
                ..
            } => write!(
                f,
                "{p}: corrupt data at byte {offset} after {records_read} complete packet{}: {what}",
                plural(*records_read)
            ),
            PcapError::UnsupportedLinktype { linktype, .. } => {
                write!(
                    f,
                    "{p}: link type {linktype} is not Ethernet ({DLT_EN10MB})"
                )
            }
        }
    }
}

impl std::error::Error for PcapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PcapError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// One pcapng interface as described by its Interface Description Block.
#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: u32,
    /// Timestamp units per second.
    units_per_sec: u64,
    /// Seconds added to every timestamp (`if_tsoffset`).
    offset_secs: i64,
    /// Snapshot length (0: unlimited).
    snaplen: u32,
}

impl Interface {
    fn precision(&self) -> Precision {
        if self.units_per_sec > 1_000_000 {
            Precision::Nano
        } else {
            Precision::Micro
        }
    }

    fn timestamp(&self, units: u64) -> Timestamp {
        let per = u128::from(self.units_per_sec.max(1));
        let nanos = u128::from(units) * 1_000_000_000 / per;
        let offset = i128::from(self.offset_secs) * 1_000_000_000;
        let total = (nanos as i128).saturating_add(offset);
        Timestamp(total.clamp(0, i128::from(u64::MAX)) as u64)
    }
}

/// What the file looks like.
enum Format {
    Legacy {
        nano: bool,
        linktype: u32,
        big_endian: bool,
        max_caplen: u32,
    },
    Ng {
        interfaces: Vec<Interface>,
        /// Byte order of the current section.
        big_endian: bool,
    },
}

/// One step of the reader.
enum Step {
    /// A block without a packet (header, interface description, statistics...).
    Meta,
    /// A packet.
    Record(Record),
    /// Clean end of file.
    Eof,
    /// The error that stops reading.
    Err(PcapError),
}

/// What to do after the parser answered (owned, so the parser's buffer can be touched).
enum Action {
    Consume(usize, Result<Option<Record>, Corruption>),
    Refill,
    Grow,
    Stop(Step),
}

/// A streaming reader of pcap and pcapng files.
pub struct PcapReader {
    path: PathBuf,
    inner: Box<dyn PcapReaderIterator + Send>,
    format: Format,
    capacity: usize,
    linktype: u32,
    precision: Precision,
    records: u64,
    pending: Option<Step>,
    done: bool,
}

impl fmt::Debug for PcapReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapReader")
            .field("path", &self.path)
            .field("linktype", &self.linktype)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

fn io_err(path: &Path, source: std::io::Error) -> PcapError {
    PcapError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads up to `buf.len()` bytes, fewer only at end of file.
fn read_prefix(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A file whose first bytes were already read: reads give them again, then the rest.
struct Replayed {
    head: Vec<u8>,
    at: usize,
    rest: File,
}

impl Read for Replayed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let from_head = (self.head.len() - self.at).min(buf.len());
        buf[..from_head].copy_from_slice(&self.head[self.at..self.at + from_head]);
        self.at += from_head;
        if from_head == buf.len() {
            return Ok(from_head);
        }
        // Fill the rest of `buf` from the file in the same call, as a read of the whole
        // file would (the parsers check the header from their first read alone).
        match self.rest.read(&mut buf[from_head..]) {
            Ok(k) => Ok(from_head + k),
            Err(_) if from_head > 0 => Ok(from_head),
            Err(e) => Err(e),
        }
    }
}

impl PcapReader {
    /// [`PcapReader::open`] for a capture that must be Ethernet ([`DLT_EN10MB`]), as
    /// every input of a chain is: any other link type is [`PcapError::UnsupportedLinktype`].
    pub fn open_ethernet(path: &Path) -> Result<PcapReader, PcapError> {
        let r = PcapReader::open(path)?;
        if r.linktype() != DLT_EN10MB {
            return Err(PcapError::UnsupportedLinktype {
                path: path.to_path_buf(),
                linktype: r.linktype(),
            });
        }
        Ok(r)
    }

    /// Opens a pcap or pcapng file and reads its header (for pcapng, up to the first
    /// interface description, so [`PcapReader::linktype`] is known before any packet).
    pub fn open(path: &Path) -> Result<PcapReader, PcapError> {
        let mut file = File::open(path).map_err(|e| io_err(path, e))?;
        let mut head = [0u8; 24];
        let n = read_prefix(&mut file, &mut head).map_err(|e| io_err(path, e))?;
        if n == 0 {
            return Err(PcapError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut found = [0u8; 4];
        found[..n.min(4)].copy_from_slice(&head[..n.min(4)]);
        let le = u32::from_le_bytes(found);
        let be = u32::from_be_bytes(found);
        let truncated_header = || PcapError::Truncated {
            path: path.to_path_buf(),
            records_read: 0,
            offset: 0,
        };
        let is_ng = le == MAGIC_PCAPNG;
        let legacy_magic = [MAGIC_MICRO, MAGIC_NANO, MAGIC_MODIFIED];
        let big_endian = legacy_magic.contains(&be);
        if !is_ng && !big_endian && !legacy_magic.contains(&le) {
            return Err(PcapError::BadMagic {
                path: path.to_path_buf(),
                found,
            });
        }
        // The parser reads the header again: from the bytes already read, then the file
        // (not by reopening it, so a pipe or FIFO works as an input).
        let file = Replayed {
            head: head[..n].to_vec(),
            at: 0,
            rest: file,
        };
        let map_open_err = |e: ParserError<&[u8]>| match e {
            ParserError::Incomplete(_) | ParserError::UnexpectedEof | ParserError::Eof => {
                truncated_header()
            }
            ParserError::ReadError => io_err(path, std::io::Error::other("read error")),
            other => PcapError::Corrupt {
                path: path.to_path_buf(),
                records_read: 0,
                offset: 0,
                what: Corruption::BadHeader(other.to_owned_vec()),
            },
        };
        let (inner, format): (Box<dyn PcapReaderIterator + Send>, Format) = if is_ng {
            let r = PcapNGReader::new(BUFFER_SIZE, file).map_err(map_open_err)?;
            (
                Box::new(r),
                Format::Ng {
                    interfaces: Vec::new(),
                    big_endian: false,
                },
            )
        } else {
            if n < 24 {
                return Err(truncated_header());
            }
            let word = |i: usize| {
                let b = [head[i], head[i + 1], head[i + 2], head[i + 3]];
                if big_endian {
                    u32::from_be_bytes(b)
                } else {
                    u32::from_le_bytes(b)
                }
            };
            let magic = word(0);
            let half = |i: usize| {
                let b = [head[i], head[i + 1]];
                if big_endian {
                    u16::from_be_bytes(b)
                } else {
                    u16::from_le_bytes(b)
                }
            };
            let (major, minor) = (half(4), half(6));
            // As libpcap: version 2.0 to 2.4 only.
            if major != 2 || minor > 4 {
                return Err(PcapError::Corrupt {
                    path: path.to_path_buf(),
                    records_read: 0,
                    offset: 0,
                    what: Corruption::PcapVersion { major, minor },
                });
            }
            let snaplen = word(16);
            // As libpcap: the upper bits carry FCS information, not the link type.
            let linktype = word(20) & 0x03ff_ffff;
            let r = LegacyPcapReader::new(BUFFER_SIZE, file).map_err(map_open_err)?;
            (
                Box::new(r),
                Format::Legacy {
                    nano: magic == MAGIC_NANO,
                    linktype,
                    big_endian,
                    max_caplen: snaplen.clamp(LEGACY_MAX_CAPLEN, MAX_RECORD_LEN as u32),
                },
            )
        };
        let (linktype, precision) = match &format {
            Format::Legacy {
                linktype,
                nano: true,
                ..
            } => (*linktype, Precision::Nano),
            Format::Legacy { linktype, .. } => (*linktype, Precision::Micro),
            Format::Ng { .. } => (0, Precision::Micro),
        };
        let mut reader = PcapReader {
            path: path.to_path_buf(),
            inner,
            format,
            capacity: BUFFER_SIZE,
            linktype,
            precision,
            records: 0,
            pending: None,
            done: false,
        };
        if matches!(reader.format, Format::Ng { .. }) {
            // Read up to the first interface description (or whatever comes first).
            loop {
                if let Format::Ng { interfaces, .. } = &reader.format {
                    if let Some(first) = interfaces.first() {
                        reader.linktype = first.linktype;
                        reader.precision = first.precision();
                        break;
                    }
                }
                match reader.step() {
                    Step::Meta => {}
                    // A bad section header: the file header itself is unusable.
                    Step::Err(e @ PcapError::Corrupt { offset: 0, .. }) => return Err(e),
                    other => {
                        reader.pending = Some(other);
                        break;
                    }
                }
            }
        }
        Ok(reader)
    }

    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The link type of the current interface: the one of the last record returned (before
    /// any record, the file's or its first interface's; 0 when a pcapng file describes no
    /// interface). [`DLT_EN10MB`] (1) is Ethernet.
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// The timestamp precision of the current interface (as [`PcapReader::linktype`]).
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Number of complete packet records returned so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }

    /// The next packet: `None` at the end of the file; after an error (truncated or corrupt
    /// data, I/O failure), that error once, then `None`.
    pub fn next_record(&mut self) -> Option<Result<Record, PcapError>> {
        loop {
            if self.done {
                return None;
            }
            let step = match self.pending.take() {
                Some(s) => s,
                None => self.step(),
            };
            match step {
                Step::Meta => {}
                Step::Record(r) => {
                    self.records += 1;
                    return Some(Ok(r));
                }
                Step::Eof => {
                    self.done = true;
                    return None;
                }
                Step::Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }

    fn corrupt(&self, what: Corruption) -> PcapError {
        PcapError::Corrupt {
            path: self.path.clone(),
            records_read: self.records,
            offset: self.inner.consumed() as u64,
            what,
        }
    }

    /// Checks the length of the classic pcap record at the front of the buffer before the
    /// parser tries to buffer it whole.
    fn check_legacy_caplen(&self) -> Option<PcapError> {
        let Format::Legacy {
            big_endian,
            max_caplen,
            ..
        } = self.format
        else {
            return None;
        };
        if self.inner.consumed() == 0 {
            return None; // the file header comes first
        }
        let d = self.inner.data();
        let b: [u8; 4] = d.get(8..12)?.try_into().ok()?;
        let caplen = if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        (caplen > max_caplen).then(|| {
            self.corrupt(Corruption::Caplen {
                caplen,
                max: max_caplen,
            })
        })
    }

    /// Reads one block (refilling or growing the buffer as needed).
    fn step(&mut self) -> Step {
        loop {
            if let Some(e) = self.check_legacy_caplen() {
                return Step::Err(e);
            }
            let action = match self.inner.next() {
                Ok((len, block)) => {
                    let (step, linktype) = convert_block(&mut self.format, block);
                    if let Some(l) = linktype {
                        self.linktype = l;
                    }
                    Action::Consume(len, step)
                }
                Err(ParserError::Eof) => Action::Stop(Step::Eof),
                Err(ParserError::Incomplete(_)) => Action::Refill,
                Err(ParserError::BufferTooSmall) => Action::Grow,
                Err(ParserError::UnexpectedEof) => Action::Stop(Step::Err(PcapError::Truncated {
                    path: self.path.clone(),
                    records_read: self.records,
                    offset: self.inner.consumed() as u64,
                })),
                Err(ParserError::ReadError) => Action::Stop(Step::Err(io_err(
                    &self.path,
                    std::io::Error::other("read error"),
                ))),
                Err(ParserError::HeaderNotRecognized) => {
                    Action::Stop(Step::Err(self.corrupt(Corruption::BlockHeader)))
                }
                Err(ParserError::NomError(_, kind)) | Err(ParserError::OwnedNomError(_, kind)) => {
                    Action::Stop(Step::Err(self.corrupt(Corruption::Unparsable { kind })))
                }
            };
            match action {
                Action::Consume(len, Ok(Some(record))) => {
                    self.precision = record.precision;
                    self.inner.consume(len);
                    return Step::Record(record);
                }
                Action::Consume(len, Ok(None)) => {
                    self.inner.consume(len);
                    return Step::Meta;
                }
                Action::Consume(_, Err(what)) => return Step::Err(self.corrupt(what)),
                Action::Refill => {
                    if let Err(e) = self.inner.refill() {
                        let msg = format!("{e:?}");
                        return Step::Err(io_err(&self.path, std::io::Error::other(msg)));
                    }
                }
                Action::Grow => {
                    let want = self.capacity.saturating_mul(2);
                    if want > MAX_RECORD_LEN + BUFFER_SIZE || !self.inner.grow(want) {
                        return Step::Err(self.corrupt(Corruption::TooLong));
                    }
                    self.capacity = want;
                }
                Action::Stop(step) => return step,
            }
        }
    }
}

/// Turns a parsed block into a record (`Ok(None)` for blocks without a packet), updating the
/// interface list; also returns the link type of the record's interface.
fn convert_block(
    format: &mut Format,
    block: PcapBlockOwned<'_>,
) -> (Result<Option<Record>, Corruption>, Option<u32>) {
    match (format, block) {
        (Format::Legacy { nano, linktype, .. }, PcapBlockOwned::Legacy(b)) => {
            let frac = u64::from(b.ts_usec);
            let (nanos, precision) = if *nano {
                (frac, Precision::Nano)
            } else {
                (frac.saturating_mul(1000), Precision::Micro)
            };
            let ts = Timestamp(
                u64::from(b.ts_sec)
                    .saturating_mul(1_000_000_000)
                    .saturating_add(nanos),
            );
            let record = Record {
                timestamp: ts,
                precision,
                orig_len: b.origlen,
                data: b.data.to_vec(),
            };
            (Ok(Some(record)), Some(*linktype))
        }
        (Format::Legacy { .. }, _) => (Ok(None), None),
        (
            Format::Ng {
                interfaces,
                big_endian,
            },
            PcapBlockOwned::NG(block),
        ) => match block {
            Block::SectionHeader(shb) => {
                // As libpcap: pcapng 1.0 (and the 1.2 some writers used) only.
                let (major, minor) = (shb.major_version, shb.minor_version);
                if major != 1 || !(minor == 0 || minor == 2) {
                    return (Err(Corruption::PcapngVersion { major, minor }), None);
                }
                // Interface ids are local to a section.
                interfaces.clear();
                *big_endian = shb.big_endian();
                (Ok(None), None)
            }
            Block::InterfaceDescription(idb) => {
                let Some(units_per_sec) = idb.ts_resolution() else {
                    return (
                        Err(Corruption::Tsresol {
                            interface: interfaces.len(),
                            tsresol: idb.if_tsresol,
                        }),
                        None,
                    );
                };
                // pcap-parser reads if_tsoffset as little-endian whatever the section's
                // byte order: decode it here.
                let offset_secs = idb
                    .options
                    .iter()
                    .find(|o| o.code == OptionCode::IfTsoffset)
                    .and_then(|o| o.value.get(..8))
                    .and_then(|v| <[u8; 8]>::try_from(v).ok())
                    .map_or(0, |b| {
                        if *big_endian {
                            i64::from_be_bytes(b)
                        } else {
                            i64::from_le_bytes(b)
                        }
                    });
                interfaces.push(Interface {
                    linktype: u32::from(idb.linktype.0 as u16),
                    units_per_sec,
                    offset_secs,
                    snaplen: idb.snaplen,
                });
                (Ok(None), None)
            }
            Block::EnhancedPacket(epb) => {
                let Some(iface) = interfaces.get(epb.if_id as usize) else {
                    return (
                        Err(Corruption::UnknownInterface {
                            interface: epb.if_id,
                            described: interfaces.len(),
                        }),
                        None,
                    );
                };
                let caplen = (epb.caplen as usize).min(epb.data.len());
                let units = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let record = Record {
                    timestamp: iface.timestamp(units),
                    precision: iface.precision(),
                    orig_len: epb.origlen,
                    data: epb.data.get(..caplen).unwrap_or_default().to_vec(),
                };
                (Ok(Some(record)), Some(iface.linktype))
            }
            Block::SimplePacket(spb) => {
                let Some(iface) = interfaces.first() else {
                    return (Err(Corruption::NoInterface), None);
                };
                let mut caplen = (spb.origlen as usize).min(spb.data.len());
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen as usize);
                }
                let record = Record {
                    // Simple Packet Blocks carry no timestamp.
                    timestamp: Timestamp(0),
                    precision: iface.precision(),
                    orig_len: spb.origlen,
                    data: spb.data.get(..caplen).unwrap_or_default().to_vec(),
                };
                (Ok(Some(record)), Some(iface.linktype))
            }
            _ => (Ok(None), None),
        },
        (Format::Ng { .. }, _) => (Ok(None), None),
    }
}

/// Reads a whole capture into memory (for replay): every complete record, plus the error
/// that stopped reading early, if any. Fails outright only when the file cannot be opened
/// or its header is unusable.
pub fn read_all(path: &Path) -> Result<(Vec<Record>, Option<PcapError>), PcapError> {
    let mut reader = PcapReader::open(path)?;
    let mut records = Vec::new();
    while let Some(r) = reader.next_record() {
        match r {
            Ok(rec) => records.push(rec),
            Err(e) => return Ok((records, Some(e))),
        }
    }
    Ok((records, None))
}

/// The capture files (`.pcap`, `.pcapng`, `.cap`) under `dir` and its sub-folders, in path
/// order; none when `dir` cannot be read.
pub fn capture_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "pcap" | "pcapng" | "cap"))
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}

/// A buffered writer of classic pcap files.
pub struct PcapWriter {
    path: PathBuf,
    out: BufWriter<File>,
    precision: Precision,
    packets: u64,
}

impl fmt::Debug for PcapWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapWriter")
            .field("path", &self.path)
            .field("precision", &self.precision)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

impl PcapWriter {
    /// Creates (or truncates) `path` and writes the file header: nanosecond magic
    /// `0xa1b23c4d` for [`Precision::Nano`], microsecond magic `0xa1b2c3d4` otherwise, in
    /// little-endian byte order, snaplen [`WRITE_SNAPLEN`].
    pub fn create(path: &Path, precision: Precision, linktype: u32) -> Result<Self, PcapError> {
        let file = File::create(path).map_err(|e| io_err(path, e))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let magic = match precision {
            Precision::Nano => MAGIC_NANO,
            Precision::Micro => MAGIC_MICRO,
        };
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&magic.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&WRITE_SNAPLEN.to_le_bytes());
        header.extend_from_slice(&linktype.to_le_bytes());
        out.write_all(&header).map_err(|e| io_err(path, e))?;
        Ok(PcapWriter {
            path: path.to_path_buf(),
            out,
            precision,
            packets: 0,
        })
    }

    /// Appends a packet captured whole (original length = `data.len()`).
    pub fn write(&mut self, timestamp: Timestamp, data: &[u8]) -> Result<(), PcapError> {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.write_with_orig_len(timestamp, data, len)
    }

    /// Appends a packet whose original length on the wire was `orig_len` (at least
    /// `data.len()` is written as the original length). Timestamps are truncated to the
    /// file's precision; seconds beyond 2^32 - 1 saturate.
    pub fn write_with_orig_len(
        &mut self,
        timestamp: Timestamp,
        data: &[u8],
        orig_len: u32,
    ) -> Result<(), PcapError> {
        let caplen = u32::try_from(data.len()).map_err(|_| {
            io_err(
                &self.path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("packet of {} bytes is too large for pcap", data.len()),
                ),
            )
        })?;
        let secs = u32::try_from(timestamp.secs()).unwrap_or(u32::MAX);
        let frac = match self.precision {
            Precision::Nano => timestamp.subsec_nanos(),
            Precision::Micro => timestamp.subsec_nanos() / 1000,
        };
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&secs.to_le_bytes());
        hdr[4..8].copy_from_slice(&frac.to_le_bytes());
        hdr[8..12].copy_from_slice(&caplen.to_le_bytes());
        hdr[12..16].copy_from_slice(&orig_len.max(caplen).to_le_bytes());
        self.out
            .write_all(&hdr)
            .and_then(|()| self.out.write_all(data))
            .map_err(|e| io_err(&self.path, e))?;
        self.packets += 1;
        Ok(())
    }

    /// Number of packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the buffered records to the file, reporting any write error.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        self.out.flush().map_err(|e| io_err(&self.path, e))
    }

    /// Flushes the buffer and closes the file, reporting any write error.
    pub fn finish(mut self) -> Result<(), PcapError> {
        self.out.flush().map_err(|e| io_err(&self.path, e))?;
        Ok(())
    }
}
