//! The committed header must be exactly what cbindgen generates from the sources, and its
//! version macros must match Cargo.toml.

use std::path::Path;

fn generate() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let cfg =
        cbindgen::Config::from_file(Path::new(dir).join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(cfg)
        .generate()
        .expect("cbindgen generation")
        .write(&mut out);
    String::from_utf8(out).expect("utf8 header")
}

#[test]
fn header_matches_sources() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/dagrt.h");
    let fresh = generate();
    if std::env::var_os("DAGRT_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write header");
    }
    let committed = std::fs::read_to_string(&path).expect("include/dagrt.h");
    assert!(
        committed == fresh,
        "include/dagrt.h drifted from the Rust sources; regenerate with `DAGRT_BLESS=1 cargo test --test header`"
    );
}

#[test]
fn version_macros_match_cargo() {
    let h = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/dagrt.h"))
        .unwrap();
    let get = |name: &str| -> u32 {
        let line = h
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} missing"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let (maj, min, pat) = (
        get("DAGRT_VERSION_MAJOR"),
        get("DAGRT_VERSION_MINOR"),
        get("DAGRT_VERSION_PATCH"),
    );
    assert_eq!(maj, env!("CARGO_PKG_VERSION_MAJOR").parse::<u32>().unwrap());
    assert_eq!(min, env!("CARGO_PKG_VERSION_MINOR").parse::<u32>().unwrap());
    assert_eq!(pat, env!("CARGO_PKG_VERSION_PATCH").parse::<u32>().unwrap());
    assert!(h.contains(&format!(
        "#define DAGRT_VERSION_STRING \"{}\"",
        env!("CARGO_PKG_VERSION")
    )));
    // The packed number's formula (rustls-ffi once shifted MINOR twice); test_abi.c checks
    // its value as the C compiler computes it.
    assert!(h.contains(
        "((DAGRT_VERSION_MAJOR << 16) | (DAGRT_VERSION_MINOR << 8) | DAGRT_VERSION_PATCH)"
    ));
    // SAFETY: dagrt_version returns a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(dagrt::capi::dagrt_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn limit_macros_match_the_engine() {
    let h = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/dagrt.h"))
        .unwrap();
    let get = |name: &str| -> u64 {
        let line = h
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} missing"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    assert_eq!(
        get("DAGRT_MAX_TENSOR_DIMS"),
        dagrt::task::MAX_TENSOR_DIMS as u64
    );
    assert_eq!(
        get("DAGRT_MAX_SCOPE_DEPTH"),
        dagrt::scope::MAX_SCOPE_DEPTH as u64
    );
    assert_eq!(get("DAGRT_HEAP_ALIGN"), dagrt::ring::HEAP_ALIGN);
    // nothing unprefixed: every macro the header defines starts with DAGRT_
    for l in h.lines().filter(|l| l.starts_with("#define ")) {
        assert!(
            l["#define ".len()..].starts_with("DAGRT_"),
            "unprefixed macro: {l}"
        );
    }
}
