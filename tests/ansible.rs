//! The Ansible playbooks of `ansible/` against two hosts that are this
//! machine: an sshd of the test's own on 127.0.0.2 (host alpha) and one on
//! 127.0.0.3 (host beta, whose sessions lack CAP_SYS_NICE, so that RT
//! policies are refused there), with host and client keys made for the
//! test and a known_hosts of its own. Nothing leaves those two addresses;
//! both sshd are stopped and their keys removed at the end, failed or not.
//!
//! Also: `ansible-lint` passes on `ansible/`, `SCHEDLAB_HOSTNAME` is the
//! hostname schedlab records, and `plan --packages` names the Debian
//! packages of a spec's programs.

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{bin, require, require_tool, schedlab, text};
use schedlab::store::Store;

const ALPHA: &str = "127.0.0.2";
const BETA: &str = "127.0.0.3";
const ALPHA_ID: &str = "0a0a0a0a-0000-8000-8000-00000000000a";
const BETA_ID: &str = "0b0b0b0b-0000-8000-8000-00000000000b";

/// Where a program is: in PATH, else (ansible-playbook, ansible-lint) in
/// the virtual environment `ansible/ci-deps.sh` makes.
fn ansible_tool(name: &str) -> Option<PathBuf> {
    let venv = std::env::var_os("SCHEDLAB_ANSIBLE_VENV")
        .map_or_else(|| PathBuf::from("/opt/schedlab-ansible"), PathBuf::from);
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([venv.join("bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn ansible_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ansible")
}

/// Two sshd of the test's own; stopped, and `/run/sshd` removed when the
/// test made it, on drop. Keys live in `dir`, removed with it.
struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
    children: Vec<Child>,
    made_privsep_dir: bool,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let masters = self.path("control").join("ansible-state/cp");
        for socket in std::fs::read_dir(masters).into_iter().flatten().flatten() {
            let _ = Command::new("ssh")
                .args(["-F", "/dev/null", "-O", "exit", "-o"])
                .arg(format!("ControlPath={}", socket.path().display()))
                .arg("schedlab-test-master")
                .stdin(Stdio::null())
                .output();
        }
        for child in &mut self.children {
            schedlab::sys::proc::kill(child.id() as i32, libc::SIGTERM);
            let _ = child.wait();
        }
        if self.made_privsep_dir {
            let _ = std::fs::remove_dir("/run/sshd");
        }
        for key in ["host_key", "host_key.pub", "client_key", "client_key.pub"] {
            let _ = std::fs::remove_file(self.dir.path().join(key));
        }
    }
}

/// A port free on both addresses.
fn free_port() -> u16 {
    for _ in 0..50 {
        let a = TcpListener::bind((ALPHA, 0)).expect("bind 127.0.0.2");
        let port = a.local_addr().unwrap().port();
        if TcpListener::bind((BETA, port)).is_ok() {
            return port;
        }
    }
    panic!("no port free on both 127.0.0.2 and 127.0.0.3");
}

fn keygen(path: &Path) {
    let o = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "schedlab-ansible-test",
            "-f",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "ssh-keygen: {}", text(&o));
}

impl Sshd {
    /// Starts sshd on 127.0.0.2 and (without CAP_SYS_NICE in its bounding
    /// and inheritable sets, so in every session) on 127.0.0.3.
    fn start(sshd: &Path, setpriv: &str) -> Sshd {
        let made_privsep_dir = !Path::new("/run/sshd").exists();
        if made_privsep_dir {
            std::fs::create_dir("/run/sshd").unwrap();
        }
        let mut s = Sshd {
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            children: Vec::new(),
            made_privsep_dir,
        };
        let d = s.dir.path().to_path_buf();
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
        let known: String = [ALPHA, BETA]
            .iter()
            .map(|a| format!("[{a}]:{} {}", s.port, host_pub))
            .collect();
        std::fs::write(d.join("known_hosts"), known).unwrap();
        for (addr, drop_nice) in [(ALPHA, false), (BETA, true)] {
            let config = d.join(format!("sshd-{addr}.conf"));
            std::fs::write(
                &config,
                format!(
                    "ListenAddress {addr}:{port}\nHostKey {d}/host_key\nPidFile {d}/sshd-{addr}.pid\n\
                     AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                     AllowUsers root\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     UsePAM no\nStrictModes no\nX11Forwarding no\nAllowTcpForwarding no\n\
                     AllowAgentForwarding no\nPermitTunnel no\nPrintMotd no\nUseDNS no\n\
                     Subsystem sftp internal-sftp\nLogLevel ERROR\n",
                    port = s.port,
                    d = d.display()
                ),
            )
            .unwrap();
            let mut cmd = if drop_nice {
                let mut c = Command::new(setpriv);
                c.args(["--bounding-set", "-sys_nice", "--inh-caps", "-sys_nice"])
                    .arg(sshd);
                c
            } else {
                Command::new(sshd)
            };
            cmd.arg("-D")
                .arg("-f")
                .arg(&config)
                .arg("-E")
                .arg(d.join(format!("sshd-{addr}.log")))
                .stdin(Stdio::null());
            s.children.push(cmd.spawn().expect("start sshd"));
        }
        for addr in [ALPHA, BETA] {
            let sa: SocketAddr = format!("{addr}:{}", s.port).parse().unwrap();
            let t0 = Instant::now();
            while TcpStream::connect_timeout(&sa, Duration::from_millis(200)).is_err() {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "sshd on {sa} did not start: {}",
                    std::fs::read_to_string(d.join(format!("sshd-{addr}.log"))).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        s
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The inventory: alpha and beta, each with a distinct identity that
/// schedlab records, a directory of its own, and the test's spec.
fn inventory(s: &Sshd, work: &Path) -> String {
    let d = s.dir.path().display();
    format!(
        r#"schedlab:
  hosts:
    alpha:
      ansible_host: {ALPHA}
      schedlab_host_id: {ALPHA_ID}
    beta:
      ansible_host: {BETA}
      schedlab_host_id: {BETA_ID}
  vars:
    ansible_port: {port}
    ansible_user: root
    ansible_ssh_private_key_file: {d}/client_key
    ansible_ssh_common_args: >-
      -F /dev/null -o UserKnownHostsFile={d}/known_hosts -o GlobalKnownHostsFile=/dev/null
      -o StrictHostKeyChecking=yes -o BatchMode=yes
    ansible_python_interpreter: /usr/bin/python3
    schedlab_spec: spec.toml
    schedlab_local_bin: {bin}
    schedlab_dir: "{work}/{{{{ inventory_hostname }}}}"
    schedlab_hostname: "{{{{ inventory_hostname }}}}"
    schedlab_run_args: [--allow-concurrent]
    schedlab_poll_s: 1
    schedlab_results: results
"#,
        port = s.port,
        bin = bin(),
        work = work.display(),
    )
}

const SPEC: &str = r#"name = "fleet"
repetitions = 4
seed = 3
cooldown_s = 0.5
timeout_s = 30
[matrix]
policy = ["other", "batch"]
workload = ["pi"]
processes = [1]
cpus = ["0"]
[workloads.pi]
iterations = 50_000_000
"#;

/// ansible-playbook PLAYBOOK in `dir`, with everything Ansible writes on
/// the control node and on the hosts (temporary files, async job files,
/// ssh control sockets) kept under `dir`.
fn playbook(dir: &Path, playbook: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(ansible_tool("ansible-playbook").unwrap());
    let a = dir.join("ansible-state");
    cmd.arg("-i")
        .arg(dir.join("inventory.yml"))
        .arg(ansible_dir().join(playbook))
        .args(extra)
        .current_dir(dir)
        .env("PWD", dir)
        .env("HOME", &a)
        .env("ANSIBLE_HOME", &a)
        .env("ANSIBLE_LOCAL_TEMP", a.join("local-tmp"))
        .env("ANSIBLE_REMOTE_TMP", a.join("remote-tmp"))
        .env("ANSIBLE_ASYNC_DIR", a.join("async"))
        .env("ANSIBLE_SSH_CONTROL_PATH_DIR", a.join("cp"))
        // Only the environment configures Ansible: an empty file, so that
        // no ansible.cfg of the machine or the user is read.
        .env("ANSIBLE_CONFIG", dir.join("ansible.cfg"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .env("ANSIBLE_HOST_KEY_CHECKING", "1")
        // One ssh connection per host for a whole play (a handshake per
        // task cost about a tenth of the test's time); the masters'
        // sockets live in ansible-state/cp, and `Sshd`'s drop ends every
        // master found there.
        .env(
            "ANSIBLE_SSH_ARGS",
            "-o ControlMaster=auto -o ControlPersist=30s",
        )
        .env("ANSIBLE_PIPELINING", "1")
        .env_remove("SCHEDLAB_DB")
        .stdin(Stdio::null());
    cmd
}

fn run_playbook(dir: &Path, extra: &[&str]) -> Output {
    playbook(dir, "site.yml", extra).output().unwrap()
}

/// The campaign summaries of a database.
fn campaigns(db: &Path) -> Vec<schedlab::store::CampaignSummary> {
    Store::open_existing(db).unwrap().campaigns().unwrap()
}

/// Every run of `c` stored once: as many rows as distinct keys, and as
/// many as the campaign planned.
fn stored_once(db: &Path, c: &schedlab::store::CampaignSummary) {
    let store = Store::open_existing(db).unwrap();
    let keys = store.finished_keys(c.campaign.id).unwrap();
    assert_eq!(c.total_runs(), keys.len() as u64, "a run stored twice");
    assert_eq!(c.total_runs(), c.campaign.planned_runs);
}

/// The pid of the `schedlab run` whose database is `db`, if one runs.
fn campaign_pid(db: &Path) -> Option<i32> {
    let want = db.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_run = args.first()?.ends_with("schedlab") && args.get(1)? == "run";
        (is_run && args.contains(&want)).then_some(pid)
    })
}

/// Stored runs of the first campaign in `db`, 0 while there is none.
fn stored_runs(db: &Path) -> u64 {
    if !db.exists() {
        return 0;
    }
    Store::open_existing(db)
        .ok()
        .and_then(|s| s.campaigns().ok())
        .and_then(|c| c.first().map(|c| c.total_runs()))
        .unwrap_or(0)
}

/// Runs site.yml in a process group of its own and watches alpha's
/// campaign: once `ready(stored runs)` holds while it runs, `act(pid of
/// alpha's schedlab run, the play's process group)`. Returns the play's
/// exit code and output, and the stored runs when it acted.
fn play_and_act(
    dir: &Path,
    alpha_db: &Path,
    name: &str,
    ready: impl Fn(u64) -> bool,
    act: impl FnOnce(i32, i32),
) -> (Option<i32>, String, u64) {
    use std::os::unix::process::CommandExt;
    let log = dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).unwrap();
    let mut child = playbook(dir, "site.yml", &[])
        .process_group(0)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let group = child.id() as i32;
    let t0 = Instant::now();
    let mut acted_at = None;
    while t0.elapsed() < Duration::from_secs(240) && child.try_wait().unwrap().is_none() {
        let n = stored_runs(alpha_db);
        if let Some(pid) = campaign_pid(alpha_db).filter(|_| ready(n)) {
            act(pid, group);
            acted_at = Some(n);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if acted_at.is_none() {
        let _ = schedlab::sys::proc::kill_group(group, libc::SIGKILL);
    }
    let status = child.wait().unwrap();
    let out = std::fs::read_to_string(&log).unwrap();
    let n = acted_at.unwrap_or_else(|| panic!("{name}: alpha's campaign was never seen: {out}"));
    (status.code(), out, n)
}

/// Whether process `pid` exists.
fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn the_playbook_runs_resumes_collects_and_refuses_a_host_without_rt() {
    let _serial = common::serial();
    let (Some(sshd), Some(keygen)) = (
        ["/usr/sbin/sshd", "/sbin/sshd"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists()),
        ansible_tool("ssh-keygen"),
    ) else {
        assert!(!require_tool(
            false,
            "sshd or ssh-keygen not found (apt-get install openssh-server)"
        ));
        return;
    };
    if !require_tool(
        keygen.exists() && ansible_tool("ansible-playbook").is_some(),
        "ansible-playbook not found (bash ansible/ci-deps.sh)",
    ) || !require(
        schedlab::sys::proc::euid() == 0 && common::setpriv().is_some(),
        "needs root (sshd, and root's ssh logins) and setpriv",
    ) || !common::may_use_rt()
    {
        return;
    }
    let s = Sshd::start(&sshd, common::setpriv().unwrap());
    let dir = s.path("control");
    let work = s.path("hosts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("inventory.yml"), inventory(&s, &work)).unwrap();
    std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
    std::fs::write(dir.join("ansible.cfg"), "").unwrap();
    let alpha_db = work.join("alpha/results.db");
    let beta_db = work.join("beta/results.db");
    let fleet = dir.join("results/fleet.db");
    let planned = 8;

    // 1. Both hosts run; alpha's campaign is stopped part-way: alpha is
    // reported failed, beta completes and is collected.
    let (code, log, stored_when_killed) = play_and_act(
        &dir,
        &alpha_db,
        "first-play",
        |n| n >= 1,
        |pid, _| schedlab::sys::proc::kill(pid, libc::SIGTERM),
    );
    assert!(
        stored_when_killed < planned,
        "alpha finished before it could be stopped"
    );
    assert_eq!(code, Some(2), "{log}");
    assert!(log.contains("alpha: schedlab run exited with 143"), "{log}");
    assert!(
        log.contains("beta") && !log.contains("beta refused"),
        "{log}"
    );
    let c = campaigns(&beta_db);
    assert_eq!(c.len(), 1);
    stored_once(&beta_db, &c[0]);
    let alpha_before = campaigns(&alpha_db);
    assert!(alpha_before[0].total_runs() >= stored_when_killed);
    assert!(alpha_before[0].total_runs() < planned, "{log}");
    let beta_bytes = std::fs::read(&beta_db).unwrap();

    // 2. Again: alpha resumes its campaign (beta's is complete), and the
    // control node loses its connection (the play is killed) while it
    // runs: the campaign goes on without it, to the end.
    let resumed_from = alpha_before[0].total_runs();
    let mut campaign = 0;
    let (_, log, at_kill) = play_and_act(
        &dir,
        &alpha_db,
        "second-play",
        |_| true,
        |pid, group| {
            campaign = pid;
            schedlab::sys::proc::kill_group(group, libc::SIGKILL).unwrap();
        },
    );
    assert!(
        at_kill < planned,
        "alpha had finished when the play was killed"
    );
    let t0 = Instant::now();
    while stored_runs(&alpha_db) < planned || alive(campaign) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "alpha's campaign did not go on without the play: {} of {planned} runs (from \
             {resumed_from}); {log}",
            stored_runs(&alpha_db)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // 3. Again: both campaigns are complete and left alone; both are
    // merged and reported by host.
    let out = run_playbook(&dir, &[]);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    for host in ["alpha", "beta"] {
        let want = format!("{host}: campaign complete, 8 runs stored; left alone");
        assert!(log.contains(&want), "{want}: {log}");
    }
    assert_eq!(
        std::fs::read(&beta_db).unwrap(),
        beta_bytes,
        "beta's database was written"
    );
    let alpha_after = campaigns(&alpha_db);
    assert_eq!(
        alpha_after.len(),
        1,
        "alpha resumed rather than started anew"
    );
    assert_eq!(alpha_after[0].campaign.uuid, alpha_before[0].campaign.uuid);
    stored_once(&alpha_db, &alpha_after[0]);

    check_merged_and_reported(&dir, &fleet);
    check_beta_refused_fifo(&dir, &beta_db, &beta_bytes);
    drop(s);
}

/// Both hosts' campaigns merged into the fleet's database, each stored
/// once under its host, and reported and exported by host.
fn check_merged_and_reported(dir: &Path, fleet: &Path) {
    let merged = campaigns(fleet);
    let mut hosts: Vec<_> = merged
        .iter()
        .map(|c| {
            stored_once(fleet, c);
            (
                c.campaign.hostname.clone().unwrap_or_default(),
                c.campaign.host_id.clone().unwrap_or_default(),
            )
        })
        .collect();
    hosts.sort();
    assert_eq!(
        hosts,
        [
            ("alpha".to_string(), ALPHA_ID.to_string()),
            ("beta".to_string(), BETA_ID.to_string())
        ]
    );
    let report = std::fs::read_to_string(dir.join("results/report.md")).unwrap();
    for want in ["host alpha", "host beta"] {
        assert!(report.contains(want), "{want} not in the report:\n{report}");
    }
    for f in [
        "report.html",
        "runs.parquet",
        "hosts/alpha.parquet",
        "hosts/beta.parquet",
    ] {
        assert!(dir.join("results").join(f).is_file(), "{f} not written");
    }
}

/// Step 4: the spec with SCHED_FIFO (a --set override of the inventory's),
/// run.yml on beta alone: beta, whose sessions lack CAP_SYS_NICE, is
/// refused by name with the reason, and runs nothing. (Only beta: a
/// second campaign on alpha and another collect cost a quarter of the
/// test and check nothing the merges above and tests/suite/fleet.rs do not.)
fn check_beta_refused_fifo(dir: &Path, beta_db: &Path, beta_bytes: &[u8]) {
    let out = playbook(
        dir,
        "run.yml",
        &[
            "--limit",
            "beta",
            "-e",
            r#"{"schedlab_set": ["matrix.policy=[\"other\",\"fifo\"]", "repetitions=1"]}"#,
        ],
    )
    .output()
    .unwrap();
    let log = text(&out);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert!(
        log.contains("beta refused: the spec needs fifo, not permitted here: EPERM"),
        "{log}"
    );
    assert_eq!(campaigns(beta_db).len(), 1, "beta ran nothing");
    assert_eq!(std::fs::read(beta_db).unwrap(), beta_bytes);
}

#[test]
fn ansible_lint_passes_on_the_playbooks() {
    let Some(lint) = ansible_tool("ansible-lint") else {
        assert!(!require_tool(
            false,
            "ansible-lint not found (bash ansible/ci-deps.sh)"
        ));
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let path = std::env::join_paths(lint.parent().into_iter().map(Path::to_path_buf).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let o = Command::new(&lint)
        .args(["--offline", "--nocolor", "-q"])
        .env("PATH", path)
        .current_dir(ansible_dir())
        .env("HOME", home.path())
        .env("ANSIBLE_HOME", home.path())
        .env("ANSIBLE_LOCAL_TEMP", home.path().join("tmp"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "ansible-lint: {}", text(&o));
}

#[test]
fn schedlab_hostname_is_the_hostname_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let env = |name: Option<&str>| -> serde_json::Value {
        let mut cmd = Command::new(bin());
        cmd.args(["env", "--json"]).current_dir(dir.path());
        match name {
            Some(n) => cmd.env("SCHEDLAB_HOSTNAME", n),
            None => cmd.env_remove("SCHEDLAB_HOSTNAME"),
        };
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let own = env(None)["env"]["hostname"].as_str().unwrap().to_string();
    assert_eq!(env(Some(" lab-7 \n"))["env"]["hostname"], "lab-7");
    assert_eq!(
        env(Some("  "))["env"]["hostname"],
        own.as_str(),
        "blank: not an override"
    );
}

#[test]
fn plan_packages_names_the_debian_packages_of_a_specs_programs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.toml"),
        "name = \"tools\"\n[matrix]\nworkload = [\"hb\", \"own\", \"pi\"]\n\
         [workloads.hb]\nkind = \"command\"\nargv = [\"/nowhere/hackbench\", \"-l\", \"10\"]\n\
         setup = [\"cc\", \"--version\"]\n\
         [workloads.own]\nkind = \"command\"\nargv = [\"no-such-tool-here\"]\n",
    )
    .unwrap();
    // The programs are not installed: plan refuses, --packages answers.
    let o = schedlab(&["plan", "s.toml", "--packages"], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "gcc\nrt-tests\n");
    let o = schedlab(&["plan", "s.toml", "--packages", "--json"], dir.path());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["packages"], serde_json::json!(["gcc", "rt-tests"]));
    assert_eq!(
        v["programs"],
        serde_json::json!(["/nowhere/hackbench", "cc", "no-such-tool-here"])
    );
    let o = schedlab(&["plan", "s.toml"], dir.path());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
