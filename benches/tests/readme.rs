//! The README's front door against what CI runs.
//! - The README's first section is "The two commands", and its first code block holds exactly two
//!   commands: the main job (`cargo run ... -p nemesis-bench -- pingpong`) and the test suite.
//! - `.ci/run` runs both as written: the test command as a line of its own, the main job as a
//!   line of its own, with at most extra options after it (`--quick`).

use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The commands of the first code block after `## The two commands`, comments removed.
fn readme_commands(readme: &str) -> Vec<String> {
    let first_section = readme.lines().find(|l| l.starts_with("## ")).expect("a section in README.md");
    assert_eq!(first_section, "## The two commands", "README.md must open with the two commands");
    let from = readme.find("## The two commands").unwrap();
    let block = readme[from..].split("```").nth(1).expect("a code block under \"The two commands\"");
    block
        .lines()
        .skip(1) // the fence's language tag
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The lines of `.ci/run` that run a command (not comments), trimmed.
fn ci_lines(ci: &str) -> Vec<String> {
    ci.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect()
}

fn check(readme: &str, ci: &str) -> Result<(), String> {
    let cmds = readme_commands(readme);
    let [main, test] = cmds.as_slice() else {
        return Err(format!("the README's first block should hold two commands, it holds {cmds:?}"));
    };
    if !(main.starts_with("cargo run ") && main.contains("-p nemesis-bench") && main.ends_with("-- pingpong")) {
        return Err(format!("the first command is not the main job: {main:?}"));
    }
    if !test.starts_with("cargo test") {
        return Err(format!("the second command is not the test suite: {test:?}"));
    }
    let lines = ci_lines(ci);
    if !lines.iter().any(|l| l == test) {
        return Err(format!(".ci/run does not run the README's test command {test:?}"));
    }
    let runs_main = lines
        .iter()
        .any(|l| l.strip_prefix(main.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(" --")));
    if !runs_main {
        return Err(format!(".ci/run does not run the README's main command {main:?}"));
    }
    Ok(())
}

#[test]
fn the_readmes_two_commands_are_the_ones_ci_runs() {
    if let Err(e) = check(&read("README.md"), &read(".ci/run")) {
        panic!("{e}");
    }
}

/// The check itself can fail: a README whose commands CI does not run, or that opens otherwise.
#[test]
fn the_check_fails_on_commands_ci_does_not_run() {
    let readme = "# x\n\n## The two commands\n\n```sh\ncargo run --release -p nemesis-bench -- pingpong   # main\n\
                  cargo test --workspace   # tests\n```\n";
    let ci = "cargo test --workspace\ncargo run --release -p nemesis-bench -- pingpong --quick\n";
    assert_eq!(check(readme, ci), Ok(()));
    assert!(check(readme, "cargo test --workspace\n").is_err(), "main job missing from CI");
    assert!(check(readme, "# cargo test --workspace\ncargo run --release -p nemesis-bench -- pingpong\n").is_err());
    assert!(
        check(readme, "cargo test --workspace --release\ncargo run --release -p nemesis-bench -- pingpong\n").is_err()
    );
    let other = readme.replace("cargo test --workspace", "cargo test -p nemesis");
    assert!(check(&other, ci).is_err(), "another test command");
    let late = readme.replace("## The two commands", "## Intro\n\n## The two commands");
    assert!(std::panic::catch_unwind(|| check(&late, ci)).is_err(), "the commands must come first");
}
