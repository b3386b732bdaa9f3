//! `fusebox gen`: write a deterministic synthetic trace to a pcap file.

use crate::error::CliError;
use packet::{Precision, Timestamp};
use ports::gen::{
    generate, generate_tuples, parse_mac, parse_mix, parse_ports, parse_prefix, parse_rate,
    parse_size, parse_ttl, Anomalies, GenConfig, Mix, PortSpec, Rate, SizeDist, TtlSpec,
};
use ports::pcap::{PcapWriter, DLT_EN10MB};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use wire::ethernet::Address;

/// Options of `fusebox gen`. The same options and seed always give the same file.
#[derive(clap::Args, Debug)]
pub struct GenArgs {
    /// Pcap file to write (Ethernet link type).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,

    /// Number of packets.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub packets: u64,

    /// Take the flows' 5-tuples from a ClassBench header trace (one flow per line, in
    /// order, up to --flows) instead of drawing them; --mix, --src, --dst, --sport and
    /// --dport are then not used.
    #[arg(long, value_name = "FILE", conflicts_with = "rules")]
    pub headers: Option<PathBuf>,

    /// Draw the flows' 5-tuples as random corners of random rules of a ClassBench filter
    /// set (each field at its rule's low or high end, seeded by --seed), as ClassBench's
    /// trace generator does for sets without a trace.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,

    /// Number of distinct flows (5-tuples); fewer when there are fewer packets.
    #[arg(long, default_value_t = 10)]
    pub flows: u32,

    /// Relative weights of TCP, UDP and ICMP-echo flows, e.g. "tcp=1,udp=1,icmp=0"
    /// (protocols left out weigh 0).
    #[arg(long, default_value = "tcp=1,udp=1,icmp=0", value_parser = parse_mix)]
    pub mix: Mix,

    /// Ethernet frame sizes in bytes, counting the 4-byte FCS that is not captured (a
    /// 64-byte frame is 60 bytes in the file): "64", "uniform:64-1500" or "imix"
    /// (64/576/1500 in 7:4:1).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    pub size: SizeDist,

    /// Prefix source addresses are drawn from.
    #[arg(long, default_value = "10.0.0.0/16", value_parser = parse_prefix)]
    pub src: (Ipv4Addr, u8),

    /// Prefix destination addresses are drawn from.
    #[arg(long, default_value = "10.1.0.0/16", value_parser = parse_prefix)]
    pub dst: (Ipv4Addr, u8),

    /// Source ports (and ICMP echo identifiers): a range "1024-65535" or a list "80,443".
    #[arg(long, default_value = "1024-65535", value_parser = parse_ports)]
    pub sport: PortSpec,

    /// Destination ports: a list "80,443,1234" or a range "1-1023".
    #[arg(long, default_value = "80,443,1234", value_parser = parse_ports)]
    pub dport: PortSpec,

    /// Source MAC address of every frame.
    #[arg(long, default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    pub src_mac: Address,

    /// Destination MAC address of every frame.
    #[arg(long, default_value = "02:00:00:00:00:02", value_parser = parse_mac)]
    pub dst_mac: Address,

    /// Seed of the pseudo-random generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// IP time-to-live: one value for every packet ("64"), or a range each packet's TTL is
    /// drawn from ("1-12": packets that expire along a chain).
    #[arg(long, default_value = "64", value_parser = parse_ttl)]
    pub ttl: TtlSpec,

    /// Probability that an IPv4 packet has a wrong header checksum ("0.01" or "1%").
    #[arg(long, default_value = "0", value_parser = parse_rate, value_name = "P")]
    pub bad_ip_checksum: Rate,

    /// Probability that an IPv4 packet carries a (valid) options field: NOP/End padding,
    /// record route, timestamp or router alert.
    #[arg(long, default_value = "0", value_parser = parse_rate, value_name = "P")]
    pub ip_options: Rate,

    /// Probability that a frame is an ARP request instead of the next flow packet.
    #[arg(long, default_value = "0", value_parser = parse_rate, value_name = "P")]
    pub arp: Rate,

    /// Probability that an IPv4 packet's length is cut: the frame shorter than the IP total
    /// length, or the IP total length shorter than the frame (half each).
    #[arg(long, default_value = "0", value_parser = parse_rate, value_name = "P")]
    pub truncate: Rate,

    /// Probability that a TCP or UDP packet is cut to a short transport part: 7 to 19
    /// transport bytes for TCP, 7 or 8 for UDP (around the 8- and 18-byte thresholds of
    /// Click's rewriters), the IP total length and the frame ending there (the frame padded
    /// with zeros to 60 bytes half of the time, as an Ethernet trailer).
    #[arg(long, default_value = "0", value_parser = parse_rate, value_name = "P")]
    pub short_transport: Rate,

    /// Timestamp of the first packet, in seconds since the Unix epoch.
    #[arg(long, default_value_t = 1_700_000_000)]
    pub start: u64,

    /// Nanoseconds between consecutive packets.
    #[arg(long, default_value_t = 1000)]
    pub gap_ns: u64,

    /// Write nanosecond timestamps (the default is microseconds, unless --gap-ns is not a
    /// whole number of microseconds).
    #[arg(long)]
    pub nano: bool,

    /// Write only the generated frames matching this tcpdump expression (the others are
    /// generated, so the rest of the trace is the same, and counted as filtered out).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
}

impl GenArgs {
    /// The generator configuration these options describe.
    pub fn config(&self) -> GenConfig {
        GenConfig {
            packets: self.packets,
            flows: self.flows,
            mix: self.mix,
            size: self.size,
            src_prefix: self.src,
            dst_prefix: self.dst,
            src_ports: self.sport.clone(),
            dst_ports: self.dport.clone(),
            src_mac: self.src_mac,
            dst_mac: self.dst_mac,
            seed: self.seed,
            start: Timestamp::from_parts(self.start, 0),
            gap_ns: self.gap_ns,
            ttl: match self.ttl {
                TtlSpec::Fixed(t) | TtlSpec::Range(t, _) => t,
            },
            anomalies: Anomalies {
                ttl_range: match self.ttl {
                    TtlSpec::Fixed(_) => None,
                    TtlSpec::Range(lo, hi) => Some((lo, hi)),
                },
                bad_ip_checksum: self.bad_ip_checksum,
                ip_options: self.ip_options,
                arp: self.arp,
                truncated: self.truncate,
                short_transport: self.short_transport,
            },
        }
    }
}

/// A ClassBench header (source, destination, ports, protocol) as a generator 5-tuple.
pub(crate) fn tuple(k: [u64; 5]) -> packet::Ipv4FlowKey {
    packet::FlowKey {
        protocol: k[4] as u8,
        src: Ipv4Addr::from(k[0] as u32),
        src_port: k[2] as u16,
        dst: Ipv4Addr::from(k[1] as u32),
        dst_port: k[3] as u16,
    }
}

/// The 5-tuples `--headers` or `--rules` give, if either is set.
fn classbench_tuples(args: &GenArgs) -> Result<Option<Vec<packet::Ipv4FlowKey>>, CliError> {
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).map_err(|e| CliError::io(p, "cannot read it: ", e))
    };
    if let Some(p) = &args.headers {
        let keys = classify::classbench::parse_trace(&read(p)?, &p.display().to_string())?;
        return Ok(Some(keys.into_iter().map(tuple).collect()));
    }
    let Some(p) = &args.rules else {
        return Ok(None);
    };
    let rules = classify::classbench::parse_rules(&read(p)?, &p.display().to_string())?;
    if rules.is_empty() {
        return Err(CliError::Invalid(format!("{}: no rules", p.display())));
    }
    let keys = classify::classbench::corners(&rules, args.flows as usize, args.seed);
    Ok(Some(keys.into_iter().map(tuple).collect()))
}

/// Writes the trace; returns a one-line summary, or what went wrong.
pub fn run(args: &GenArgs) -> Result<String, CliError> {
    let cfg = args.config();
    cfg.validate()?;
    let filter = match &args.filter {
        Some(text) => Some(
            elements::pcapfilter::PcapFilter::from_expr(text)
                .map_err(|e| CliError::context(format!("--filter `{text}`"), e))?,
        ),
        None => None,
    };
    let mut filtered_out = 0u64;
    let precision = if args.nano || !args.gap_ns.is_multiple_of(1000) {
        Precision::Nano
    } else {
        Precision::Micro
    };
    let mut writer = PcapWriter::create(&args.output, precision, DLT_EN10MB)?;
    let mut gen = match classbench_tuples(args)? {
        Some(t) => generate_tuples(&cfg, &t),
        None => generate(&cfg),
    };
    let flows = gen.flow_count();
    let mut bytes = 0u64;
    for (ts, frame) in gen.by_ref() {
        if filter.as_ref().is_some_and(|f| !f.matches(&frame)) {
            filtered_out += 1;
            continue;
        }
        bytes += frame.len() as u64;
        writer.write(ts, &frame)?;
    }
    let packets = writer.packets();
    writer.finish()?;
    let mut line = format!(
        "wrote {packets} packets ({flows} flows, {bytes} bytes captured) to {}",
        args.output.display()
    );
    if filter.is_some() {
        line.push_str(&format!("; {filtered_out} generated frames filtered out"));
    }
    if !cfg.anomalies.is_none() {
        let c = gen.anomaly_counts();
        line.push_str(&format!(
            "; anomalies: {} TTL <= 1, {} bad IP checksums, {} with IP options, {} ARP, {} cut frames, {} short IP lengths, {} short transport parts",
            c.ttl_at_most_1, c.bad_ip_checksum, c.ip_options, c.arp, c.cut_frames, c.short_ip_length, c.short_transport
        ));
    }
    Ok(line)
}
