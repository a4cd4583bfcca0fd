//! `scripts/need_commands.sh`, which the README's two commands (`scripts/showcase.sh`,
//! `scripts/test.sh`) and the bench scripts use to install what a fresh machine lacks: run
//! against stub `apt-get`, `dpkg-query` and `id` on a PATH of their own, so what it would
//! install, and how, is seen without installing anything.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A PATH directory with the stubs and the few real tools the helper uses (`sort`, `grep`).
/// `dpkg`: whether `dpkg-query` exists there (it reports the packages in $INSTALLED as
/// installed); `apt-get` appends its arguments to $APT_LOG; `id -u` prints $FAKE_UID.
fn stub_path(name: &str, dpkg: bool) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dagrt-setup-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let script = |file: &str, body: &str| {
        let p = d.join(file);
        std::fs::write(&p, format!("#!/bin/bash\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    script("apt-get", r#"echo "$*" >> "$APT_LOG""#);
    script("id", r#"echo "$FAKE_UID""#);
    if dpkg {
        // dpkg-query -W -f='${Status}' PACKAGE
        script(
            "dpkg-query",
            r#"for p in $INSTALLED; do [ "$p" = "${!#}" ] && { printf 'install ok installed'; exit 0; }; done; exit 1"#,
        );
    }
    for tool in ["sort", "grep"] {
        let real = ["/usr/bin", "/bin"]
            .iter()
            .map(|b| Path::new(b).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} not found"));
        std::os::unix::fs::symlink(real, d.join(tool)).unwrap();
    }
    d
}

/// Run `snippet` in bash after sourcing the helper, with `dir` as the whole PATH and `env`
/// (FAKE_UID, INSTALLED, APT_QUIET) set; returns the output and what apt-get was asked.
fn run(dir: &Path, snippet: &str, env: &[(&str, &str)]) -> (Output, String) {
    let log = dir.join("apt.log");
    let _ = std::fs::remove_file(&log);
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/need_commands.sh");
    let out = Command::new("/bin/bash")
        .arg("-c")
        .arg(format!(
            "set -euo pipefail; . '{}'; {snippet}",
            helper.display()
        ))
        .env_clear()
        .env("PATH", dir)
        .env("APT_LOG", &log)
        .env("FAKE_UID", "0")
        .env("INSTALLED", "")
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    (out, std::fs::read_to_string(&log).unwrap_or_default())
}

/// `run`, which must succeed: its standard output, and what apt-get was asked.
fn ok(dir: &Path, snippet: &str, env: &[(&str, &str)]) -> (String, String) {
    let (o, apt) = run(dir, snippet, env);
    assert!(o.status.success(), "{snippet}: {o:?}");
    (String::from_utf8_lossy(&o.stdout).into_owned(), apt)
}

#[test]
fn it_lists_what_is_missing() {
    let d = stub_path("missing", true);
    let (out, apt) = ok(
        &d,
        "missing_for_commands no-such-tool-q:pkg-a sort:pkg-sort grep:pkg-grep other-tool-q:pkg-b",
        &[],
    );
    assert_eq!(out, "pkg-a\npkg-b\n");
    assert_eq!(apt, "", "listing installs nothing");

    let (out, _) = ok(
        &d,
        "missing_packages libx liby libz",
        &[("INSTALLED", "liby")],
    );
    assert_eq!(out, "libx\nlibz\n");
}

#[test]
fn without_dpkg_no_package_is_reported_missing() {
    let d = stub_path("nodpkg", false);
    let (out, apt) = ok(&d, "missing_packages libx; need_packages libx", &[]);
    assert_eq!(out, "");
    assert_eq!(apt, "");
}

#[test]
fn one_install_for_everything_each_package_once() {
    let d = stub_path("install", true);
    let snippet = "apt_install $(missing_for_commands no-such-tool-q:pkg-b other-tool-q:pkg-b) \
                   $(missing_packages libx liby)";
    let (out, apt) = ok(&d, snippet, &[("INSTALLED", "liby")]);
    assert_eq!(
        apt, "update\ninstall -y --no-install-recommends libx pkg-b\n",
        "one update, one install, sorted and deduplicated"
    );
    assert!(out.contains("== installing: libx pkg-b"));

    let (_, apt) = ok(&d, snippet, &[("INSTALLED", "liby"), ("APT_QUIET", "1")]);
    assert_eq!(
        apt,
        "update -qq\ninstall -y -qq --no-install-recommends libx pkg-b\n"
    );
}

#[test]
fn nothing_missing_runs_no_apt_get() {
    let d = stub_path("nothing", true);
    let (out, apt) = ok(
        &d,
        "need_commands sort:pkg-sort; need_packages libx; apt_install",
        &[("FAKE_UID", "1000"), ("INSTALLED", "libx")],
    );
    assert_eq!(apt, "");
    assert_eq!(out, "");
}

#[test]
fn not_root_names_the_packages_and_fails() {
    let d = stub_path("notroot", true);
    let (o, apt) = run(&d, "need_packages libx libz", &[("FAKE_UID", "1000")]);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not root: install libx libz first"),
        "{o:?}"
    );
    assert_eq!(apt, "");
}
