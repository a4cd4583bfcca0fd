//! Build script: gives the shared library a SONAME (cargo sets none, rust-lang/cargo#5045).
//!
//! The SONAME carries the part of the version that promises ABI compatibility: the major
//! version from 1.0 on (`libdagrt.so.<major>`), and below 1.0, where a minor version may break
//! the ABI (the CMake package's version file asks for the same minor), major and minor
//! (`libdagrt.so.0.<minor>`), so a binary built against 0.1 never loads 0.2. The CMake package
//! and the install script create the SONAME link next to the built library.

fn main() {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| "0".into());
    let (major, minor) = (
        var("CARGO_PKG_VERSION_MAJOR"),
        var("CARGO_PKG_VERSION_MINOR"),
    );
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdagrt.so.{abi}");
    }
    println!("cargo:include={}/include", env!("CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
}
