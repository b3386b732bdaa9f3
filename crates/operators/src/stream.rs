//! Bytestream operators (NetBricks §3.1): [`Window`] reassembles the TCP streams of the
//! packets it sees and calls a user function on windows of their bytes; [`Packetizer`]
//! turns bytes back into TCP packets.
//!
//! * A **connection** is a TCP 5-tuple, both directions; each direction is a **stream** of
//!   its own, named by a [`StreamId`] (the connection's number, in order of appearance, and
//!   the [`Direction`]). [`Reassembler`] is one stream's reordering, usable alone.
//! * `Window::new(size, slide, timeout, udf)` calls `udf(&info, bytes)` every time `size`
//!   new contiguous bytes of a stream are there, then slides by `slide`; FIN, RST, the
//!   timeout (virtual time: packet timestamps, never the wall clock), eviction and
//!   [`Window::flush`] close a stream and call the UDF once more with what is left
//!   ([`WindowKind::Last`]). Packets pass through unchanged ([`Window::process`]).
//! * `Packetizer::new(template, mss)` segments bytes into Ethernet + IPv4 + TCP packets of at
//!   most `mss` payload bytes, continuing the template's sequence numbers, with IPv4 length,
//!   identification and both checksums filled in.

mod packetize;
mod reassembly;
mod segment;
mod window;

pub use packetize::{PacketizeError, Packetizer};
pub use reassembly::{
    Delivery, GapCause, Reassembler, ReassemblyStats, SegmentKind, DEFAULT_BUFFER_LIMIT, MAX_AHEAD,
};
pub use segment::TcpSegment;
pub use window::{
    Direction, End, StreamId, Window, WindowError, WindowInfo, WindowKind, WindowStats,
    DEFAULT_MAX_CONNECTIONS,
};
