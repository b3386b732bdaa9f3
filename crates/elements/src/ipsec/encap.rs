//! `IPsecGCMEncap`: the sending side of an ESP tunnel (module docs of [`crate::ipsec`]).

use super::{ipv4_lengths, mac_in_prefix, Sa, ESP_HEADER, ICV_LEN, IV_LEN, OUTER_IP};
use crate::capability::{Pool, ShareError, WorkerShare};
use crate::reason::IpHeaderReason;
use crate::{Args, Batching, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use std::net::Ipv4Addr;
use wire::ip::protocol;
use wire::ipv4::Packet as Ipv4Packet;

reasons! {
    /// Why `IPsecGCMEncap` drops a packet.
    pub enum IPsecGCMEncapReason {
        /// No valid IPv4 datagram at the network header annotation.
        BadHeader => IpHeaderReason::Bad.as_str(),
        /// The ESP packet would be longer than 65,535 bytes.
        TooLong => "too-long",
        /// The SA's sequence numbers are used up (2^32 − 1 without ESN): it must be rekeyed.
        SeqOverflow => "seq-overflow",
    }
}

/// Bytes added in front of the inner datagram: outer IP, ESP header, IV.
const FRONT: usize = OUTER_IP + ESP_HEADER + IV_LEN;

/// `IPsecGCMEncap(SPI, KEY, SALT, SRC, DST [, keywords SEQ, ESN, TTL])`: ESP tunnel mode
/// with AES-GCM, the sending side. 1/1.
///
/// Encrypts the IPv4 datagram at the network header annotation (cut to its total length)
/// with its padding trailer, and replaces it with an outer IPv4 header from SRC to DST
/// (protocol 50, TTL from `TTL`, 64 by default; TOS and DF copied from the inner header; IP
/// ID the low 16 bits of the sequence number), the ESP header, the IV (the 64-bit
/// sequence number) and, after the ciphertext, the 16-byte ICV. Bytes before the network
/// header (a MAC header) stay in front. Sequence numbers start at `SEQ` (1 by default).
/// Sets the network header annotation at the outer header, the transport header at the
/// ESP header and the destination IP annotation to DST.
///
/// `stats`: `packets`, `bytes` (inner datagrams), `next_seq`. `state_dump`: the SPI and the
/// next sequence number.
#[derive(Debug)]
pub struct IPsecGCMEncap {
    sa: Sa,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    /// The next sequence number to send.
    next: u64,
    /// How far the sequence number moves per packet (the number of workers sharing it).
    step: u64,
    packets: u64,
    bytes: u64,
}

impl IPsecGCMEncap {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPsecGCMEncap, ConfigError> {
        args.check(
            5,
            &["SPI", "KEY", "SALT", "SRC", "DST", "SEQ", "ESN", "TTL"],
        )?;
        let sa = Sa::configure(args)?;
        let src = bcx
            .names
            .ipv4(args.require(3, "SRC", "the tunnel's local address")?)?;
        let dst = bcx
            .names
            .ipv4(args.require(4, "DST", "the tunnel's remote address")?)?;
        let ttl =
            args.keyword("TTL")
                .map_or(Ok(64), |s| crate::args::parse_uint_max(s, 255, "TTL"))? as u8;
        let limit = if sa.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        let next = args
            .keyword("SEQ")
            .map_or(Ok(1), |s| crate::args::parse_uint_max(s, limit, "SEQ"))?;
        if next == 0 {
            return Err(ConfigError::new(
                "expected SEQ 1 or more (sequence number 0 is never sent)",
            ));
        }
        Ok(IPsecGCMEncap {
            sa,
            src,
            dst,
            ttl,
            next,
            step: 1,
            packets: 0,
            bytes: 0,
        })
    }

    /// The sequence number the next packet will carry.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The last sequence number this SA may send.
    fn last_seq(&self) -> u64 {
        if self.sa.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        }
    }
}

// IPsecGCMEncap encapsulates (the length and every byte change): it declares nothing (`Element::declared`).
impl Element for IPsecGCMEncap {
    fn class_name(&self) -> &'static str {
        "IPsecGCMEncap"
    }

    fn port_count(&self) -> PortCount {
        PortCount::exact(1, 1)
    }

    fn batching(&self) -> Batching {
        Batching::Ordered
    }

    fn push(&mut self, _port: usize, mut p: Packet, cx: &mut Context) -> Verdict {
        cx.record_opaque("ipsec: every packet is encrypted under its own sequence number");
        let Some(nh) = p.network_offset_in_data() else {
            return Verdict::Drop(p, IPsecGCMEncapReason::BadHeader.into());
        };
        let Some((_, inner)) = p.data().get(nh..).and_then(ipv4_lengths) else {
            return Verdict::Drop(p, IPsecGCMEncapReason::BadHeader.into());
        };
        let seq = self.next;
        if seq == 0 || seq > self.last_seq() {
            return Verdict::Drop(p, IPsecGCMEncapReason::SeqOverflow.into());
        }
        // Plaintext: the datagram, padding to a multiple of 4 with the two trailer bytes.
        let pad = (4 - (inner + 2) % 4) % 4;
        let ct = inner + pad + 2;
        let total = FRONT + ct + ICV_LEN;
        let Ok(total16) = u16::try_from(total) else {
            return Verdict::Drop(p, IPsecGCMEncapReason::TooLong.into());
        };
        let (tos, df) = {
            let ip = &p.data()[nh..];
            (ip[1], ip[6] & 0x40 != 0)
        };
        let mac = mac_in_prefix(&p, nh);
        self.next = seq.saturating_add(self.step);
        if self.next > self.last_seq() {
            // No more sequence numbers: later packets are refused (`seq-overflow`).
            self.next = 0;
        }
        self.packets += 1;
        self.bytes += inner as u64;

        p.truncate(nh + inner);
        let tail = p.put(pad + 2 + ICV_LEN);
        for (i, b) in tail.iter_mut().take(pad).enumerate() {
            *b = (i + 1) as u8;
        }
        tail[pad] = pad as u8;
        tail[pad + 1] = protocol::IPIP;
        let iv = seq.to_be_bytes();
        let icv = {
            let d = p.data_mut();
            self.sa.seal(seq, &iv, &mut d[nh..nh + ct])
        };
        let Some(icv) = icv else {
            return Verdict::Drop(p, IPsecGCMEncapReason::TooLong.into());
        };
        p.data_mut()[nh + ct..nh + ct + ICV_LEN].copy_from_slice(&icv);

        p.push(FRONT);
        let d = p.data_mut();
        d.copy_within(FRONT..FRONT + nh, 0);
        let front = &mut d[nh..nh + FRONT];
        {
            let mut ip = Ipv4Packet::new_unchecked(&mut front[..OUTER_IP]);
            ip.set_version(4);
            ip.set_header_len(20);
            ip.set_tos(tos);
            ip.set_total_len(total16);
            ip.set_ident(seq as u16);
            ip.set_dont_frag(df);
            ip.set_ttl(self.ttl);
            ip.set_protocol(protocol::ESP);
            ip.set_src_addr(self.src);
            ip.set_dst_addr(self.dst);
            ip.fill_checksum();
        }
        front[OUTER_IP..OUTER_IP + 4].copy_from_slice(&self.sa.spi.to_be_bytes());
        front[OUTER_IP + 4..OUTER_IP + 8].copy_from_slice(&(seq as u32).to_be_bytes());
        front[OUTER_IP + ESP_HEADER..].copy_from_slice(&iv);
        if let Some(m) = mac {
            p.set_mac_header(m);
        }
        p.set_network_header(nh);
        p.set_transport_header(nh + OUTER_IP);
        p.meta.dst_ip = self.dst;
        Verdict::Out(0, p)
    }

    fn worker_share(&mut self) -> Option<&mut dyn WorkerShare> {
        Some(self)
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("packets", self.packets),
            ("bytes", self.bytes),
            ("next_seq", self.next),
        ]
    }

    fn state_dump(&self) -> Vec<String> {
        vec![format!(
            "spi {:#010x} next-seq {} step {}",
            self.sa.spi, self.next, self.step
        )]
    }
}

impl WorkerShare for IPsecGCMEncap {
    /// No address or port pools: replies are not steered by this element.
    fn pools(&self) -> Vec<Pool> {
        Vec::new()
    }

    /// Worker `w` of `n` sends the sequence numbers `SEQ + w`, `SEQ + w + n`, …: disjoint
    /// across workers (so no IV repeats under the key) and interleaved (so a receiver's
    /// window sees them close together when the workers keep pace).
    fn narrow(&mut self, w: usize, n: usize) -> Result<(), ShareError> {
        if n > 1 {
            self.next = self.next.saturating_add(w as u64);
            self.step = n as u64;
        }
        Ok(())
    }
}
