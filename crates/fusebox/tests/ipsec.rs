//! The IPsec gateway elements end to end: the example gateway pair and the chain of four
//! IPsec NFs give the same packets, counters and state in every mode, and tshark (an
//! outside decoder, given the key) decrypts FuseBox's ESP and finds the ICVs correct.
//! The kernel interop test is `ipsec_kernel.rs`; scapy's is in the elements crate.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fusebox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fusebox"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed when dropped.
fn scratch(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fusebox-ipsec-{tag}-"))
        .tempdir()
        .unwrap()
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn example_gateways_are_identical_in_every_mode() {
    let tmp = scratch("example");
    let dir = tmp.path();
    let trace = dir.join("trace.pcap");
    ok(fusebox().args(["gen", "-o"]).arg(&trace).args([
        "--packets",
        "1500",
        "--flows",
        "30",
        "--mix",
        "tcp=1,udp=1,icmp=1",
        "--src",
        "10.1.0.0/24",
        "--dst",
        "10.2.0.0/24",
    ]));
    for (chain, entry, far) in [
        ("chain.toml", "gwa.eth0", "gwb.eth0"),
        ("four.toml", "ip1.eth0", "ip4.eth1"),
    ] {
        let file = root().join("examples/ipsec").join(chain);
        let text = ok(fusebox()
            .arg("verify")
            .arg(&file)
            .arg("--input")
            .arg(format!("{entry}={}", trace.display()))
            .args(["--reflect", far, "--modes", "naive,synth,fastpath"]));
        // Every packet crosses the tunnels both ways: 1500 out at the far end, 1500
        // replies back out of the entry.
        assert!(
            text.contains("identical: 3000 packets on 2 exits, 0 drops"),
            "{chain}: {text}"
        );
    }
}

fn tshark_available(test: &str) -> bool {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{test}: needs tshark, and CI=true");
        }
        eprintln!("skipping {test}: tshark not installed");
    }
    ok
}

#[test]
fn tshark_decrypts_fusebox_esp_with_the_key() {
    let test = "tshark_decrypts_fusebox_esp_with_the_key";
    if !tshark_available(test) {
        return;
    }
    // The golden case's configuration: three LAN packets encrypted with SA 0x1001.
    let case = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/ipsec_esp");
    let tmp = scratch("tshark");
    let dir = tmp.path();
    for f in ["config.click", "input.pcap"] {
        std::fs::copy(case.join(f), dir.join(f)).unwrap();
    }
    ok(fusebox()
        .args(["run", "config.click", "--quiet"])
        .current_dir(dir));
    let sa = "uat:esp_sa:\"IPv4\",\"192.0.2.1\",\"192.0.2.2\",\"0x00001001\",\
              \"AES-GCM with 16 octet ICV [RFC4106]\",\
              \"0x000102030405060708090a0b0c0d0e0fa0a1a2a3\",\"NULL\",\"\"";
    let fields = |pcap: &Path, decrypt: bool, names: &[&str]| -> Vec<String> {
        let mut cmd = Command::new("tshark");
        cmd.arg("-r").arg(pcap);
        if decrypt {
            cmd.args([
                "-o",
                "esp.enable_encryption_decode:TRUE",
                "-o",
                "esp.enable_authentication_check:TRUE",
                "-o",
                sa,
            ]);
        }
        cmd.args(["-T", "fields", "-E", "separator=|"]);
        for n in names {
            cmd.args(["-e", n]);
        }
        ok(&mut cmd).lines().map(str::to_string).collect()
    };
    let inner = [
        "ip.src",
        "ip.dst",
        "ip.id",
        "ip.ttl",
        "ip.len",
        "udp.srcport",
        "tcp.srcport",
    ];
    let esp = fields(
        &dir.join("out0.pcap"),
        true,
        &["esp.spi", "esp.sequence", "esp.icv_good", "esp.protocol"],
    );
    assert_eq!(
        esp,
        vec![
            "0x00001001|1|1|0x04",
            "0x00001001|2|1|0x04",
            "0x00001001|3|1|0x04"
        ],
        "tshark: SPI, sequence, ICV good, next header"
    );
    // The decrypted datagrams are the LAN packets: tshark lists the outer header's value
    // first, then the inner one's.
    let got = fields(&dir.join("out0.pcap"), true, &inner);
    let sent: Vec<String> = fields(&dir.join("input.pcap"), false, &inner)
        .into_iter()
        .take(3)
        .collect();
    assert_eq!(got.len(), 3, "{got:?}");
    for (g, s) in got.iter().zip(&sent) {
        let g: Vec<&str> = g.split('|').collect();
        let s: Vec<&str> = s.split('|').collect();
        for (k, (gv, sv)) in g.iter().zip(&s).enumerate() {
            // Outer, inner: the inner value is the last one.
            let last = gv.rsplit(',').next().unwrap_or_default();
            assert_eq!(last, *sv, "{}: {g:?} vs {s:?}", inner[k]);
        }
    }
}
