//! Records, for the environment section of every report, the commit the
//! command was built from (with `-dirty` when the work tree differed from it),
//! the compiler that built it and the versions of the peer crates it measures
//! (read from the workspace's Cargo.lock).

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

    let commit = build_commit().unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KEYWAY_BENCH_COMMIT={commit}");
}

/// The commit being built, `-dirty` when tracked files differ from it; `None` outside a git
/// work tree. Asks cargo to run this again when the commit, the index or any workspace source
/// changes, so the name never outlives the code it names.
fn build_commit() -> Option<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for watched in [
        "Cargo.toml",
        "crates/keyway/src",
        "crates/keyway/Cargo.toml",
        "crates/keyway-redis/src",
        "crates/keyway-redis/Cargo.toml",
        "crates/keyway-bench/src",
        "crates/keyway-bench/examples",
        "crates/keyway-bench/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={root}/{watched}");
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let git_dir = git(&["rev-parse", "--absolute-git-dir"])?;
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .unwrap_or_else(|| git_dir.clone());
    // A path that does not exist would make cargo run this on every build: watch those that do.
    let mut watch = vec![
        format!("{git_dir}/HEAD"),
        format!("{git_dir}/index"),
        format!("{common}/packed-refs"),
    ];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(format!("{common}/{branch}"));
    }
    for path in watch.iter().filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    let hash = git(&["rev-parse", "--short=12", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// The version of package `name` in a Cargo.lock's text.
fn locked_version(lock: &str, name: &str) -> String {
    let header = format!("name = \"{name}\"\n");
    lock.split("[[package]]")
        .find(|block| block.trim_start().starts_with(header.trim_start()))
        .and_then(|block| block.lines().find_map(|l| l.strip_prefix("version = ")))
        .map_or_else(|| "?".to_string(), |v| v.trim_matches('"').to_string())
}
