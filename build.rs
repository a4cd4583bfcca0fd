//! Build script: gives the shared library a SONAME (cargo sets none, rust-lang/cargo#5045).
//!
//! The SONAME carries the major version only: `libdagrt.so.<major>`. The CMake package and the
//! install script create the `libdagrt.so.<major>` link next to the built library.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdagrt.so.{major}");
    }
    println!("cargo:include={}/include", env!("CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
}
