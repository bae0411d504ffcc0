//! End-to-end tests of what the command line says about itself and about
//! what it stores: the `--json` of the listing commands (`campaigns`,
//! `plan`, `preset list`) against their text, the shell completion
//! scripts checked by each shell and used by bash, and the manual pages
//! rendered by man. The one campaign here is tiny and fair-class only.

use std::path::Path;
use std::process::Command;

use crate::common;
use common::{require_tool, schedlab, text};

/// Standard output of a successful schedlab command.
fn stdout_of(args: &[&str], dir: &Path) -> String {
    let o = schedlab(args, dir);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn json_of(args: &[&str], dir: &Path) -> serde_json::Value {
    serde_json::from_str(&stdout_of(args, dir)).unwrap()
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn listings_in_json_say_what_their_text_says() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("tiny.toml"),
        "name = \"tiny\"\nrepetitions = 2\ncooldown_s = 0\ntimeout_s = 30\n[matrix]\n\
         policy = [\"other\"]\nworkload = [\"pi\"]\nprocesses = [1, 2]\n[workloads.pi]\n\
         iterations = 1000000\n",
    )
    .unwrap();

    // Before the campaign: every run to run, none listed as stored.
    let plan = json_of(
        &["plan", "tiny.toml", "--db", "t.db", "--json", "--list"],
        d,
    );
    assert_eq!(plan["campaign"], "tiny");
    assert_eq!(plan["processes"], serde_json::json!([1, 2]));
    assert_eq!(
        (plan["runs"].as_u64(), plan["to_run"].as_u64()),
        (Some(4), Some(4))
    );
    let list = plan["list"].as_array().unwrap();
    assert_eq!(list.len(), 4);
    assert!(list.iter().all(|r| r["stored"] == false));
    assert!(plan["estimate_s"].as_f64().unwrap() > 0.0);
    let without_list = json_of(&["plan", "tiny.toml", "--db", "t.db", "--json"], d);
    assert!(without_list.get("list").is_none());

    let o = schedlab(&["run", "tiny.toml", "--db", "t.db", "--quiet"], d);
    assert!(o.status.success(), "{}", text(&o));

    // After: the same runs, all stored, as the text says.
    let plan = json_of(
        &["plan", "tiny.toml", "--db", "t.db", "--json", "--list"],
        d,
    );
    assert_eq!(
        (plan["stored"].as_u64(), plan["to_run"].as_u64()),
        (Some(4), Some(0))
    );
    assert!(
        plan["list"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["stored"] == true)
    );
    let plan_text = stdout_of(&["plan", "tiny.toml", "--db", "t.db"], d);
    assert!(
        plan_text.contains("runs         4 (4 stored in t.db, 0 to run)"),
        "{plan_text}"
    );

    let campaigns = json_of(&["campaigns", "--db", "t.db", "--json"], d);
    let c = &campaigns.as_array().unwrap()[0];
    assert_eq!(campaigns.as_array().unwrap().len(), 1);
    assert_eq!(c["campaign"]["name"], "tiny");
    assert_eq!((c["ok"].as_u64(), c["failed"].as_u64()), (Some(4), Some(0)));
    let table = stdout_of(&["campaigns", "--db", "t.db"], d);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[0], c["campaign"]["id"].to_string());
    assert_eq!((row[1], row[3], row[4]), ("tiny", "4", "4"));

    let presets = json_of(&["preset", "list", "--json"], d);
    let names: Vec<&str> = presets
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let text_names: Vec<String> = stdout_of(&["preset", "list"], d)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(names, text_names);
    assert!(names.contains(&"quick"));
}

#[test]
fn bash_completes_commands_and_values_from_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("schedlab.bash");
    std::fs::write(&script, stdout_of(&["completions", "bash"], dir.path())).unwrap();
    // What bash offers after `schedlab camp` and after `report --metric `.
    let complete = |words: &str, cword: usize| {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; \
                 _schedlab schedlab \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
                 echo \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(complete("schedlab camp", 1), "campaigns");
    assert!(complete("schedlab report --metric ''", 3).contains("nivcsw"));
    assert!(!complete("schedlab ''", 1).contains("__worker"));
}

#[test]
fn each_shell_accepts_its_script() {
    let dir = tempfile::tempdir().unwrap();
    // (shell, its syntax check, the script's file name)
    for (shell, check, file) in [
        ("bash", &["-n"][..], "schedlab.bash"),
        ("zsh", &["-n"][..], "_schedlab"),
        ("fish", &["--no-execute"][..], "schedlab.fish"),
    ] {
        if !require_tool(
            have(shell),
            format!("{shell} is not installed (apt-get install {shell})"),
        ) {
            continue;
        }
        let script = dir.path().join(file);
        std::fs::write(&script, stdout_of(&["completions", shell], dir.path())).unwrap();
        let o = Command::new(shell)
            .args(check)
            .arg(&script)
            .output()
            .unwrap();
        assert!(o.status.success(), "{shell}: {}", text(&o));
    }
}

#[test]
fn the_man_pages_render() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let page = stdout_of(&["man"], d);
    assert!(page.contains(".TH schedlab 1"));
    let o = schedlab(&["man", "--dir", "pages"], d);
    assert!(!o.status.success(), "a missing --dir is refused");
    assert!(text(&o).contains("--dir pages"), "{}", text(&o));
    std::fs::create_dir(d.join("pages")).unwrap();
    stdout_of(&["man", "--dir", "pages"], d);
    let top = std::fs::read_to_string(d.join("pages/schedlab.1")).unwrap();
    assert_eq!(top, page, "--dir writes the same top page");
    for name in [
        "schedlab-run.1",
        "schedlab-export.1",
        "schedlab-policy-exec.1",
    ] {
        assert!(d.join("pages").join(name).is_file(), "{name}");
    }
    if !require_tool(have("man"), "man is not installed (apt-get install man-db)") {
        return;
    }
    let o = Command::new("man")
        .args(["-l", "pages/schedlab-export.1"])
        .current_dir(d)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("schedlab-export"), "{shown}");
    assert!(shown.contains("parquet"), "{shown}");
}

/// A count that must be positive is refused at 0 naming its flag, before
/// any work, rather than quietly taken as 1.
#[test]
fn bench_counts_of_zero_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (args, flag) in [
        (
            &["bench", "report", "--repetitions", "0"][..],
            "--repetitions",
        ),
        (&["bench", "trace", "--trials", "0"][..], "--trials"),
        (
            &["bench", "model", "--repetitions", "1"][..],
            "--repetitions",
        ),
    ] {
        let o = schedlab(args, dir.path());
        assert!(!o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(flag), "{args:?}: {}", text(&o));
    }
}
