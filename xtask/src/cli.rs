//! The arguments of `cargo xtask`, parsed into the command to run, apart from
//! running it, so that a test can check every `cargo xtask` command the docs
//! show: a command or flag removed here and still documented fails the suite.

/// The usage line.
pub const USAGE: &str = "usage: cargo xtask <tools | test | run [--release] [--keep] [--visibility-timeout SECONDS] [--managed-instances] ... | build-arm64 | test-arm64 CARGO-TEST-ARGS... | sam-local [--quick] | check-init | lab [--quick | SECTION] | new-function NAME | remove-function NAME | user-changes>";

/// A `cargo xtask` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Tools,
    Test,
    /// `local-stack run` with these flags (the local stack parses them).
    Run(Vec<String>),
    BuildArm64,
    /// `cargo test` with these arguments, built for arm64 and run under qemu.
    TestArm64(Vec<String>),
    SamLocal {
        quick: bool,
    },
    CheckInit,
    LabQuick,
    /// The lab with these arguments (the lab parses them).
    Lab(Vec<String>),
    NewFunction(String),
    RemoveFunction(String),
    UserChanges,
    Help,
}

/// `args` (after `cargo xtask`) as a command, or the usage line.
pub fn parse(args: &[&str]) -> Result<Command, String> {
    let owned = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect();
    Ok(match args {
        ["tools"] => Command::Tools,
        ["test"] => Command::Test,
        ["run", flags @ ..] => Command::Run(owned(flags)),
        ["build-arm64"] => Command::BuildArm64,
        ["test-arm64", args @ ..] if !args.is_empty() => Command::TestArm64(owned(args)),
        ["sam-local"] => Command::SamLocal { quick: false },
        ["sam-local", "--quick"] => Command::SamLocal { quick: true },
        ["check-init"] => Command::CheckInit,
        ["lab", "--quick"] => Command::LabQuick,
        ["lab", flags @ ..] => Command::Lab(owned(flags)),
        ["new-function", name] => Command::NewFunction((*name).to_owned()),
        ["remove-function", name] => Command::RemoveFunction((*name).to_owned()),
        ["user-changes"] => Command::UserChanges,
        ["--help" | "-h" | "help"] => Command::Help,
        _ => return Err(USAGE.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `cargo xtask ...` command line `text` shows, its arguments split:
    /// up to the end of its code span or line, a shell operator or comment, or
    /// a usage placeholder (`[...]`, `<...>`); `NAME`-like placeholders become
    /// a sample value.
    fn documented_commands(text: &str) -> Vec<Vec<String>> {
        let mut found = vec![];
        for (at, _) in text.match_indices("cargo xtask ") {
            let rest = &text[at + "cargo xtask ".len()..];
            let end = rest
                .find(['`', '\n', '|', ';', '#', ')', '&', '\''])
                .unwrap_or(rest.len());
            let mut args = vec![];
            for word in rest[..end].split_whitespace() {
                if word.starts_with('[') || word.starts_with('<') || word.ends_with(',') {
                    break;
                }
                let placeholder = word.len() > 1
                    && word
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c == '-' || c == '.');
                args.push(if placeholder {
                    "example".to_owned()
                } else {
                    word.to_owned()
                });
            }
            if !args.is_empty() {
                found.push(args);
            }
        }
        found
    }

    #[test]
    fn every_documented_command_parses() {
        let root = crate::command::workspace_root();
        let mut docs = vec![
            root.join("README.md"),
            root.join("CONTRIBUTING.md"),
            root.join("ARCHITECTURE.md"),
        ];
        for dir in ["functions", "tools", "tests", "xtask", "shared"] {
            docs.extend(readmes(&root.join(dir)));
        }
        let mut refused = vec![];
        let mut seen = 0;
        for doc in docs {
            let text = std::fs::read_to_string(&doc).unwrap_or_default();
            for args in documented_commands(&text) {
                seen += 1;
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if parse(&args).is_err() {
                    refused.push(format!("{}: cargo xtask {}", doc.display(), args.join(" ")));
                }
            }
        }
        assert!(seen > 10, "the docs show {seen} commands");
        assert!(
            refused.is_empty(),
            "documented, refused:\n{}",
            refused.join("\n")
        );
    }

    /// The `README.md` files under `dir`, a few levels down.
    fn readmes(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut found = vec![];
        let Ok(entries) = std::fs::read_dir(dir) else {
            return found;
        };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            if path.is_dir() && !path.ends_with("target") {
                found.extend(readmes(&path));
            } else if path.file_name().is_some_and(|n| n == "README.md") {
                found.push(path);
            }
        }
        found
    }

    #[test]
    fn commands_are_read_from_the_docs_as_written() {
        let text = "Run `cargo xtask run --keep`, then `cargo xtask new-function NAME`;\n\
            cargo xtask lab [--quick | power]\n| `cargo xtask sam-local` | x |\n\
            cargo xtask test-arm64 -p password-hasher --test differential  # arm64";
        assert_eq!(
            documented_commands(text),
            [
                vec!["run", "--keep"],
                vec!["new-function", "example"],
                vec!["lab"],
                vec!["sam-local"],
                vec![
                    "test-arm64",
                    "-p",
                    "password-hasher",
                    "--test",
                    "differential"
                ],
            ]
        );
        assert!(parse(&["bcrypt-differential"]).is_err());
        assert!(parse(&["sam-local", "--slow"]).is_err());
        assert_eq!(
            parse(&["sam-local", "--quick"]),
            Ok(Command::SamLocal { quick: true })
        );
    }
}
