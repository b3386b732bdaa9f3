//! `IPFragmenter`.

use super::{bad_out, bad_outcome, df_flags, IpHeaderReason};
use crate::args::{parse_bool, parse_uint};
use crate::model::{Case, Effect, Field, FieldSet, Filter, Model, Outcome};
use crate::{Args, BuildCtx, ConfigError, Context, Element, PortCount, Verdict};
use packet::Packet;
use wire::ipv4::Packet as Ipv4Packet;

reasons! {
    /// Why `IPFragmenter` drops a packet (besides [`IpHeaderReason`]).
    pub enum IPFragmenterReason {
        /// Longer than the MTU with DF set (HONOR_DF), and output 1 is not connected.
        DontFragment => "fragment-df",
        /// The header leaves fewer than 8 data bytes in the MTU, and output 1 is not
        /// connected.
        HeaderExceedsMtu => "header-exceeds-mtu",
    }
}

const DF: u16 = 0x4000;
const MF: u16 = 0x2000;

/// The options of header `h` (`hl` bytes) that RFC 791 says to copy into every fragment
/// (copied flag 0x80 set), padded with end-of-list bytes to a multiple of 4.
fn copied_options(h: &[u8], hl: usize) -> Vec<u8> {
    let opts = h.get(20..hl).unwrap_or(&[]);
    let mut out = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let opt = opts[i];
        let len = if opt == 1 {
            1
        } else {
            match opts.get(i + 1) {
                Some(&l) if opt != 0 && l >= 2 && i + usize::from(l) <= opts.len() => {
                    usize::from(l)
                }
                _ => break,
            }
        };
        if opt & 0x80 != 0 {
            out.extend_from_slice(&opts[i..i + len]);
        }
        i += len;
    }
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out
}

/// `IPFragmenter(MTU [, HONOR_DF, VERBOSE, keyword HEADROOM])`: fragments IP packets longer
/// than MTU (counted from the network header annotation to the end of the packet). 1/1-2.
///
/// Packets that fit pass untouched. A longer packet with DF set (and `HONOR_DF`, default
/// true), or whose header leaves fewer than 8 data bytes under MTU, leaves on output 1 if it
/// is connected, else is dropped under `fragment-df` / `header-exceeds-mtu`. Otherwise it is
/// split per RFC 791 as Click does: the first fragment keeps the whole header (all options
/// and any bytes before the network header), `(MTU − header) & ~7` data bytes and MF; each
/// later fragment is a new packet holding only an IP header — the first 20 header bytes, then
/// the options with the copied flag, padded to a multiple of 4 — and up to
/// `(MTU − its header) & ~7` data bytes, with fragment offset = original offset + data offset
/// / 8, and MF cleared on the last unless the original had MF. Each checksum is recomputed.
/// With `HONOR_DF false` a DF packet is fragmented with DF cleared and a new IP ID (Click uses
/// a random one; FuseBox a deterministic sequence seeded by the element name, for
/// reproducible output).
///
/// Accounting: the original packet becomes the first fragment (Click clones it, trims the
/// clone and frees the original: same bytes), the others come from `cx.new_packet`, so
/// in + created = out holds without a drop. A packet that does not fit only because of
/// bytes beyond its IP total length (padding) is trimmed to the total length and passed
/// whole (Click would emit a malformed first fragment). Bad IP lengths: `bad-ip-header`;
/// no network header: `no-ip-header`. HEADROOM and VERBOSE are accepted and ignored.
/// `stats()`: `drops` (DF/too small) and `fragments` (fragments emitted).
pub struct IPFragmenter {
    mtu: usize,
    honor_df: bool,
    has_out1: bool,
    rng: u64,
    drops: u64,
    fragments: u64,
}

impl IPFragmenter {
    /// Builds the element.
    pub fn configure(args: &Args, bcx: &BuildCtx) -> Result<IPFragmenter, ConfigError> {
        args.check(3, &["MTU", "HONOR_DF", "VERBOSE", "HEADROOM"])?;
        let mtu = parse_uint(args.require(0, "MTU", "the MTU in bytes")?, "MTU")?;
        if mtu < 8 {
            return Err(ConfigError::new(format!(
                "expected MTU at least 8, found {mtu}"
            )));
        }
        let honor_df = args
            .get(1, "HONOR_DF")
            .map_or(Ok(true), |s| parse_bool(s, "HONOR_DF"))?;
        if let Some(s) = args.get(2, "VERBOSE") {
            parse_bool(s, "VERBOSE")?;
        }
        if let Some(s) = args.keyword("HEADROOM") {
            parse_uint(s, "HEADROOM")?;
        }
        // FNV-1a of the element name seeds the IP ID sequence used when DF is overridden.
        let rng = crate::hash::fnv1a(crate::hash::FNV_BASIS, bcx.name.as_bytes());
        Ok(IPFragmenter {
            mtu: usize::try_from(mtu).unwrap_or(usize::MAX),
            honor_df,
            has_out1: bcx.noutputs >= 2,
            rng: rng | 1,
            drops: 0,
            fragments: 0,
        })
    }

    fn next_id(&mut self) -> u16 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 24) as u16
    }
}

// IPFragmenter makes fragments (its model's run-time cases): it declares nothing (`Element::declared`).
impl Element for IPFragmenter {
    fn class_name(&self) -> &'static str {
        "IPFragmenter"
    }
    fn port_count(&self) -> PortCount {
        PortCount::range(1, 1, 1, 2)
    }
    fn push(&mut self, _port: usize, mut p: Packet, cx: &mut Context) -> Verdict {
        let (Some(noff), Some(nlen)) = (
            p.network_offset_in_data(),
            p.network_header().map(<[u8]>::len),
        ) else {
            return Verdict::Drop(p, IpHeaderReason::Missing.into());
        };
        if nlen <= self.mtu {
            return Verdict::Out(0, p);
        }
        // The annotation is set: only fewer than 20 bytes fail here.
        let Ok(h) = p.ipv4() else {
            return Verdict::Drop(p, IpHeaderReason::Bad.into());
        };
        let hl = h.header_len();
        let total = usize::from(h.total_len());
        if hl < 20 || total < hl || total > nlen {
            return Verdict::Drop(p, IpHeaderReason::Bad.into());
        }
        let ip_off = h.flags_frag_raw();
        let first_dlen = self.mtu.checked_sub(hl).map_or(0, |d| d & !7);
        if ip_off & DF != 0 && self.honor_df {
            self.drops += 1;
            return bad_out(self.has_out1, p, IPFragmenterReason::DontFragment);
        }
        if first_dlen < 8 {
            self.drops += 1;
            return bad_out(self.has_out1, p, IPFragmenterReason::HeaderExceedsMtu);
        }
        let in_dlen = total - hl;
        if in_dlen <= first_dlen {
            p.truncate(noff + total);
            return Verdict::Out(0, p);
        }
        // Modify the header in place: it becomes the first fragment's, and later fragments
        // copy its first 20 bytes (as Click copies the modified `ip`).
        let new_id = (ip_off & DF != 0).then(|| self.next_id());
        let Ok(mut h) = p.ipv4_mut() else {
            return Verdict::Drop(p, IpHeaderReason::Missing.into());
        };
        let mut off_field = ip_off;
        if let Some(id) = new_id {
            h.set_ident(id);
            off_field &= !DF;
        }
        let had_mf = off_field & MF != 0;
        off_field |= MF;
        h.set_total_len((hl + first_dlen) as u16);
        h.set_flags_frag_raw(off_field);
        h.fill_checksum();

        let Some(h) = p.network_header() else {
            return Verdict::Drop(p, IpHeaderReason::Missing.into());
        };
        let opts = copied_options(h, hl);
        let out_hl = 20 + opts.len();
        let per = self.mtu.saturating_sub(out_hl) & !7;
        let mut rest = Vec::new();
        let mut buf = Vec::with_capacity(self.mtu);
        let mut off = first_dlen;
        while off < in_dlen && per > 0 {
            let dlen = per.min(in_dlen - off);
            buf.clear();
            buf.extend_from_slice(&h[..20]);
            buf.extend_from_slice(&opts);
            buf.extend_from_slice(&h[hl + off..hl + off + dlen]);
            let mut f = off_field.wrapping_add((off >> 3) as u16);
            if off + dlen >= in_dlen && !had_mf {
                f &= !MF;
            }
            // out_hl is 20 plus options padded to 4 bytes: the IHL says it exactly.
            let mut ip = Ipv4Packet::new_unchecked(&mut buf[..]);
            ip.set_version(4);
            ip.set_header_len(out_hl);
            ip.set_total_len((out_hl + dlen) as u16);
            ip.set_flags_frag_raw(f);
            ip.fill_checksum();
            let mut q = cx.new_packet(&buf, &p.meta);
            q.set_network_header(0);
            q.set_transport_header(out_hl);
            rest.push(q);
            off += dlen;
        }
        p.truncate(noff + hl + first_dlen);
        self.fragments += 1 + rest.len() as u64;
        cx.emit(0, p);
        for q in rest {
            cx.emit(0, q);
        }
        Verdict::Done
    }
    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![("drops", self.drops), ("fragments", self.fragments)]
    }
    /// `push`'s tests in its order. Packets that fit the MTU pass untouched; longer ones
    /// with bad lengths are `bad-ip-header`, with DF (and HONOR_DF) `fragment-df`, with a
    /// header leaving fewer than 8 data bytes `header-exceeds-mtu`; those longer only
    /// because of padding are trimmed to the IP length and pass (one case per IHL); the
    /// rest are fragmented at run time. As for `DecIPTTL`, `ip_avail` 0 (no network header:
    /// `no-ip-header`, or one at the end of the data: passes) is left to the element, and so
    /// is everything longer than 65534 bytes when the MTU is that large (`ip_avail` stops
    /// at 65535).
    fn model(&self) -> Option<Model> {
        let any = Filter::any;
        let avail = |lo: u128, hi: u128| any().with(Field::IpAvail, FieldSet::range(lo, hi));
        let ihl = |set: FieldSet| any().with(Field::IpIhl, set);
        let mut cases = vec![Case::new(avail(0, 0), Outcome::Runtime)];
        if self.mtu >= 0xffff {
            cases.push(Case::new(avail(1, 0xfffe), Outcome::Out(0)));
            cases.push(Case::new(any(), Outcome::Runtime));
            return Some(Model::new(cases));
        }
        let mtu = self.mtu as u128;
        cases.push(Case::new(avail(1, mtu), Outcome::Out(0)));
        // From here on the packet is longer than the MTU.
        let bad = |f: Filter| Case::new(f, Outcome::Drop(IpHeaderReason::Bad.into()));
        cases.push(bad(avail(0, 19)));
        cases.push(bad(ihl(FieldSet::range(0, 4))));
        cases.push(bad(any().with(Field::IpLenOk, FieldSet::single(0))));
        if self.honor_df {
            cases.push(
                Case::new(
                    any().with(Field::IpFlags, df_flags()),
                    bad_outcome(self.has_out1, IPFragmenterReason::DontFragment),
                )
                .stat("drops"),
            );
        }
        // Data bytes in the first fragment for a header of `k` words.
        let first_dlen = |k: u128| mtu.checked_sub(4 * k).map_or(0, |d| d & !7);
        let small =
            FieldSet::from_intervals((5..=15).filter(|&k| first_dlen(k) < 8).map(|k| (k, k)));
        if !small.is_empty() {
            cases.push(
                Case::new(
                    ihl(small),
                    bad_outcome(self.has_out1, IPFragmenterReason::HeaderExceedsMtu),
                )
                .stat("drops"),
            );
        }
        for k in (5..=15).filter(|&k| first_dlen(k) >= 8) {
            let fits = FieldSet::range(0, (4 * k + first_dlen(k)).min(0xffff));
            cases.push(
                Case::new(
                    ihl(FieldSet::single(k)).with(Field::IpLen, fits),
                    Outcome::Out(0),
                )
                .effect(Effect::TrimToIpLen),
            );
        }
        cases.push(Case::new(any(), Outcome::Runtime));
        Some(Model::new(cases))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use packet::Packet;

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn splits_1400_bytes_at_576() {
        let data = payload(1380);
        let b = ipv4(A, B, 17, 64, &[], &data);
        let mut e = build("IPFragmenter", "576", 1).unwrap();
        let mut p = Packet::from_bytes(&[[0xaa; 14].as_slice(), &b].concat());
        p.set_network_header(14);
        let o = push(e.as_mut(), p);
        assert_eq!(o.out.len(), 3);
        assert_eq!(o.created, 2);
        let f: Vec<&[u8]> = o
            .out
            .iter()
            .map(|(_, p)| p.network_header().unwrap())
            .collect();
        // (576 - 20) & ~7 = 552: 552 + 552 + 276 data bytes; offsets 0, 69, 138 (8-byte units).
        let lens: Vec<u16> = f
            .iter()
            .map(|h| Ipv4Packet::new_unchecked(h).total_len())
            .collect();
        assert_eq!(lens, vec![572, 572, 296]);
        let offs: Vec<u16> = f
            .iter()
            .map(|h| Ipv4Packet::new_unchecked(h).flags_frag_raw())
            .collect();
        assert_eq!(offs, vec![MF, MF | 69, 138]);
        assert_eq!(o.out[0].1.len(), 14 + 572);
        assert_eq!(o.out[1].1.len(), 572);
        let mut joined = Vec::new();
        for h in &f {
            assert!(ip_ok(h));
            assert_eq!(&h[4..6], &b[4..6]);
            joined.extend_from_slice(&h[20..]);
        }
        assert_eq!(joined, data);
        assert_eq!(e.stats(), vec![("drops", 0), ("fragments", 3)]);
    }

    #[test]
    fn df_small_and_options() {
        let mut b = ipv4(A, B, 17, 64, &[], &payload(1000));
        b[6] = 0x40;
        Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        let mut e = build("IPFragmenter", "576", 1).unwrap();
        assert_eq!(push(e.as_mut(), pkt(&b)).drops, vec!["fragment-df"]);
        let mut e = build("IPFragmenter", "576", 2).unwrap();
        assert_eq!(push(e.as_mut(), pkt(&b)).out[0].0, 1);
        let mut e = build("IPFragmenter", "576, false", 1).unwrap();
        let o = push(e.as_mut(), pkt(&b));
        assert_eq!(o.out.len(), 2);
        for (_, q) in &o.out {
            assert_eq!(q.data()[6] & 0x40, 0);
        }
        // Small packets pass untouched.
        let small = ipv4(A, B, 17, 64, &[], &payload(100));
        let mut e = build("IPFragmenter", "576", 1).unwrap();
        assert_eq!(push(e.as_mut(), pkt(&small)).out[0].1.data(), &small[..]);
        // Options: the copied one (0x83 LSRR, 7 bytes) is kept, RR (7) only in the first.
        let opts = [7, 7, 4, 0, 0, 0, 0, 0x83, 7, 4, 1, 2, 3, 4, 1, 0];
        let big = ipv4(A, B, 17, 64, &opts, &payload(300));
        let mut e = build("IPFragmenter", "200", 1).unwrap();
        let o = push(e.as_mut(), pkt(&big));
        let f1 = o.out[1].1.data();
        assert_eq!(f1[0], 0x47);
        assert_eq!(&f1[20..28], &[0x83, 7, 4, 1, 2, 3, 4, 0]);
        assert!(o.out.iter().all(|(_, q)| ip_ok(q.data())));
        let data: Vec<u8> = o
            .out
            .iter()
            .flat_map(|(_, q)| q.data()[super::super::ihl(q.data())..].to_vec())
            .collect();
        assert_eq!(data, payload(300));
        assert!(build("IPFragmenter", "4", 1).is_err());
        assert!(build("IPFragmenter", "", 1).is_err());
        assert!(build("IPFragmenter", "576, maybe", 1).is_err());
        assert_eq!(
            push(e.as_mut(), Packet::from_bytes(&big)).drops,
            vec!["no-ip-header"]
        );
    }
}
