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
//!
//! ```
//! use operators::stream::{Direction, Packetizer, Window, WindowInfo};
//! use std::time::Duration;
//! use wire::build::Frame;
//! use wire::tcp::flags::{ACK, SYN};
//!
//! // A client's stream, cut into packets and sent out of order.
//! let template = Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40000, 80).seq_ack(1, 0).flags(ACK).build();
//! let mut pz = Packetizer::new(&template, 4).unwrap();
//! let mut pkts = pz.packetize(b"GET /index.html HTTP/1.1\r\n");
//! pkts.reverse();
//! pkts.push(pz.fin());
//! let syn = Frame::tcp([10, 0, 0, 1], [10, 0, 0, 2], 40000, 80).seq_ack(0, 0).flags(SYN).build();
//! pkts.insert(0, packet::Packet::from_bytes(&syn));
//!
//! let mut seen = Vec::new();
//! let mut w = Window::new(8, 8, Duration::from_secs(30), |i: &WindowInfo, b: &[u8]| {
//!     if i.stream.direction == Direction::Client {
//!         seen.extend_from_slice(b);
//!     }
//! })
//! .unwrap();
//! for p in pkts {
//!     let _forwarded = w.process(p);
//! }
//! assert_eq!(w.stats().reassembly.out_of_order, 6);
//! drop(w);
//! assert_eq!(seen, b"GET /index.html HTTP/1.1\r\n");
//! ```

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

use crate::header::Stack;
use crate::pipe::{Cx, Pipe, Stage, Then};
use crate::pkt::Pkt;
use std::time::Duration;

/// The `window` operator: every packet is read by a [`Window`] (its TCP segment
/// reassembled, the UDF called on each window of its stream) and handed on unchanged.
pub struct WindowOp<F> {
    window: Window<F>,
}

impl<F> WindowOp<F> {
    /// The window.
    pub fn window(&self) -> &Window<F> {
        &self.window
    }
}

impl<S: Stack, M: Send, F: FnMut(&WindowInfo, &[u8]) + Send> Stage<Pkt<S, M>> for WindowOp<F> {
    type Out = Pkt<S, M>;
    #[inline]
    fn run(&mut self, p: Pkt<S, M>, _: &mut Cx) -> Option<Pkt<S, M>> {
        self.window.observe(p.packet());
        Some(p)
    }
    fn tick(&mut self, cx: &mut Cx) {
        self.window.advance(cx.now);
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        window_stats(&self.window, out);
    }
}

fn window_stats<F>(w: &Window<F>, out: &mut Vec<(&'static str, u64)>) {
    let s = w.stats();
    out.extend([
        ("window_packets", s.packets),
        ("window_calls", s.calls),
        ("window_connections", s.connections),
        ("window_streams_closed", s.streams_closed),
        ("window_streams_timed_out", s.streams_timed_out),
        ("window_out_of_order", s.reassembly.out_of_order),
        ("window_overflows", s.reassembly.overflows),
        ("window_bytes_skipped", s.reassembly.bytes_skipped),
    ]);
}

/// The own UDF of the window inside a [`WindowEmitOp`]: none (each call is given the
/// operator's UDF with the pipeline's context).
type NoUdf = fn(&WindowInfo, &[u8]);

/// The `window` operator whose UDF may send packets ([`Pipe::window_emit`]).
pub struct WindowEmitOp<F> {
    window: Window<NoUdf>,
    udf: F,
}

impl<F> WindowEmitOp<F> {
    /// The window.
    pub fn window(&self) -> &Window<NoUdf> {
        &self.window
    }
}

impl<S: Stack, M: Send, F: FnMut(&WindowInfo, &[u8], &mut Cx) + Send> Stage<Pkt<S, M>>
    for WindowEmitOp<F>
{
    type Out = Pkt<S, M>;
    #[inline]
    fn run(&mut self, p: Pkt<S, M>, cx: &mut Cx) -> Option<Pkt<S, M>> {
        let WindowEmitOp { window, udf } = self;
        window.observe_with(p.packet(), &mut |i: &WindowInfo, b: &[u8]| udf(i, b, cx));
        Some(p)
    }
    fn tick(&mut self, cx: &mut Cx) {
        let now = cx.now;
        let WindowEmitOp { window, udf } = self;
        window.advance_with(now, &mut |i: &WindowInfo, b: &[u8]| udf(i, b, cx));
    }
    fn stats(&self, out: &mut Vec<(&'static str, u64)>) {
        window_stats(&self.window, out);
    }
}

impl<I, S: Stack, M: Send + 'static, St: Stage<I, Out = Pkt<S, M>>> Pipe<I, St> {
    /// NetBricks' `window(size, slide, timeout, udf)`: reassembles the TCP streams of the
    /// packets passing by and calls `udf` on every `size` bytes of a stream, sliding by
    /// `slide`, and once more with what is left when the stream ends (FIN, RST, `timeout` of
    /// packet time without a packet). Packets pass on unchanged. See [`Window`].
    pub fn window<F: FnMut(&WindowInfo, &[u8]) + Send>(
        self,
        size: usize,
        slide: usize,
        timeout: Duration,
        udf: F,
    ) -> Result<Pipe<I, Then<St, WindowOp<F>>>, WindowError> {
        Ok(self.then(WindowOp {
            window: Window::new(size, slide, timeout, udf)?,
        }))
    }

    /// [`Pipe::window`] whose UDF is also given the pipeline's context, so that it can send
    /// packets: NetBricks' other use of a window, where the NF drops the packets it
    /// receives (a `filter` after the window) and sends a rewritten stream instead, cut
    /// into packets by a [`Packetizer`]. Packets the UDF makes go through [`Cx::create`]
    /// (`let p = cx.create(p); cx.send(port, p)`), which counts them as created and gives
    /// them the lineage of the packet being processed.
    pub fn window_emit<F: FnMut(&WindowInfo, &[u8], &mut Cx) + Send>(
        self,
        size: usize,
        slide: usize,
        timeout: Duration,
        udf: F,
    ) -> Result<Pipe<I, Then<St, WindowEmitOp<F>>>, WindowError> {
        let no_udf: NoUdf = |_, _| {};
        Ok(self.then(WindowEmitOp {
            window: Window::new(size, slide, timeout, no_udf)?,
            udf,
        }))
    }
}

#[cfg(test)]
mod op_tests {
    use super::*;
    use crate::header::{Raw, Tcp};
    use crate::pipe::pipe;
    use crate::{Ethernet, Ipv4};
    use std::sync::{Arc, Mutex};

    /// A segment of the one connection these tests use.
    fn seg(seq: u32, flags: u8, data: &[u8]) -> packet::Packet {
        packet::Packet::from_bytes(
            &wire::build::Frame::tcp([1, 1, 1, 1], [2, 2, 2, 2], 5, 6)
                .seq_ack(seq, 0)
                .flags(flags)
                .payload(data)
                .build(),
        )
    }

    #[test]
    fn the_window_operator_sees_the_stream_and_passes_packets_on() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = Arc::clone(&got);
        let mut nf = pipe::<Raw, ()>()
            .window(4, 4, Duration::from_secs(1), move |_, bytes| {
                g.lock().unwrap().extend_from_slice(bytes)
            })
            .unwrap()
            .parse::<Ethernet>()
            .parse::<Ipv4>()
            .parse::<Tcp>()
            .into_stage();
        let mut cx = Cx::default();
        let mut out = 0;
        for p in [
            seg(0, 0x02, b""),
            seg(4, 0x18, b"world"),
            seg(1, 0x18, b"abc"),
            seg(9, 0x11, b""),
        ] {
            out += usize::from(nf.run(Pkt::new(p), &mut cx).is_some());
        }
        assert_eq!(out, 4);
        assert_eq!(&got.lock().unwrap()[..], b"abcworld");
        let mut stats = Vec::new();
        Stage::<Pkt<Raw>>::stats(&nf, &mut stats);
        assert!(stats.contains(&("window_packets", 4)), "{stats:?}");
    }

    #[test]
    fn window_emit_rewrites_a_stream_into_new_packets() {
        use std::collections::HashMap;
        // The NF upper-cases every client stream: it drops the packets it receives and
        // sends the rewritten bytes, packetized, out of output 1.
        let mut packetizers: HashMap<StreamId, Packetizer> = HashMap::new();
        let mut nf = pipe::<Raw, ()>()
            .window_emit(3, 3, Duration::from_secs(5), move |info, bytes, cx| {
                if info.stream.direction != Direction::Client || bytes.is_empty() {
                    return;
                }
                let pz = packetizers.entry(info.stream).or_insert_with(|| {
                    let f = info.stream.flow;
                    let (std::net::IpAddr::V4(src), std::net::IpAddr::V4(dst)) = (f.src, f.dst)
                    else {
                        unreachable!("IPv4 only here")
                    };
                    let t = wire::build::Frame::tcp(src, dst, f.src_port, f.dst_port)
                        .seq_ack(1000, 0)
                        .flags(0x10)
                        .build();
                    Packetizer::new(&t, 2).unwrap()
                });
                for p in pz.packetize(&bytes.to_ascii_uppercase()) {
                    let p = cx.create(p);
                    cx.send(1, p);
                }
            })
            .unwrap()
            .filter("rewritten", |_| false)
            .into_stage();
        let mut cx = Cx::default();
        for p in [
            seg(0, 0x02, b""),
            seg(6, 0x18, b"stream"),
            seg(1, 0x18, b"byte "),
            seg(12, 0x11, b"!"),
        ] {
            assert!(nf.run(Pkt::new(p), &mut cx).is_none());
        }
        let dropped: Vec<_> = cx.take_dropped().map(|(_, r)| r).collect();
        assert_eq!(dropped, ["rewritten"; 4]);
        assert_eq!(
            cx.take_created() as usize,
            cx.pending().0,
            "every packet sent was created"
        );
        // What was sent is a valid stream of its own: reassemble it again.
        let mut again = Vec::new();
        let mut w = Window::new(100, 100, Duration::MAX, |i: &WindowInfo, b: &[u8]| {
            if !b.is_empty() {
                assert_eq!(i.stream.flow.dst_port, 6);
            }
            again.extend_from_slice(b)
        })
        .unwrap();
        w.observe(&seg(999, 0x02, b""));
        for (port, p) in cx.take_sent() {
            assert_eq!(port, 1);
            let t = wire::tcp::Packet::new_checked(&p.data()[34..]).unwrap();
            assert!(t.verify_checksum_v4([1, 1, 1, 1].into(), [2, 2, 2, 2].into()));
            w.observe(&p);
        }
        w.flush();
        drop(w);
        assert_eq!(again, b"BYTE STREAM!");
    }
}
