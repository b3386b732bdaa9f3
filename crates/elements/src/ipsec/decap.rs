//! `IPsecGCMDecap`: the receiving side of an ESP tunnel (module docs of [`crate::ipsec`]).

use super::{
    ipv4_lengths, mac_in_prefix, ReplayWindow, Sa, DEFAULT_REPLAY, ESP_HEADER, ICV_LEN, IV_LEN,
    MAX_REPLAY,
};
use crate::reason::IpHeaderReason;
use crate::{Args, Batching, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::net::Ipv4Addr;
use wire::ip::protocol;

reasons! {
    /// Why `IPsecGCMDecap` drops a packet.
    pub enum IPsecGCMDecapReason {
        /// No valid IPv4 header at the network header annotation.
        BadHeader => IpHeaderReason::Bad.as_str(),
        /// An IPv4 packet of another protocol than ESP (50).
        NotEsp => "not-esp",
        /// An ESP packet whose SPI (or, when given, tunnel addresses) is not this SA's.
        UnknownSpi => "unknown-spi",
        /// A sequence number seen already, older than the window, or 0.
        Replay => "replay",
        /// The ICV does not verify: tampered, or another key.
        BadIcv => "bad-icv",
        /// Too short for ESP, a fragment, a bad pad length, a next header other than IPv4,
        /// or an inner datagram that is not a valid IPv4 datagram.
        Malformed => "malformed",
    }
}

/// The fewest bytes after the outer IP header: ESP header, IV, the two trailer bytes, ICV.
const MIN_ESP: usize = ESP_HEADER + IV_LEN + 2 + ICV_LEN;

/// `IPsecGCMDecap(SPI, KEY, SALT [, keywords SRC, DST, REPLAY, ESN])`: ESP tunnel mode with
/// AES-GCM, the receiving side. 1/1.
///
/// Takes the ESP packet at the network header annotation (cut to its IP total length);
/// one whose SPI is not this SA's, or whose outer source or destination differs from SRC
/// or DST when given, is dropped as `unknown-spi`. Then, in RFC 4303's order: the sequence
/// number against the anti-replay window (`REPLAY` packets, 64 by default, at most 4096, 0
/// for none; `replay`), the ICV (`bad-icv`), the window's update, the trailer and the
/// inner IPv4 datagram (`malformed`). The inner datagram, cut to its total length, takes
/// the outer header's place (bytes before the network header stay in front); the network
/// and transport header annotations point into it and the destination IP annotation is its
/// destination.
///
/// `stats`: `packets` and `bytes` (inner datagrams delivered), one counter per drop reason
/// (`bad_icv`, `replay`, `unknown_spi`, `malformed`, `not_esp`, `bad_ip_header`), `top` (the
/// highest sequence number accepted). `state_dump`: the SPI and the window.
#[derive(Debug)]
pub struct IPsecGCMDecap {
    sa: Sa,
    src: Option<Ipv4Addr>,
    dst: Option<Ipv4Addr>,
    window: ReplayWindow,
    packets: u64,
    bytes: u64,
    drops: [u64; IPsecGCMDecapReason::ALL.len()],
}

impl IPsecGCMDecap {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPsecGCMDecap, ConfigError> {
        args.check(3, &["SPI", "KEY", "SALT", "SRC", "DST", "REPLAY", "ESN"])?;
        let sa = Sa::configure(args)?;
        let addr = |k: &str| args.keyword(k).map(|s| bcx.names.ipv4(s)).transpose();
        let src = addr("SRC")?;
        let dst = addr("DST")?;
        let replay = args.keyword("REPLAY").map_or(Ok(DEFAULT_REPLAY), |s| {
            crate::args::parse_uint_max(s, MAX_REPLAY, "REPLAY (packets)")
        })?;
        if sa.esn && replay == 0 {
            return Err(ConfigError::new(
                "ESN needs a REPLAY window of 1 or more (the high half of a sequence number \
                 is inferred from it)",
            ));
        }
        Ok(IPsecGCMDecap {
            sa,
            src,
            dst,
            window: ReplayWindow::new(replay),
            packets: 0,
            bytes: 0,
            drops: [0; IPsecGCMDecapReason::ALL.len()],
        })
    }

    /// The anti-replay window.
    pub fn window(&self) -> &ReplayWindow {
        &self.window
    }

    #[inline]
    fn drop(&mut self, p: Packet, r: IPsecGCMDecapReason) -> Verdict {
        self.drops[r as usize] += 1;
        Verdict::Drop(p, r.into())
    }
}

// IPsecGCMDecap decapsulates (the length and every byte change): it declares nothing (`Element::declared`).
impl Element for IPsecGCMDecap {
    fn class_name(&self) -> &'static str {
        "IPsecGCMDecap"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }

    fn batching(&self) -> Batching {
        Batching::Ordered
    }

    fn push(&mut self, _port: usize, mut p: Packet, cx: &mut Context) -> Verdict {
        use IPsecGCMDecapReason as R;
        cx.record_opaque("ipsec: every packet is checked against the replay window");
        let Some(nh) = p.network_offset_in_data() else {
            return self.drop(p, R::BadHeader);
        };
        let Some((hl, total)) = p.data().get(nh..).and_then(ipv4_lengths) else {
            return self.drop(p, R::BadHeader);
        };
        let (spi, low, frag, src, dst) = {
            let ip = &p.data()[nh..nh + total];
            if ip[9] != protocol::ESP {
                return self.drop(p, R::NotEsp);
            }
            let esp = &ip[hl..];
            if esp.len() < MIN_ESP {
                return self.drop(p, R::Malformed);
            }
            let word = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            (
                word(&esp[..4]),
                word(&esp[4..8]),
                u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0,
                Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
                Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
            )
        };
        if frag {
            return self.drop(p, R::Malformed);
        }
        if spi != self.sa.spi
            || self.src.is_some_and(|a| a != src)
            || self.dst.is_some_and(|a| a != dst)
        {
            return self.drop(p, R::UnknownSpi);
        }
        let seq = if self.sa.esn {
            match self.window.infer_esn(low) {
                Some(s) => s,
                None => return self.drop(p, R::Replay),
            }
        } else {
            u64::from(low)
        };
        if !self.window.check(seq) {
            return self.drop(p, R::Replay);
        }
        // ESP payload bounds within the data.
        let start = nh + hl + ESP_HEADER + IV_LEN;
        let end = nh + total - ICV_LEN;
        let ok = {
            let d = p.data_mut();
            let mut iv = [0u8; IV_LEN];
            iv.copy_from_slice(&d[nh + hl + ESP_HEADER..start]);
            let mut icv = [0u8; ICV_LEN];
            icv.copy_from_slice(&d[end..end + ICV_LEN]);
            self.sa.open(seq, &iv, &mut d[start..end], &icv)
        };
        if !ok {
            return self.drop(p, R::BadIcv);
        }
        self.window.accept(seq);
        // The trailer, then the inner datagram.
        let inner = {
            let pt = &p.data()[start..end];
            let n = pt.len();
            let pad = usize::from(pt[n - 2]);
            let next = pt[n - 1];
            if next != protocol::IPIP || pad + 2 > n {
                None
            } else {
                let body = &pt[..n - 2 - pad];
                ipv4_lengths(body).map(|(ihl, len)| {
                    let d = Ipv4Addr::new(body[16], body[17], body[18], body[19]);
                    (ihl, len, d)
                })
            }
        };
        let Some((ihl, len, idst)) = inner else {
            return self.drop(p, R::Malformed);
        };
        let mac = mac_in_prefix(&p, nh);
        let shift = start - nh;
        p.data_mut().copy_within(0..nh, shift);
        p.pull(shift);
        p.truncate(nh + len);
        if let Some(m) = mac {
            p.set_mac_header(m);
        }
        p.set_network_header(nh);
        p.set_transport_header(nh + ihl);
        p.meta.dst_ip = idst;
        self.packets += 1;
        self.bytes += len as u64;
        Verdict::Out(0, p)
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        use IPsecGCMDecapReason as R;
        let d = |r: R| self.drops[r as usize];
        vec![
            ("packets", self.packets),
            ("bytes", self.bytes),
            ("bad_icv", d(R::BadIcv)),
            ("replay", d(R::Replay)),
            ("unknown_spi", d(R::UnknownSpi)),
            ("malformed", d(R::Malformed)),
            ("not_esp", d(R::NotEsp)),
            ("bad_ip_header", d(R::BadHeader)),
            ("top", self.window.top()),
        ]
    }

    fn state_dump(&self) -> Vec<String> {
        vec![format!(
            "spi {:#010x} {}",
            self.sa.spi,
            self.window.describe()
        )]
    }
}
