//! `window(size, slide, timeout, udf)`: per-connection TCP reassembly with a user function
//! called on windows of each stream's bytes.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::time::Duration;

use packet::{FlowKey, Packet, Timestamp};

use super::reassembly::{Delivery, Reassembler, ReassemblyStats, SegmentKind};
use super::segment::TcpSegment;
use super::DEFAULT_BUFFER_LIMIT;

/// Default bound on the connections a [`Window`] tracks at once ([`Window::max_connections`]).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1 << 16;

/// Which direction of a connection a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// From the sender of the connection's first packet seen (normally the SYN's sender).
    Client,
    /// Towards it.
    Server,
}

impl Direction {
    fn of(i: usize) -> Direction {
        if i == 0 {
            Direction::Client
        } else {
            Direction::Server
        }
    }
}

/// The identity of one stream: a connection and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId {
    /// The connection's number: 0, 1, … in the order connections first appear.
    pub connection: u64,
    /// The direction.
    pub direction: Direction,
    /// The 5-tuple of this direction's packets.
    pub flow: FlowKey,
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} {:?} {}", self.connection, self.direction, self.flow)
    }
}

/// Why a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Its FIN was reached (every byte before it delivered).
    Fin,
    /// An RST was seen in either direction.
    Rst,
    /// The connection was idle longer than the timeout (in packet time).
    Timeout,
    /// A new SYN with another initial sequence number reused the 5-tuple.
    Replaced,
    /// The connection table was full and this connection was the least recently active.
    Evicted,
    /// [`Window::flush`] (for example at the end of a capture).
    Flush,
}

/// What a UDF call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowKind {
    /// A full window: `size` contiguous bytes.
    Full,
    /// Fewer than `size` bytes before a hole the stream skipped (bytes lost in the capture
    /// or to the buffer bound); the next call starts after the hole, at a larger offset.
    BeforeGap,
    /// The stream ended: the bytes not yet slid past (possibly none). Exactly one per
    /// stream, the last call for it.
    Last(End),
}

/// What the UDF is told besides the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowInfo {
    /// Which stream.
    pub stream: StreamId,
    /// Stream offset of the first byte (bytes since the stream's start: with slide =
    /// size, the offsets of successive calls follow each other unless a hole was skipped).
    pub offset: u64,
    /// Full window, bytes before a hole, or the last call.
    pub kind: WindowKind,
}

/// Why a window could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// `size` was 0.
    #[error("window size must be at least 1 byte")]
    ZeroSize,
    /// `slide` was 0 or larger than `size`.
    #[error("window slide {slide} must be between 1 and the window size {size}")]
    BadSlide {
        /// The window size.
        size: usize,
        /// The slide asked for.
        slide: usize,
    },
}

/// Counters of a [`Window`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WindowStats {
    /// Packets seen.
    pub packets: u64,
    /// Packets without a TCP segment (not IP, not TCP, fragments, malformed): passed on.
    pub not_tcp: u64,
    /// Segments on a connection already closed (both streams ended), e.g. the last ACK.
    pub after_close: u64,
    /// UDF calls.
    pub calls: u64,
    /// Connections opened.
    pub connections: u64,
    /// Streams opened (two per connection).
    pub streams_opened: u64,
    /// Streams closed by FIN or RST.
    pub streams_closed: u64,
    /// Streams closed by the timeout.
    pub streams_timed_out: u64,
    /// Streams closed by eviction, 5-tuple reuse or flush.
    pub streams_dropped: u64,
    /// Reassembly counters summed over every stream (segments, bytes, out-of-order,
    /// duplicates, overflows, skipped holes).
    pub reassembly: ReassemblyStats,
}

/// The bytes of one stream not yet slid past, and the calls on them.
#[derive(Debug, Clone, Default)]
struct Windower {
    buf: Vec<u8>,
    /// Index in `buf` of the first byte not slid past.
    start: usize,
    /// Stream offset of `buf[start]`.
    offset: u64,
}

impl Windower {
    fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Takes contiguous bytes at stream offset `off`.
    fn data<E: FnMut(u64, &[u8], WindowKind)>(
        &mut self,
        size: usize,
        slide: usize,
        off: u64,
        bytes: &[u8],
        emit: &mut E,
    ) {
        let expected = self.offset + self.pending().len() as u64;
        if off != expected {
            // Not contiguous (the reassembler reports holes first, so this does not
            // happen): treat as a hole.
            self.gap(off, emit);
        }
        let mut rest = bytes;
        if self.start == self.buf.len() {
            // Nothing pending: windows straight from the packet's bytes.
            while rest.len() >= size {
                emit(self.offset, &rest[..size], WindowKind::Full);
                rest = &rest[slide..];
                self.offset += slide as u64;
            }
            self.buf.clear();
            self.start = 0;
            self.buf.extend_from_slice(rest);
            return;
        }
        self.buf.extend_from_slice(rest);
        while self.buf.len() - self.start >= size {
            emit(
                self.offset,
                &self.buf[self.start..self.start + size],
                WindowKind::Full,
            );
            self.start += slide;
            self.offset += slide as u64;
        }
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// A hole: the pending bytes go out short, the next byte is at `next`.
    fn gap<E: FnMut(u64, &[u8], WindowKind)>(&mut self, next: u64, emit: &mut E) {
        if self.start < self.buf.len() {
            emit(self.offset, self.pending(), WindowKind::BeforeGap);
        }
        self.buf.clear();
        self.start = 0;
        self.offset = next;
    }

    /// The stream ended: the last call.
    fn finish<E: FnMut(u64, &[u8], WindowKind)>(&mut self, end: End, emit: &mut E) {
        emit(self.offset, self.pending(), WindowKind::Last(end));
        self.offset += self.pending().len() as u64;
        self.buf = Vec::new();
        self.start = 0;
    }
}

#[derive(Debug, Clone)]
struct Stream {
    reasm: Reassembler,
    win: Windower,
    closed: bool,
}

#[derive(Debug, Clone)]
struct Conn {
    serial: u64,
    /// The 5-tuple of the client direction.
    client: FlowKey,
    last_seen: u64,
    streams: [Stream; 2],
}

impl Conn {
    fn open(&self) -> bool {
        !(self.streams[0].closed && self.streams[1].closed)
    }

    fn id(&self, d: usize) -> StreamId {
        StreamId {
            connection: self.serial,
            direction: Direction::of(d),
            flow: if d == 0 {
                self.client
            } else {
                self.client.reversed()
            },
        }
    }
}

/// Shapes of the window: size, slide.
#[derive(Debug, Clone, Copy)]
struct Shape {
    size: usize,
    slide: usize,
}

/// The `window` operator: reassembles every TCP connection of the packets it sees and
/// calls `udf(&WindowInfo, &[u8])` on windows of each stream (see the [module
/// docs](super) and [`Reassembler`] for the reassembly rules).
///
/// * Every `size` new contiguous bytes of a stream make one [`WindowKind::Full`] call; the
///   next window starts `slide` bytes later (`slide == size`: tumbling windows, whose
///   concatenation is the stream; `slide < size`: overlapping ones).
/// * A hole the stream gives up on (out-of-order buffer over its bound, or data the other
///   side acknowledged but the capture lacks) ends the current window early
///   ([`WindowKind::BeforeGap`]); windows never span a hole, and offsets show its size.
/// * A stream ends at its FIN (once every byte before it is there), at an RST in either
///   direction, when its connection has been idle for longer than `timeout` in packet
///   time (timestamps of the packets seen, or [`Window::advance`]), when the connection
///   table is full and it is the least recently active ([`End::Evicted`]), when a SYN
///   with a new initial sequence number reuses its 5-tuple ([`End::Replaced`]), or at
///   [`Window::flush`]. Its buffered data is delivered (holes skipped) and the UDF called
///   a last time with the bytes not yet slid past ([`WindowKind::Last`]).
/// * A connection whose streams have both ended stays known (without buffers) until it
///   idles out, so late ACKs and retransmissions do not open a new one; a SYN without ACK
///   starts a new connection on its 5-tuple.
/// * Packets are not changed: [`Window::process`] hands each one back (NetBricks' window
///   forwards every packet), [`Window::observe`] reads it by reference.
///
/// The UDF is called from inside [`Window::observe`] and friends, in stream order for
/// each stream; calls of different streams interleave in packet order.
pub struct Window<F> {
    inner: Streams,
    udf: F,
}

/// A window's connections, without its UDF (which each call is given).
struct Streams {
    shape: Shape,
    timeout: u64,
    buffer_limit: usize,
    max_connections: usize,
    conns: HashMap<FlowKey, Conn>,
    /// Connections by (last activity, number): the first is the least recently active.
    idle: BTreeSet<(u64, u64, FlowKey)>,
    now: u64,
    next_serial: u64,
    stats: WindowStats,
    /// Reassembly counters of the streams no longer in `conns`.
    gone: ReassemblyStats,
}

impl<F> fmt::Debug for Window<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.inner;
        f.debug_struct("Window")
            .field("size", &s.shape.size)
            .field("slide", &s.shape.slide)
            .field("timeout_ns", &s.timeout)
            .field("connections", &s.conns.len())
            .finish()
    }
}

impl<F: FnMut(&WindowInfo, &[u8])> Window<F> {
    /// A window of `size` bytes sliding by `slide` (1 ..= `size`), closing connections idle
    /// for longer than `timeout` (`Duration::MAX`: never), calling `udf`.
    pub fn new(size: usize, slide: usize, timeout: Duration, udf: F) -> Result<Self, WindowError> {
        Ok(Window {
            inner: Streams::new(size, slide, timeout)?,
            udf,
        })
    }

    /// Reads one packet and hands it back unchanged.
    pub fn process(&mut self, pkt: Packet) -> Packet {
        self.observe(&pkt);
        pkt
    }

    /// Reads one packet: advances packet time to its timestamp (closing connections idle
    /// for longer than the timeout), then reassembles its TCP segment, if it has one.
    pub fn observe(&mut self, pkt: &Packet) {
        self.inner.observe(pkt, &mut self.udf);
    }

    /// Advances packet time to `now` (never backwards) and closes the connections idle
    /// for longer than the timeout ([`End::Timeout`]).
    pub fn advance(&mut self, now: Timestamp) {
        self.inner.advance(now, &mut self.udf);
    }

    /// Closes every connection ([`End::Flush`]), in the order they appeared.
    pub fn flush(&mut self) {
        self.inner.flush(&mut self.udf);
    }

    /// Reassembles one segment (at the window's current packet time).
    pub fn segment(&mut self, seg: &TcpSegment<'_>) {
        self.inner.segment(seg, &mut self.udf);
    }
}

impl<F> Window<F> {
    /// Sets the bound of out-of-order bytes buffered per stream (default
    /// [`DEFAULT_BUFFER_LIMIT`]); applies to streams opened afterwards.
    pub fn buffer_limit(mut self, bytes: usize) -> Self {
        self.inner.buffer_limit = bytes;
        self
    }

    /// Sets the bound on connections tracked at once (at least 1; default
    /// [`DEFAULT_MAX_CONNECTIONS`]); past it, the least recently active is evicted.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.inner.max_connections = n.max(1);
        self
    }

    /// The counters.
    pub fn stats(&self) -> WindowStats {
        self.inner.stats()
    }

    /// Connections known (open, or ended and not yet idled out).
    pub fn connections(&self) -> usize {
        self.inner.conns.len()
    }

    /// The UDF back (after [`Window::flush`], to read what it gathered).
    pub fn into_udf(self) -> F {
        self.udf
    }

    /// The window's packet time: the largest timestamp seen (or advanced to).
    pub fn now(&self) -> Timestamp {
        Timestamp(self.inner.now)
    }

    /// [`Window::observe`] calling `udf` instead of the window's own (for a UDF that needs
    /// something only the caller has at that moment, like the pipeline's context).
    pub fn observe_with<U: FnMut(&WindowInfo, &[u8])>(&mut self, pkt: &Packet, udf: &mut U) {
        self.inner.observe(pkt, udf);
    }

    /// [`Window::advance`] calling `udf` instead of the window's own.
    pub fn advance_with<U: FnMut(&WindowInfo, &[u8])>(&mut self, now: Timestamp, udf: &mut U) {
        self.inner.advance(now, udf);
    }

    /// [`Window::flush`] calling `udf` instead of the window's own.
    pub fn flush_with<U: FnMut(&WindowInfo, &[u8])>(&mut self, udf: &mut U) {
        self.inner.flush(udf);
    }
}

impl Streams {
    fn new(size: usize, slide: usize, timeout: Duration) -> Result<Streams, WindowError> {
        if size == 0 {
            return Err(WindowError::ZeroSize);
        }
        if slide == 0 || slide > size {
            return Err(WindowError::BadSlide { size, slide });
        }
        Ok(Streams {
            shape: Shape { size, slide },
            timeout: u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX),
            buffer_limit: DEFAULT_BUFFER_LIMIT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            conns: HashMap::new(),
            idle: BTreeSet::new(),
            now: 0,
            next_serial: 0,
            stats: WindowStats::default(),
            gone: ReassemblyStats::default(),
        })
    }

    fn stats(&self) -> WindowStats {
        let mut s = self.stats;
        s.reassembly = self.gone;
        for c in self.conns.values() {
            for st in &c.streams {
                s.reassembly.add(st.reasm.stats());
            }
        }
        s
    }

    fn observe<U: FnMut(&WindowInfo, &[u8])>(&mut self, pkt: &Packet, udf: &mut U) {
        self.stats.packets += 1;
        self.advance(pkt.meta.timestamp, udf);
        match TcpSegment::parse(pkt) {
            Some(seg) => self.segment(&seg, udf),
            None => self.stats.not_tcp += 1,
        }
    }

    fn advance<U: FnMut(&WindowInfo, &[u8])>(&mut self, now: Timestamp, udf: &mut U) {
        if now.0 <= self.now {
            return;
        }
        self.now = now.0;
        while let Some(&(last, _, key)) = self.idle.first() {
            if self.now.saturating_sub(last) <= self.timeout {
                break;
            }
            self.remove(&key, End::Timeout, udf);
        }
    }

    fn flush<U: FnMut(&WindowInfo, &[u8])>(&mut self, udf: &mut U) {
        let mut keys: Vec<(u64, FlowKey)> =
            self.conns.iter().map(|(k, c)| (c.serial, *k)).collect();
        keys.sort_unstable();
        for (_, key) in keys {
            self.remove(&key, End::Flush, udf);
        }
    }

    /// Reassembles one segment (at the window's current packet time).
    fn segment<U: FnMut(&WindowInfo, &[u8])>(&mut self, seg: &TcpSegment<'_>, udf: &mut U) {
        let flow = seg.flow;
        let rev = flow.reversed();
        let key = if rev < flow { rev } else { flow };
        let new_syn = seg.syn() && !seg.ack_flag();
        let fresh = match self.conns.get(&key) {
            None => true,
            Some(c) if !c.open() => {
                if new_syn {
                    self.remove(&key, End::Replaced, udf);
                    true
                } else {
                    self.stats.after_close += 1;
                    self.touch(&key);
                    return;
                }
            }
            Some(c) => {
                let d = usize::from(c.client != flow);
                let r = &c.streams[d].reasm;
                if new_syn && r.started() && r.isn() != Some(seg.seq) {
                    self.remove(&key, End::Replaced, udf);
                    true
                } else {
                    false
                }
            }
        };
        if fresh {
            if self.conns.len() >= self.max_connections {
                if let Some(&(_, _, oldest)) = self.idle.first() {
                    self.remove(&oldest, End::Evicted, udf);
                }
            }
            self.open(key, flow);
        }
        self.touch(&key);
        let shape = self.shape;
        let Streams { conns, stats, .. } = self;
        let Some(conn) = conns.get_mut(&key) else {
            return;
        };
        let d = usize::from(conn.client != flow);
        // First the acknowledgement, for the other direction (as Wireshark does).
        if seg.ack_flag() && !conn.streams[1 - d].closed {
            let id = conn.id(1 - d);
            let st = &mut conn.streams[1 - d];
            let Stream { reasm, win, .. } = st;
            let mut emit =
                |off: u64, bytes: &[u8], kind: WindowKind| call(stats, udf, id, off, bytes, kind);
            let mut sink = |dl: Delivery<'_>| feed(win, shape, dl, &mut emit);
            if reasm.acked(seg.ack, &mut sink) && reasm.finished() {
                end_stream(st, id, End::Fin, shape, stats, udf);
            }
        }
        let id = conn.id(d);
        let st = &mut conn.streams[d];
        if st.closed {
            st.reasm
                .segment(seg.seq, seg.syn(), seg.fin(), seg.payload, &mut |_| {});
        } else {
            let Stream { reasm, win, .. } = st;
            let mut emit =
                |off: u64, bytes: &[u8], kind: WindowKind| call(stats, udf, id, off, bytes, kind);
            let mut sink = |dl: Delivery<'_>| feed(win, shape, dl, &mut emit);
            let kind = reasm.segment(seg.seq, seg.syn(), seg.fin(), seg.payload, &mut sink);
            if kind != SegmentKind::Closed && reasm.finished() {
                end_stream(st, id, End::Fin, shape, stats, udf);
            }
        }
        if seg.rst() {
            for i in 0..2 {
                if !conn.streams[i].closed {
                    let id = conn.id(i);
                    end_stream(&mut conn.streams[i], id, End::Rst, shape, stats, udf);
                }
            }
        }
    }

    /// Opens a connection whose first packet has 5-tuple `client`.
    fn open(&mut self, key: FlowKey, client: FlowKey) {
        let stream = || Stream {
            reasm: Reassembler::new(self.buffer_limit),
            win: Windower::default(),
            closed: false,
        };
        let conn = Conn {
            serial: self.next_serial,
            client,
            last_seen: self.now,
            streams: [stream(), stream()],
        };
        self.next_serial += 1;
        self.stats.connections += 1;
        self.stats.streams_opened += 2;
        self.idle.insert((self.now, conn.serial, key));
        self.conns.insert(key, conn);
    }

    /// Marks a connection active now.
    fn touch(&mut self, key: &FlowKey) {
        if let Some(c) = self.conns.get_mut(key) {
            if c.last_seen != self.now {
                self.idle.remove(&(c.last_seen, c.serial, *key));
                c.last_seen = self.now;
                self.idle.insert((self.now, c.serial, *key));
            }
        }
    }

    /// Ends a connection's open streams with `end` and forgets it.
    fn remove<U: FnMut(&WindowInfo, &[u8])>(&mut self, key: &FlowKey, end: End, udf: &mut U) {
        let Some(mut conn) = self.conns.remove(key) else {
            return;
        };
        self.idle.remove(&(conn.last_seen, conn.serial, *key));
        for i in 0..2 {
            if !conn.streams[i].closed {
                let id = conn.id(i);
                end_stream(
                    &mut conn.streams[i],
                    id,
                    end,
                    self.shape,
                    &mut self.stats,
                    udf,
                );
            }
            self.gone.add(conn.streams[i].reasm.stats());
        }
    }
}

/// Hands one delivery of the reassembler to the stream's windows.
/// One UDF call: counted, then made.
#[inline]
fn call<U: FnMut(&WindowInfo, &[u8])>(
    stats: &mut WindowStats,
    udf: &mut U,
    stream: StreamId,
    offset: u64,
    bytes: &[u8],
    kind: WindowKind,
) {
    stats.calls += 1;
    udf(
        &WindowInfo {
            stream,
            offset,
            kind,
        },
        bytes,
    );
}

fn feed<E: FnMut(u64, &[u8], WindowKind)>(
    win: &mut Windower,
    shape: Shape,
    d: Delivery<'_>,
    emit: &mut E,
) {
    match d {
        Delivery::Data { offset, bytes } => win.data(shape.size, shape.slide, offset, bytes, emit),
        Delivery::Gap { offset, len, .. } => win.gap(offset + len, emit),
    }
}

/// Ends one stream: what is buffered is delivered (holes skipped), then the last call.
fn end_stream<F: FnMut(&WindowInfo, &[u8])>(
    st: &mut Stream,
    id: StreamId,
    end: End,
    shape: Shape,
    stats: &mut WindowStats,
    udf: &mut F,
) {
    match end {
        End::Fin | End::Rst => stats.streams_closed += 1,
        End::Timeout => stats.streams_timed_out += 1,
        End::Replaced | End::Evicted | End::Flush => stats.streams_dropped += 1,
    }
    let mut emit =
        |off: u64, bytes: &[u8], kind: WindowKind| call(stats, udf, id, off, bytes, kind);
    let Stream { reasm, win, closed } = st;
    reasm.close(&mut |dl| feed(win, shape, dl, &mut emit));
    win.finish(end, &mut emit);
    *closed = true;
}
