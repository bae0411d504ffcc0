//! End to end: specs with `command` workloads through the loader and
//! `schedlab plan`: a program missing from PATH is refused naming its key
//! and the program, a program in PATH plans with its figures and parser,
//! and a mistake inside a figure's table names the figure's full key.

mod common;

use common::{schedlab, text};

const MATRIX: &str = "[matrix]\npolicy = [\"other\"]\nworkload = [\"build\"]\nprocesses = [1]\n";

fn plan(body: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.toml"), format!("{MATRIX}{body}")).unwrap();
    schedlab(&["plan", "c.toml", "--db", "none.db"], dir.path())
}

#[test]
fn plan_refuses_a_program_missing_from_path() {
    let o = plan(
        "[workloads.build]\nkind = \"command\"\nargv = [\"schedlab-no-such-bench\", \"-x\"]\n",
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("workloads.build.argv"), "{t}");
    assert!(
        t.contains("program \"schedlab-no-such-bench\" is not in PATH"),
        "{t}"
    );
    // The setup's program is checked too, under its own key.
    let o = plan(
        "[workloads.build]\nkind = \"command\"\nargv = [\"sh\", \"-c\", \"true\"]\n\
         setup = [\"schedlab-no-such-setup\"]\n",
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("workloads.build.setup"), "{t}");
    assert!(t.contains("\"schedlab-no-such-setup\""), "{t}");
}

#[test]
fn plan_accepts_a_program_in_path_with_figures_and_a_parser() {
    let o = plan(
        r#"
[workloads.build]
kind = "command"
argv = ["sh", "-c", "echo 'Time: 0.5'"]
duration_s = 2
parser = "hackbench"
[workloads.build.figures.secs]
regex = 'Time: ([0-9.]+)'
unit = "s"
better = "lower"
"#,
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("workloads    build"), "{t}");
}

#[test]
fn a_bad_figure_names_its_full_key() {
    let o = plan(
        r#"
[workloads.build]
kind = "command"
argv = ["sh"]
[workloads.build.figures.elapsed]
regex = 'Time: [0-9.]+'
unit = "s"
better = "lower"
"#,
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("workloads.build.figures.elapsed.regex"), "{t}");
    assert!(t.contains("exactly one capture group"), "{t}");
}
