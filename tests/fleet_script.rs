//! `examples/fleet.sh` against fake `ssh`, `scp` and `nohup` that log what
//! they were asked and play the remote shell locally (in a fake remote
//! home): no spec name, host or directory given to the script may run as
//! shell on the remote host or reach ssh as an option.

mod common;
use common::bin;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory of fakes: `ssh HOST CMD` runs CMD with `sh -c` in `remote`
/// (as the remote login shell would), `scp SRC HOST:DST` copies into
/// `remote`, `nohup` only logs. Each logs its arguments, one per line.
fn fakes(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let fake_bin = dir.join("bin");
    let remote = dir.join("remote-home");
    let log = dir.join("calls.log");
    std::fs::create_dir_all(&fake_bin).unwrap();
    std::fs::create_dir_all(&remote).unwrap();
    let ssh = format!(
        r#"#!/bin/sh
{{ echo "ssh"; for a in "$@"; do echo "  [$a]"; done; }} >> '{log}'
while [ $# -gt 0 ]; do case $1 in --) shift; break ;; -*) shift ;; *) break ;; esac; done
host=$1; shift
cd '{remote}' && exec sh -c "$*"
"#,
        log = log.display(),
        remote = remote.display()
    );
    let scp = format!(
        r#"#!/bin/sh
{{ echo "scp"; for a in "$@"; do echo "  [$a]"; done; }} >> '{log}'
while [ $# -gt 0 ]; do case $1 in --) shift; break ;; -*) shift ;; *) break ;; esac; done
src=$1; dst=${{2#*:}}
case $src in *:*) exit 1 ;; esac
cp -- "$src" '{remote}'/"$dst"
"#,
        log = log.display(),
        remote = remote.display()
    );
    let nohup = format!(
        "#!/bin/sh\n{{ echo nohup; for a in \"$@\"; do echo \"  [$a]\"; done; }} >> '{}'\n",
        log.display()
    );
    for (name, text) in [("ssh", ssh), ("scp", scp), ("nohup", nohup)] {
        let p = fake_bin.join(name);
        std::fs::write(&p, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (fake_bin, remote, log)
}

fn fleet(dir: &Path, fake_bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet.sh");
    let path = format!(
        "{}:{}",
        fake_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .args(args)
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", dir)
        .env("SCHEDLAB", bin());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_spec_file_name_is_never_run_as_shell_on_the_remote_host() {
    let dir = tempfile::tempdir().unwrap();
    let (fake_bin, remote, log) = fakes(dir.path());
    let evil = "x';touch $HOME-PWNED;touch PWNED;echo '.toml";
    std::fs::write(dir.path().join(evil), "name = \"fleet\"\n").unwrap();
    let out = fleet(dir.path(), &fake_bin, &["start", evil, "node1"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let calls = std::fs::read_to_string(&log).unwrap();
    for p in [
        remote.join("PWNED"),
        dir.path().join("PWNED"),
        PathBuf::from(format!("{}-PWNED", dir.path().display())),
    ] {
        assert!(!p.exists(), "{} was created: {calls}", p.display());
    }
    // The spec arrived under a fixed name, and the campaign was started on it.
    let copied = remote.join("schedlab-fleet/spec.toml");
    assert_eq!(
        std::fs::read_to_string(copied).unwrap(),
        "name = \"fleet\"\n"
    );
    assert!(calls.contains("./schedlab run spec.toml"), "{calls}");
    // Every ssh and scp call ends its options with `--` before the host.
    let calls_of = |tool: &str| calls.lines().filter(|l| *l == tool).count();
    let ssh_calls = calls.matches("ssh\n  [--]\n  [node1]\n").count();
    let scp_calls = calls.matches("scp\n  [-q]\n  [--]\n").count();
    assert_eq!(
        (ssh_calls, scp_calls),
        (calls_of("ssh"), calls_of("scp")),
        "{calls}"
    );
    assert!(ssh_calls >= 2 && scp_calls >= 2, "{calls}");
}

#[test]
fn a_host_starting_with_a_dash_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (fake_bin, _, log) = fakes(dir.path());
    std::fs::write(dir.path().join("s.toml"), "name = \"fleet\"\n").unwrap();
    for host in ["-oProxyCommand=touch PWNED", "node;touch PWNED"] {
        let out = fleet(dir.path(), &fake_bin, &["start", "s.toml", host], &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(host), "{}", text(&out));
        let out = fleet(dir.path(), &fake_bin, &["collect", host], &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    }
    assert!(!log.exists(), "ssh or scp was called");
    assert!(!dir.path().join("PWNED").exists());
}

#[test]
fn a_remote_dir_with_shell_characters_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (fake_bin, _, log) = fakes(dir.path());
    std::fs::write(dir.path().join("s.toml"), "name = \"fleet\"\n").unwrap();
    let out = fleet(
        dir.path(),
        &fake_bin,
        &["start", "s.toml", "node1"],
        &[("REMOTE_DIR", "d; touch PWNED")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("REMOTE_DIR"), "{}", text(&out));
    assert!(!log.exists(), "ssh or scp was called");
}
