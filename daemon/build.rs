//! Whether the tests run as root (`test_as_root`: a test that creates a user to try the
//! socket as someone else is otherwise built `#[ignore]`d with the reason), whether Debian's
//! Chromium and chromedriver are there (`web_browser`, for the web page's browser test), whether
//! strace is (`strace`, for the idle test's watch on the daemon's system calls), and which
//! third-party packages the interoperability tests can use: `scripts/interop-venv.sh`
//! installs them into a virtual environment and marks each one that installed. A test whose
//! package is missing is built `#[ignore]`d with the reason, so it is counted as skipped,
//! never as passed. The venv's location reaches the tests as `STEWARD_INTEROP_VENV`.
//!
//! It also packs the binary's relative relocations (see [`pack_relative_relocations`]) and
//! places the code a running daemon uses together (see [`order_code_by_use`]).

use std::path::PathBuf;

/// The packages the tests name, as `interop_<name>` cfgs (`-` becomes `_`).
const PACKAGES: [&str; 11] = [
    "dkimpy",
    "dnspython",
    "standardwebhooks",
    "stripe",
    "croniter",
    "mcp",
    "mcp_server_time",
    "mcp_server_git",
    "litellm",
    "octokit_webhooks_methods",
    "wordllama",
];

fn main() {
    pack_relative_relocations();
    order_code_by_use();
    println!("cargo::rustc-check-cfg=cfg(test_as_root)");
    // The web page's browser test drives Debian's Chromium over its chromedriver.
    println!("cargo::rustc-check-cfg=cfg(web_browser)");
    // The idle test watches the daemon's system calls with strace.
    println!("cargo::rustc-check-cfg=cfg(strace)");
    println!("cargo::rerun-if-changed=/usr/bin/strace");
    if std::path::Path::new("/usr/bin/strace").exists() {
        println!("cargo::rustc-cfg=strace");
    }
    for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        println!("cargo::rerun-if-changed={program}");
    }
    if std::path::Path::new("/usr/bin/chromium").exists()
        && std::path::Path::new("/usr/bin/chromedriver").exists()
    {
        println!("cargo::rustc-cfg=web_browser");
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0");
    if root {
        println!("cargo::rustc-cfg=test_as_root");
    }
    println!("cargo::rerun-if-env-changed=STEWARD_INTEROP_VENV");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");
    let venv = std::env::var_os("STEWARD_INTEROP_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("interop-venv"))
        })
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/interop-venv")
        });
    let installed = venv.join("installed");
    // The directory exists from the first build on, so that cargo watches it rather than
    // rerunning this script on every build while it is missing.
    let _ = std::fs::create_dir_all(&installed);
    println!("cargo::rerun-if-changed={}", installed.display());
    println!("cargo::rustc-env=STEWARD_INTEROP_VENV={}", venv.display());
    for package in PACKAGES {
        println!("cargo::rustc-check-cfg=cfg(interop_{package})");
        if installed.join(package).exists() {
            println!("cargo::rustc-cfg=interop_{package}");
        }
    }
}

/// Links `steward` with `-z pack-relative-relocs` (DT_RELR) where the C library can load it.
///
/// The binary is position-independent, so the loader patches ~95,000 pointers on start
/// (vtables, tables of string slices); as RELA entries that is a 2.2 MB table, read on every
/// start and resident for the process's life. DT_RELR writes the same relocations in a few
/// KB. glibc loads it from 2.36 on and the linker then marks the binary as needing it, so the
/// option is given only when the build machine's glibc defines `GLIBC_ABI_DT_RELR`
/// (a binary built here runs on glibc 2.36 or later).
fn pack_relative_relocations() {
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") != "linux"
        || target("CARGO_CFG_TARGET_ENV") != "gnu"
        || target("TARGET") != target("HOST")
    {
        return;
    }
    let libc_supports_relr = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
        "/usr/lib/libc.so.6",
    ]
    .iter()
    .find_map(|path| std::fs::read(path).ok())
    .is_some_and(|libc| {
        libc.windows(b"GLIBC_ABI_DT_RELR".len())
            .any(|w| w == b"GLIBC_ABI_DT_RELR")
    });
    if libc_supports_relr {
        println!("cargo::rustc-link-arg-bin=steward=-Wl,-z,pack-relative-relocs");
    }
}

/// Links `steward` with the functions a running daemon uses placed together, in the order of
/// `daemon/code-layout.order` (written by `scripts/code-layout.sh`).
///
/// Most of an idle daemon's memory is its own code: the kernel maps a binary's pages when
/// they are first run, and 64 KB around each (fault-around), so the few functions start and
/// idle run — scattered among 29 MB of code by the order the compiler emitted them — made
/// 23 MB of it resident. Placed together, the same functions fill a few MB. A symbol the file
/// names that the build does not have (another compiler, changed code) is skipped without a
/// warning; the layout then decays towards the compiler's own, it never breaks the build.
///
/// The option is LLD's, so it is given only where rustc links with LLD by default
/// (x86_64-unknown-linux-gnu since Rust 1.90), not when the flags mention linking at all or the
/// environment names a linker (either may take LLD away), and only for optimised builds (the
/// tests do not need it).
fn order_code_by_use() {
    let order = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("code-layout.order");
    println!("cargo::rerun-if-changed={}", order.display());
    let var = |key: &str| std::env::var(key).unwrap_or_default();
    let linking_customised = var("CARGO_ENCODED_RUSTFLAGS").contains("link")
        || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some();
    if var("TARGET") != "x86_64-unknown-linux-gnu"
        || var("PROFILE") != "release"
        || linking_customised
        || !order.exists()
    {
        return;
    }
    println!(
        "cargo::rustc-link-arg-bin=steward=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo::rustc-link-arg-bin=steward=-Wl,--no-warn-symbol-ordering");
}
