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

/// Run `snippet` in bash after sourcing the helper, with `dir` as the whole PATH.
fn run(dir: &Path, snippet: &str, uid: u32, installed: &str, quiet: bool) -> (Output, String) {
    let log = dir.join("apt.log");
    let _ = std::fs::remove_file(&log);
    let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/need_commands.sh");
    let mut cmd = Command::new("/bin/bash");
    cmd.arg("-c")
        .arg(format!(
            "set -euo pipefail; . '{}'; {snippet}",
            helper.display()
        ))
        .env_clear()
        .env("PATH", dir)
        .env("APT_LOG", &log)
        .env("FAKE_UID", uid.to_string())
        .env("INSTALLED", installed);
    if quiet {
        cmd.env("APT_QUIET", "1");
    }
    let out = cmd.output().expect("bash runs");
    (out, std::fs::read_to_string(&log).unwrap_or_default())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn it_lists_what_is_missing() {
    let d = stub_path("missing", true);
    let (o, apt) = run(
        &d,
        "missing_for_commands no-such-tool-q:pkg-a sort:pkg-sort grep:pkg-grep other-tool-q:pkg-b",
        0,
        "",
        false,
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), "pkg-a\npkg-b\n");
    assert_eq!(apt, "", "listing installs nothing");

    let (o, _) = run(&d, "missing_packages libx liby libz", 0, "liby", false);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), "libx\nlibz\n");
}

#[test]
fn without_dpkg_no_package_is_reported_missing() {
    let d = stub_path("nodpkg", false);
    let (o, apt) = run(
        &d,
        "missing_packages libx; need_packages libx",
        0,
        "",
        false,
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), "");
    assert_eq!(apt, "");
}

#[test]
fn one_install_for_everything_each_package_once() {
    let d = stub_path("install", true);
    let snippet = "apt_install $(missing_for_commands no-such-tool-q:pkg-b other-tool-q:pkg-b) \
                   $(missing_packages libx liby)";
    let (o, apt) = run(&d, snippet, 0, "liby", false);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        apt, "update\ninstall -y --no-install-recommends libx pkg-b\n",
        "one update, one install, sorted and deduplicated"
    );
    assert!(stdout(&o).contains("== installing: libx pkg-b"));

    let (o, apt) = run(&d, snippet, 0, "liby", true);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        apt,
        "update -qq\ninstall -y -qq --no-install-recommends libx pkg-b\n"
    );
}

#[test]
fn nothing_missing_runs_no_apt_get() {
    let d = stub_path("nothing", true);
    let (o, apt) = run(
        &d,
        "need_commands sort:pkg-sort; need_packages libx; apt_install",
        1000,
        "libx",
        false,
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(apt, "");
    assert_eq!(stdout(&o), "");
}

#[test]
fn not_root_names_the_packages_and_fails() {
    let d = stub_path("notroot", true);
    let (o, apt) = run(&d, "need_packages libx libz", 1000, "", false);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not root: install libx libz first"),
        "{o:?}"
    );
    assert_eq!(apt, "");
}
