//! Records, for the environment section of every report, the compiler that
//! built the command and the versions of the peer crates it measures (read
//! from the workspace's Cargo.lock).

use std::process::Command;

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".to_string(), |v| v.trim().to_string());
    println!("cargo:rustc-env=KEYWAY_BENCH_RUSTC={version}");

    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    println!("cargo:rerun-if-changed={lock}");
    println!("cargo:rerun-if-changed=build.rs");
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let peers = [
        "tokio",
        "rayon",
        "rayon-core",
        "crossbeam-channel",
        "kameo",
        "ractor",
        "napart",
    ]
    .iter()
    .map(|name| format!("{name} {}", locked_version(&text, name)))
    .collect::<Vec<_>>()
    .join(", ");
    println!("cargo:rustc-env=KEYWAY_BENCH_PEERS={peers}");
}

/// The version of package `name` in a Cargo.lock's text.
fn locked_version(lock: &str, name: &str) -> String {
    let header = format!("name = \"{name}\"\n");
    lock.split("[[package]]")
        .find(|block| block.trim_start().starts_with(header.trim_start()))
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("version = ")))
        .map_or_else(|| "?".to_string(), |v| v.trim_matches('"').to_string())
}
