//! Compiles every `bpf/*.bpf.c` with `clang -target bpf -O2 -g` into OUT_DIR and writes
//! `objects.rs`, the table of the objects' bytes. Without clang the build still succeeds:
//! every object is empty and the crate reports it (`stages::unavailable`), so the BPF tests
//! skip (and fail under CI=true).

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let bpf = Path::new("bpf");
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-env-changed=CLANG");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let have_clang = Command::new(&clang)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have_clang {
        println!("cargo:warning=clang not found: the BPF stages are not built (their tests skip)");
    }
    let mut sources: Vec<PathBuf> = fs::read_dir(bpf)
        .expect("crates/stages/bpf")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();
    let multiarch = multiarch();
    let mut table = String::from("/// (object name, object bytes) for every `bpf/*.bpf.c`.\n");
    table.push_str("pub(crate) const OBJECTS: &[(&str, &[u8])] = &[\n");
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let file = src.file_name().unwrap().to_string_lossy().to_string();
        let name = file.trim_end_matches(".bpf.c").to_string();
        let obj = out.join(format!("{name}.bpf.o"));
        if have_clang {
            let mut cmd = Command::new(&clang);
            cmd.args([
                "-target", "bpf", "-mcpu=v3", "-O2", "-g", "-Wall", "-Werror",
            ])
            .arg("-I")
            .arg(bpf);
            if let Some(m) = &multiarch {
                cmd.arg(format!("-I/usr/include/{m}"));
            }
            cmd.arg("-c").arg(src).arg("-o").arg(&obj);
            let status = cmd.status().expect("run clang");
            assert!(status.success(), "clang failed on {}", src.display());
        } else {
            fs::write(&obj, []).expect("write empty object");
        }
        table.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            obj.display().to_string()
        ));
    }
    table.push_str("];\n");
    fs::write(out.join("objects.rs"), table).expect("write objects.rs");
}

/// The Debian multiarch directory holding `asm/types.h` (e.g. `x86_64-linux-gnu`): from
/// `gcc -print-multiarch`, else derived from the target triple.
fn multiarch() -> Option<String> {
    if let Ok(o) = Command::new("gcc").arg("-print-multiarch").output() {
        let s = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if o.status.success() && !s.is_empty() {
            return Some(s);
        }
    }
    let target = env::var("TARGET").ok()?;
    let mut parts = target.split('-');
    let arch = parts.next()?;
    let arch = match arch {
        "i586" | "i686" => "i386",
        "armv7" => "arm",
        a => a,
    };
    let abi = target.rsplit('-').next().unwrap_or("gnu");
    Some(format!("{arch}-linux-{abi}"))
}
